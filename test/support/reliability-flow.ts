// Shared steps for the reliability tests: the wire-level tools/call legs of a 2026-07-28 client,
// the browser part of a connect link up to GitHub's authorize form, and read-only looks at the
// broker's SQLite file. Nothing here works around product behaviour; it only drives it.
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { textOf, type Browser, type Page } from './browser.js';
import { envelope, rawCall } from './mcp.js';

/** What a GitHub token issued by the stand-in looks like; none may show up outside the broker's DB. */
export const GITHUB_TOKEN_SHAPE = /gh[opsur]_[A-Za-z0-9]{20,}/;
/** A V8 stack frame as it would appear in a leaked stack trace. */
export const STACK_TRACE = /\n\s+at /;

export type RawReply = Awaited<ReturnType<typeof rawCall>>;

/** First leg of a tools/call the way a 2026-07-28 client with `elicitation.url` sends it. */
export function firstCall(mcpUrl: string, token: string, name: string, args: Record<string, unknown>): Promise<RawReply> {
  return rawCall(mcpUrl, token, { id: 1, method: 'tools/call', params: { name, arguments: args, _meta: envelope() } });
}

/** The repeated tools/call: new id, same name and arguments, the accepted elicitation and the echoed requestState. */
export function repeatCall(
  mcpUrl: string,
  token: string,
  name: string,
  args: Record<string, unknown>,
  requestState: string,
): Promise<RawReply> {
  return rawCall(mcpUrl, token, {
    id: 2,
    method: 'tools/call',
    params: { name, arguments: args, inputResponses: { connect_account: { action: 'accept' } }, requestState, _meta: envelope() },
  });
}

/** The link and requestState of an `input_required` answer asking to connect. */
export function connectRequest(reply: RawReply): { link: string; requestState: string } {
  assert.equal(reply.status, 200, reply.text);
  const result = reply.json?.result;
  assert.equal(result?.resultType, 'input_required', reply.text);
  const request = result.inputRequests.connect_account;
  assert.equal(request.method, 'elicitation/create');
  assert.equal(request.params.mode, 'url');
  assert.equal(typeof result.requestState, 'string');
  return { link: request.params.url as string, requestState: result.requestState as string };
}

/** Signs in at the IdP (if asked) and consents on the connect page, stopping at GitHub's authorize form. */
export async function upToGitHub(browser: Browser, link: string, user: string): Promise<Page> {
  let page = await browser.open(link);
  if (/Development sign-in/.test(page.html)) page = await browser.submit(page, { fields: { login: user } });
  assert.equal(page.status, 200, textOf(page.html).slice(0, 300));
  assert.match(page.html, /name="decision" value="allow"/, 'the consent page');
  page = await browser.submit(page, { button: 'allow' });
  assert.match(page.html, /GitHub stand-in/);
  return page;
}

/** Clicks Authorize at the GitHub stand-in as `login`; the result is the broker's callback page. */
export function authorizeAtGitHub(browser: Browser, authorizePage: Page, login: string): Promise<Page> {
  return browser.submit(authorizePage, { button: 'authorize', fields: { login } });
}

/** Runs `fn` on the broker's database file opened read-only, and closes it. */
export function withDb<T>(path: string, fn: (db: Database.Database) => T): T {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** `PRAGMA integrity_check` on the file (opened read-write, so a WAL left by a killed process is recovered). */
export function integrityCheck(path: string): string {
  const db = new Database(path, { fileMustExist: true });
  try {
    return (db.pragma('integrity_check') as Array<{ integrity_check: string }>).map((r) => r.integrity_check).join('\n');
  } finally {
    db.close();
  }
}

/** Subjects that have a stored connection to `provider`. */
export function connectedSubjects(path: string, provider = 'github'): string[] {
  return withDb(path, (db) =>
    (db.prepare('SELECT subject FROM connections WHERE provider = ? ORDER BY subject').all(provider) as Array<{ subject: string }>).map(
      (r) => r.subject,
    ),
  );
}

/** Runs `fn` over `items` with at most `limit` in flight at once, keeping order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i]!, i);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Fails with a short summary (count + first few reasons) if any of the settled per-user promises rejected. */
export function assertAllFulfilled(results: ReadonlyArray<PromiseSettledResult<unknown>>, labels: readonly string[]): void {
  const failures = results.flatMap((r, i) =>
    r.status === 'rejected' ? [`${labels[i]}: ${String(r.reason instanceof Error ? r.reason.message : r.reason).split('\n')[0]}`] : [],
  );
  assert.equal(failures.length, 0, `${failures.length} of ${results.length} failed, e.g.:\n${failures.slice(0, 3).join('\n')}`);
}
