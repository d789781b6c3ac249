import type { Response } from 'express';

/** The label every sandbox page carries, so nobody mistakes it for the real GitHub. */
export const SANDBOX_LABEL = 'Sandbox GitHub — simulated, not github.com';

export const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** `html\`…\`` escapes every interpolated value unless it is already `Html` (a nested fragment). */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  values.forEach((v, i) => {
    const part = Array.isArray(v)
      ? v.map((x) => (x instanceof Html ? x.value : escapeHtml(String(x)))).join('')
      : v instanceof Html
        ? v.value
        : escapeHtml(String(v ?? ''));
    out += part + strings[i + 1]!;
  });
  return new Html(out);
}

/** Only plain http(s) origins go into a CSP source list (a URL host may contain `;` or quotes). */
export function cspOrigin(url: string | undefined | null): string | undefined {
  let parsed: URL | undefined;
  try {
    parsed = url ? new URL(url) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) return undefined;
  return /^https?:\/\/[A-Za-z0-9.\-[\]:]+$/.test(parsed.origin) ? parsed.origin : undefined;
}

/** The sandbox's own policy: no script, its own stylesheet, forms to itself (and the client's redirect origin). */
export function contentSecurityPolicy(formActionOrigin?: string): string {
  return `default-src 'none'; style-src 'self'; form-action ${formActionOrigin ? `${formActionOrigin} ` : ''}'self'; frame-ancestors 'none'`;
}

export interface PageOptions {
  /** Path of the sandbox's mount point ('' at the root), for the stylesheet link. */
  basePath: string;
  /** `<title>` and `<h1>`. */
  title: string;
  body: Html;
  status?: number;
  /** Extra origin allowed as a form target (the OAuth client's redirect_uri origin). */
  formActionOrigin?: string;
}

export function sendPage(res: Response, page: PageOptions): void {
  res
    .status(page.status ?? 200)
    .set('Content-Security-Policy', contentSecurityPolicy(page.formActionOrigin))
    .set('Cache-Control', 'no-store')
    .type('html')
    .send(
      html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${page.title}</title>
<link rel="stylesheet" href="${page.basePath}/style.css">
</head>
<body>
<p class="sandbox-label" role="note"><strong>${SANDBOX_LABEL}.</strong> Nothing here reaches the real GitHub: its accounts, tokens and issues exist only in this development database.</p>
<main>
<h1>${page.title}</h1>
${page.body}
</main>
</body></html>
`.value,
    );
}

export const STYLESHEET = `/* Sandbox GitHub: deliberately unlike github.com. */
:root { color-scheme: light; font-family: system-ui, sans-serif; line-height: 1.5; }
body { margin: 0; background: #fffbea; color: #1f2328; }
.sandbox-label { margin: 0; padding: .75rem 1rem; background: #ffd33d; color: #1f2328; border-bottom: 6px dashed #1f2328; }
main { max-width: 42rem; margin: 2rem auto; padding: 0 1rem; }
form { display: grid; gap: .75rem; max-width: 24rem; }
input[type=text] { font: inherit; padding: .4rem; }
button { font: inherit; padding: .4rem 1rem; cursor: pointer; }
button[value=authorize] { background: #1a7f37; color: #fff; border: 1px solid #116329; }
pre { white-space: pre-wrap; background: #fff; border: 1px solid #d0d7de; padding: .75rem; }
code { background: #eee; padding: 0 .25rem; }
.meta { color: #59636e; }
form.inline { display: inline; }
form.inline button { margin-left: .5rem; padding: .1rem .6rem; }
ul.grants li { margin-bottom: .5rem; }
.label { display: inline-block; border: 1px solid #d0d7de; border-radius: 1rem; padding: 0 .5rem; margin-right: .25rem; }
`;
