/**
 * A cookie-keeping HTTP "browser": follows redirects by hand (so every hop is visible), keeps
 * cookies per host:port (as browsers do for loopback), and can fill and submit the forms it finds.
 */
export interface Page {
  url: string;
  status: number;
  headers: Headers;
  html: string;
  /** Every URL visited to get here, including redirects. */
  trail: string[];
}

export interface FormSpec {
  action: string;
  method: string;
  fields: Record<string, string>;
  buttons: Array<{ name: string; value: string }>;
}

function decodeEntities(s: string): string {
  return s.replace(
    /&(amp|lt|gt|quot|#39|#x27|#x2F);/g,
    (m, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", '#x27': "'", '#x2F': '/' })[e] ?? m,
  );
}

function attr(tag: string, name: string): string | undefined {
  const m = new RegExp(`\\s${name}\\s*=\\s*("([^"]*)"|'([^']*)')`, 'i').exec(tag);
  return m ? decodeEntities(m[2] ?? m[3] ?? '') : undefined;
}

export function parseForms(html: string): FormSpec[] {
  const forms: FormSpec[] = [];
  for (const m of html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/gi)) {
    const open = m[1]!;
    const inner = m[2]!;
    const fields: Record<string, string> = {};
    for (const input of inner.matchAll(/<input\b[^>]*>/gi)) {
      const name = attr(input[0], 'name');
      if (name) fields[name] = attr(input[0], 'value') ?? '';
    }
    const buttons = [...inner.matchAll(/<button\b[^>]*>/gi)]
      .map((b) => ({ name: attr(b[0], 'name') ?? '', value: attr(b[0], 'value') ?? '' }))
      .filter((b) => b.name);
    forms.push({ action: attr(open, 'action') ?? '', method: (attr(open, 'method') ?? 'get').toLowerCase(), fields, buttons });
  }
  return forms;
}

export interface FormChoice {
  /** Only forms whose action matches. */
  match?: RegExp;
  /** The form with a button of this value, and that button clicked. */
  button?: string;
  /** Values overriding the form's inputs. */
  fields?: Record<string, string>;
}

/** What submitting a form on `page` sends: the first (or chosen) form's inputs, overrides and clicked button. */
export function formSubmission(page: Page, opts: FormChoice = {}): { action: string; method: 'GET' | 'POST'; body: URLSearchParams } {
  const forms = parseForms(page.html).filter((f) => (opts.match ? opts.match.test(f.action) : true));
  const form = opts.button ? forms.find((f) => f.buttons.some((b) => b.value === opts.button)) : forms[0];
  if (!form) throw new Error(`no matching form on ${page.url}: ${page.html.slice(0, 400)}`);
  const body = new URLSearchParams({ ...form.fields, ...opts.fields });
  const button = opts.button ? form.buttons.find((b) => b.value === opts.button) : undefined;
  if (button) body.set(button.name, button.value);
  return { action: new URL(form.action || page.url, page.url).href, method: form.method === 'post' ? 'POST' : 'GET', body };
}

export class Browser {
  readonly jar = new Map<string, Map<string, string>>();
  /** Every request this browser made, for "was X contacted?" assertions. */
  readonly requests: string[] = [];

  #cookies(url: URL): Map<string, string> {
    let c = this.jar.get(url.host);
    if (!c) this.jar.set(url.host, (c = new Map()));
    return c;
  }

  cookieHeader(url: string): string {
    return [...this.#cookies(new URL(url)).entries()].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  #store(url: URL, headers: Headers): void {
    for (const line of headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const expired = /max-age=0|expires=Thu, 01 Jan 1970/i.test(line) || value === '';
      if (expired) this.#cookies(url).delete(name);
      else this.#cookies(url).set(name, value);
    }
  }

  /** One request, no redirect following. */
  async request(url: string, init: { method?: string; body?: URLSearchParams; headers?: Record<string, string> } = {}): Promise<Response> {
    const u = new URL(url);
    this.requests.push(`${init.method ?? 'GET'} ${u.origin}${u.pathname}`);
    const headers: Record<string, string> = { accept: 'text/html', ...init.headers };
    const cookie = this.cookieHeader(url);
    if (cookie) headers.cookie = cookie;
    if (init.body) headers['content-type'] = 'application/x-www-form-urlencoded';
    const res = await fetch(url, { method: init.method ?? 'GET', headers, redirect: 'manual', ...(init.body ? { body: init.body } : {}) });
    this.#store(u, res.headers);
    return res;
  }

  /** Requests `url` and follows redirects (GET after 302/303) until a page. */
  async open(
    url: string,
    init: { method?: string; body?: URLSearchParams; headers?: Record<string, string> } = {},
    maxHops = 15,
  ): Promise<Page> {
    const trail = [url];
    let res = await this.request(url, init);
    let current = url;
    for (let hop = 0; res.status >= 300 && res.status < 400 && res.headers.get('location'); hop++) {
      if (hop >= maxHops) throw new Error(`too many redirects: ${trail.join(' -> ')}`);
      await res.body?.cancel();
      current = new URL(res.headers.get('location')!, current).href;
      trail.push(current);
      res = await this.request(current);
    }
    return { url: current, status: res.status, headers: res.headers, html: await res.text(), trail };
  }

  /**
   * Submits a form on `page`: the one whose action matches `match` (or the only/first one), clicking the button
   * with `button` as its value, with `fields` overriding inputs.
   */
  async submit(page: Page, opts: FormChoice = {}): Promise<Page> {
    const { action, method, body } = formSubmission(page, opts);
    return this.open(action, { method, body });
  }
}

/** The text of a page without tags, collapsed, for readable assertions. */
export function textOf(html: string): string {
  return decodeEntities(html.replace(/<[^>]+>/g, ' '))
    .replace(/\s+/g, ' ')
    .trim();
}
