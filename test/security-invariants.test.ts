// The security invariants of the connect broker, each proven through real flows: the real IdP
// (oidc-provider), the GitHub stand-in and the broker on loopback, a cookie-keeping browser, raw
// JSON-RPC on /mcp, and the SQLite file itself (read with better-sqlite3, written only where a test
// has to age a row).
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { writeDb } from './support/seed.js';
import { generateKeyPair, SignJWT } from 'jose';
import { Browser, formSubmission, parseForms, textOf, type FormChoice, type Page } from './support/browser.js';
import type { GitHubStandIn } from './support/github-standin.js';
import { envelope, rawCall } from './support/mcp.js';
import { heldCalls, signIn, type Stack } from './support/stack.js';
import { useStack } from './support/suite.js';
import { JWT_IN_CLEAR } from './support/token-checks.js';

// ------------------------------------------------------------------------------------------------
// Helpers

const sha256Hex = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');
const STACK_TRACE = /\n\s*at\s/;
const HTML = /<html|<!doctype/i;

/** Calls `tool` as `sub` with a 2026-07-28 envelope and returns the connect link it elicits. */
async function askForLink(
  stack: Stack,
  sub: string,
  tool = 'github_whoami',
  clientName?: string,
): Promise<{ url: string; handle: string; token: string }> {
  const token = await stack.token(sub);
  const meta = { ...envelope(), ...(clientName ? { 'io.modelcontextprotocol/clientInfo': { name: clientName, version: '1.0.0' } } : {}) };
  const res = await rawCall(stack.mcpUrl, token, { method: 'tools/call', params: { name: tool, arguments: {}, _meta: meta } });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json?.result?.resultType, 'input_required', res.text);
  const url = res.json.result.inputRequests.connect_account.params.url as string;
  return { url, handle: new URL(url).searchParams.get('req')!, token };
}

/** Calls `tool` as the holder of `token` (no input responses) and returns the JSON-RPC result. */
async function callTool(stack: Stack, token: string, tool = 'github_whoami', args: Record<string, unknown> = {}): Promise<any> {
  const res = await rawCall(stack.mcpUrl, token, { method: 'tools/call', params: { name: tool, arguments: args, _meta: envelope() } });
  assert.equal(res.status, 200, res.text);
  return res.json.result;
}

interface Hop {
  url: string;
  status: number;
  location: string | null;
  setCookie: string[];
}

/** Like Browser.open, but keeps every hop's raw Location and Set-Cookie headers. */
async function follow(
  browser: Browser,
  url: string,
  init: { method?: string; body?: URLSearchParams } = {},
): Promise<{ hops: Hop[]; page: Page }> {
  const hops: Hop[] = [];
  let current = url;
  let res = await browser.request(current, init);
  for (;;) {
    const location = res.headers.get('location');
    hops.push({ url: current, status: res.status, location, setCookie: res.headers.getSetCookie() });
    if (res.status < 300 || res.status >= 400 || !location) break;
    if (hops.length > 15) throw new Error(`too many redirects: ${hops.map((h) => h.url).join(' -> ')}`);
    await res.body?.cancel();
    current = new URL(location, current).href;
    res = await browser.request(current);
  }
  return { hops, page: { url: current, status: res.status, headers: res.headers, html: await res.text(), trail: hops.map((h) => h.url) } };
}

/** The form on `page` (first, or the one whose action matches), as a POST body with `fields` overriding. */
function formBody(page: Page, opts: FormChoice = {}): { action: string; body: URLSearchParams } {
  const { action, body } = formSubmission(page, opts);
  return { action, body };
}

/** Opens `link` in `browser`, signing in as `user` at the IdP if asked; returns every page seen. */
async function openSignedIn(browser: Browser, link: string, user: string): Promise<Page[]> {
  const pages = [await browser.open(link)];
  if (/Development sign-in/.test(pages[0]!.html)) pages.push(await browser.submit(pages[0]!, { fields: { login: user } }));
  return pages;
}

interface AuthorizationStart {
  link: string;
  handle: string;
  token: string;
  consent: Page;
  authorize: Page;
  pages: Page[];
}

/** Asks for a link as `user`, signs `browser` in, consents, and stops on GitHub's authorize page. */
async function startAuthorization(stack: Stack, browser: Browser, user: string): Promise<AuthorizationStart> {
  const { url, handle, token } = await askForLink(stack, user);
  const pages = await openSignedIn(browser, url, user);
  const consent = pages.at(-1)!;
  assert.equal(consent.status, 200, textOf(consent.html));
  const authorize = await browser.submit(consent, { button: 'allow' });
  pages.push(authorize);
  assert.equal(new URL(authorize.url).origin, stack.github.webUrl, `expected GitHub's authorize page, got ${authorize.url}`);
  return { link: url, handle, token, consent, authorize, pages };
}

/** Approves on GitHub's authorize page and returns the callback URL GitHub redirects to, without following it. */
async function callbackUrl(browser: Browser, authorize: Page, login = 'octocat'): Promise<string> {
  const { action, body } = formBody(authorize, { button: 'authorize', fields: { login } });
  const res = await browser.request(action, { method: 'POST', body });
  await res.body?.cancel();
  assert.equal(res.status, 302);
  return new URL(res.headers.get('location')!, action).href;
}

/** Drives a whole connect for `user` (as GitHub account `login`) and returns every page seen. */
async function connect(
  stack: Stack,
  browser: Browser,
  user: string,
  login = 'octocat',
): Promise<{ link: string; handle: string; token: string; pages: Page[]; callback: string }> {
  const start = await startAuthorization(stack, browser, user);
  const callback = await callbackUrl(browser, start.authorize, login);
  const done = await browser.open(callback);
  assert.equal(done.status, 200, textOf(done.html));
  assert.match(textOf(done.html), new RegExp(`Connected as @${login}`));
  return { link: start.link, handle: start.handle, token: start.token, pages: [...start.pages, done], callback };
}

function readDb<T>(stack: Stack, fn: (db: Database.Database) => T): T {
  const db = new Database(stack.env.DATABASE_PATH!, { readonly: true, fileMustExist: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** Every byte SQLite keeps for the database: the main file and the write-ahead log. */
function dbBytes(stack: Stack): string {
  const path = stack.env.DATABASE_PATH!;
  return [path, `${path}-wal`]
    .filter((p) => existsSync(p))
    .map((p) => readFileSync(p).toString('latin1'))
    .join('\n');
}

const countRequests = (github: GitHubStandIn, method: string, path: string): number =>
  github.requests.filter((r) => r.method === method && r.path === path).length;

interface GitHubCall {
  method: string;
  url: string;
  authorization: string | null;
  body: string;
}

/**
 * Records the broker's outgoing requests to the GitHub stand-in (it runs in this process and uses
 * the global fetch), and the access tokens the stand-in's token endpoint hands out.
 */
function recordGitHubTraffic(github: GitHubStandIn): { calls: GitHubCall[]; issued: string[]; restore(): void } {
  const original = globalThis.fetch;
  const origin = new URL(github.webUrl).origin;
  const calls: GitHubCall[] = [];
  const issued: string[] = [];
  const recording = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.origin !== origin) return original(input, init);
    const headers = new Headers(input instanceof Request ? input.headers : undefined);
    new Headers(init?.headers).forEach((value, name) => headers.set(name, value));
    const body = init?.body === undefined || init.body === null ? '' : String(init.body);
    calls.push({
      method: init?.method ?? (input instanceof Request ? input.method : 'GET'),
      url: url.href,
      authorization: headers.get('authorization'),
      body,
    });
    const res = await original(input, init);
    if (url.pathname === '/login/oauth/access_token') {
      const token = /gho_[A-Za-z0-9]+/.exec(await res.clone().text());
      if (token) issued.push(token[0]);
    }
    return res;
  };
  globalThis.fetch = recording as typeof fetch;
  return { calls, issued, restore: () => void (globalThis.fetch = original) };
}

/** Parses a Content-Security-Policy header into directive -> value. */
function csp(header: string | null): Map<string, string> {
  return new Map(
    (header ?? '')
      .split(';')
      .map((d) => d.trim())
      .filter(Boolean)
      .map((d) => {
        const [name, ...rest] = d.split(/\s+/);
        return [name!.toLowerCase(), rest.join(' ')] as [string, string];
      }),
  );
}

/** A raw HTTP/1.1 request with any Host header (fetch will not send a foreign one). */
function rawHttp(
  url: string,
  opts: { method: string; headers: Record<string, string>; body?: string },
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: u.hostname, port: u.port, path: u.pathname + u.search, method: opts.method, headers: opts.headers, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

// ------------------------------------------------------------------------------------------------
// 1. Connect links

describe('invariant 1: a connect link is an opaque, random, single-use, short-lived handle stored only as a hash', () => {
  const stack = useStack({ holdSeconds: 1 });

  it('elicits a link on our origin whose only parameter is a 256-bit random handle, new for every principal, provider, scope set and client', async () => {
    const asked = [
      await askForLink(stack, 'sec1-alice'),
      await askForLink(stack, 'sec1-alice', 'github_whoami', 'other-assistant'),
      await askForLink(stack, 'sec1-bob'),
    ];
    for (const { url, handle, token } of asked) {
      const link = new URL(url);
      assert.equal(link.origin, stack.publicUrl);
      assert.equal(link.pathname, '/connect/github');
      assert.deepEqual([...link.searchParams.keys()], ['req']);
      assert.match(handle, /^[A-Za-z0-9_-]{43}$/, 'base64url of 32 random bytes');
      assert.ok(handle.length * 6 >= 128, 'at least 128 bits');
      for (const secret of ['sec1-alice', 'sec1-bob', token, 'gho_'])
        assert.ok(!url.includes(secret), `link must not contain ${secret.slice(0, 20)}`);
    }
    assert.equal(new Set(asked.map((a) => a.handle)).size, 3, 'every principal and client gets a different handle');
    // The same open request again is shown the same link (bounded pending connections), never another principal's.
    assert.equal((await askForLink(stack, 'sec1-alice')).handle, asked[0]!.handle);
    // The handle is not derived from anything the URL or the DB shows: it is not the row id.
    const ids = readDb(stack, (db) => (db.prepare('SELECT id FROM pending_connections').all() as Array<{ id: string }>).map((r) => r.id));
    for (const { handle } of asked) assert.ok(!ids.includes(handle));
  });

  it('stores only the SHA-256 of the handle, with a 10-minute lifetime, and never writes the handle to the database file or the logs', async () => {
    const { handle } = await askForLink(stack, 'sec1-carol');
    const row = readDb(stack, (db) => db.prepare('SELECT * FROM pending_connections WHERE link_hash = ?').get(sha256Hex(handle))) as
      { id: string; subject: string; status: string; created_at: number; expires_at: number } | undefined;
    assert.ok(row, 'the row is found by the hash of the handle');
    assert.equal(row.subject, 'sec1-carol');
    assert.equal(row.status, 'open');
    assert.equal(row.expires_at - row.created_at, 600_000, 'default lifetime is 10 minutes');
    const everyCell = readDb(stack, (db) => JSON.stringify(db.prepare('SELECT * FROM pending_connections').all()));
    assert.ok(!everyCell.includes(handle), 'no column holds the raw handle');
    assert.ok(!dbBytes(stack).includes(handle), 'the raw handle appears nowhere in the database file or WAL');
    assert.ok(!stack.logs.join('\n').includes(handle), 'the raw handle is never logged');
  });

  it('puts no identity, token or code in any URL it emits during a whole connect, and the link then works no more', async () => {
    const browser = new Browser();
    const { link, token, pages, callback } = await connect(stack, browser, 'sec1-dave');
    const ours = stack.publicUrl;
    const emitted: string[] = [link];
    for (const page of pages) {
      for (let i = 1; i < page.trail.length; i++) if (new URL(page.trail[i - 1]!).origin === ours) emitted.push(page.trail[i]!);
      for (const form of parseForms(page.html))
        if (new URL(page.url).origin === ours) emitted.push(new URL(form.action || page.url, page.url).href);
    }
    assert.ok(emitted.length >= 5, `followed the redirects we emit (${emitted.length})`);
    for (const url of emitted) {
      const u = new URL(url);
      for (const p of ['code', 'access_token', 'id_token', 'token', 'sub', 'login'])
        assert.equal(u.searchParams.get(p), null, `${p} in ${url}`);
      assert.ok(!url.includes('sec1-dave'), `identity in ${url}`);
      assert.ok(!url.includes(token) && !url.includes('gho_'), `token in ${url}`);
    }
    // No URL anywhere in the trail (ours, the IdP's or GitHub's) carries the identity or a token.
    for (const url of [...pages.flatMap((p) => p.trail), callback]) {
      assert.ok(!url.includes('sec1-dave'), `identity in ${url}`);
      assert.ok(!url.includes(token) && !url.includes('gho_'), `token in ${url}`);
    }
    // Nor do the logs: not the link handle, the OAuth states, the authorization codes or the MCP token.
    const signInCallback = pages.flatMap((p) => p.trail).find((u) => new URL(u).pathname === '/auth/callback');
    assert.ok(signInCallback, 'signed in through /auth/callback');
    const secrets = [new URL(link).searchParams.get('req')!, token];
    for (const url of [signInCallback, callback])
      secrets.push(new URL(url).searchParams.get('code')!, new URL(url).searchParams.get('state')!);
    assert.ok(
      secrets.every((s) => s && s.length >= 16),
      'collected the secrets',
    );
    const logs = stack.logs.join('\n');
    for (const secret of secrets) assert.ok(!logs.includes(secret), `a secret was logged: ${secret.slice(0, 8)}…`);

    const again = await browser.open(link);
    assert.equal(again.status, 410);
    assert.match(textOf(again.html), /already been used/);
  });
});

// ------------------------------------------------------------------------------------------------
// 2. Only the principal may use a link

describe('invariant 2: a connect link is useless to anyone but the principal who asked for it', () => {
  const stack = useStack({ holdSeconds: 1 });

  it('rejects a connect link opened by another principal with 403 naming who is signed in, contacts nothing at GitHub, and still works for its principal', async () => {
    const { url, handle } = await askForLink(stack, 'sec2-alice');
    const bob = new Browser();
    await signIn(bob, stack, 'sec2-bob');
    const before = stack.github.requests.length;

    const refused = await bob.open(url);
    assert.equal(refused.status, 403);
    const text = textOf(refused.html);
    assert.match(text, /This link is for a different account/);
    assert.match(text, /You are signed in as sec2-bob/);
    assert.ok(!text.includes('sec2-alice'), 'the page does not reveal whose link it is');

    // Posting the consent form with bob's own CSRF token and alice's handle is refused the same way.
    const csrf = parseForms(refused.html).find((f) => f.fields.csrf)?.fields.csrf;
    assert.ok(csrf);
    const posted = await bob.open(`${stack.publicUrl}/connect/github`, {
      method: 'POST',
      body: new URLSearchParams({ csrf, handle, decision: 'allow' }),
    });
    assert.equal(posted.status, 403);
    assert.match(textOf(posted.html), /This link is for a different account/);

    assert.equal(stack.github.requests.length, before, 'GitHub received no request');
    const row = readDb(stack, (db) => db.prepare('SELECT status FROM pending_connections WHERE link_hash = ?').get(sha256Hex(handle))) as {
      status: string;
    };
    assert.equal(row.status, 'open', 'the link is untouched');

    const alice = new Browser();
    const pages = await openSignedIn(alice, url, 'sec2-alice');
    const consent = pages.at(-1)!;
    assert.equal(consent.status, 200);
    const authorize = await alice.submit(consent, { button: 'allow' });
    const done = await alice.open(await callbackUrl(alice, authorize, 'octocat'));
    assert.equal(done.status, 200);
    assert.match(textOf(done.html), /Connected as @octocat/);
    const owners = readDb(stack, (db) => db.prepare('SELECT subject FROM connections ORDER BY subject').all()) as Array<{
      subject: string;
    }>;
    assert.deepEqual(
      owners.map((o) => o.subject),
      ['sec2-alice'],
      'only the principal got a connection',
    );
  });

  it('sends an anonymous browser to sign in first and brings it back to the consent page', async () => {
    const { url } = await askForLink(stack, 'sec2-carol');
    const before = stack.github.requests.length;
    const browser = new Browser();
    const login = await browser.open(url);
    assert.equal(new URL(login.trail[1]!).origin, stack.publicUrl);
    assert.equal(new URL(login.trail[1]!).pathname, '/auth/login');
    assert.equal(new URL(login.trail[1]!).searchParams.get('returnTo'), new URL(url).pathname + new URL(url).search);
    assert.equal(new URL(login.trail[2]!).origin, stack.idp.issuer, 'then to the identity provider');
    assert.match(login.html, /Development sign-in/);

    const consent = await browser.submit(login, { fields: { login: 'sec2-carol' } });
    assert.equal(consent.url, url, 'back on the link');
    assert.equal(consent.status, 200);
    assert.match(consent.html, /name="decision" value="allow"/);
    assert.match(textOf(consent.html), /Connect your GitHub account/);
    assert.equal(stack.github.requests.length, before, 'GitHub received no request');
  });
});

// ------------------------------------------------------------------------------------------------
// 3. OAuth state

describe("invariant 3: GitHub's OAuth state is random, single-use, short-lived and bound to the browser session", () => {
  const stack = useStack({ holdSeconds: 1 });

  const connectionCount = () => readDb(stack, (db) => (db.prepare('SELECT count(*) AS n FROM connections').get() as { n: number }).n);

  it('sends a fresh random state and an S256 PKCE challenge with every authorization, storing only the state hash', async () => {
    const first = await startAuthorization(stack, new Browser(), 'sec3-alice');
    const second = await startAuthorization(stack, new Browser(), 'sec3-alice');
    const states = [first, second].map((s) => new URL(s.authorize.url).searchParams);
    for (const params of states) {
      assert.match(params.get('state') ?? '', /^[A-Za-z0-9_-]{43,}$/);
      assert.equal(params.get('code_challenge_method'), 'S256');
      assert.match(params.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/);
    }
    assert.notEqual(states[0]!.get('state'), states[1]!.get('state'));
    assert.notEqual(states[0]!.get('code_challenge'), states[1]!.get('code_challenge'));
    for (const params of states) {
      const state = params.get('state')!;
      const stored = readDb(stack, (db) =>
        db.prepare('SELECT count(*) AS n FROM oauth_flows WHERE state_hash = ?').get(sha256Hex(state)),
      ) as { n: number };
      assert.equal(stored.n, 1, 'the flow is stored under the hash of its state');
      assert.ok(!dbBytes(stack).includes(state), 'the raw state is not stored');
    }
  });

  it('keeps the PKCE verifiers and the sign-in nonce only sealed at rest: no database byte holds them in clear', async () => {
    const s256 = (v: string) => createHash('sha256').update(v, 'ascii').digest('base64url');
    // A sign-in under way: the nonce and the challenge are in the authorization request to the IdP.
    const { hops } = await follow(new Browser(), `${stack.publicUrl}/auth/login?returnTo=%2Fconnections`);
    const toIdp = new URL(hops.find((h) => h.location && new URL(h.location, h.url).searchParams.has('nonce'))!.location!, stack.publicUrl)
      .searchParams;
    const nonce = toIdp.get('nonce')!;
    const signInRows = readDb(stack, (db) => db.prepare('SELECT code_verifier, nonce FROM login_transactions').all()) as Array<{
      code_verifier: string;
      nonce: string;
    }>;
    assert.ok(signInRows.length >= 1);
    for (const row of signInRows) {
      assert.match(row.nonce, /^v1\./, 'the nonce is sealed');
      assert.match(row.code_verifier, /^v1\./, 'the sign-in verifier is sealed');
      assert.notEqual(s256(row.code_verifier), toIdp.get('code_challenge'), 'no stored value is the verifier of the challenge sent');
    }
    assert.ok(!dbBytes(stack).includes(nonce), 'the nonce is in no database byte');

    // A provider authorization under way, then finished: the verifier GitHub receives was never stored.
    const traffic = recordGitHubTraffic(stack.github);
    try {
      const browser = new Browser();
      const start = await startAuthorization(stack, browser, 'sec3-sealed');
      const state = new URL(start.authorize.url).searchParams.get('state')!;
      const flow = readDb(stack, (db) =>
        db.prepare('SELECT code_verifier FROM oauth_flows WHERE state_hash = ?').get(sha256Hex(state)),
      ) as { code_verifier: string };
      assert.match(flow.code_verifier, /^v1\./, 'the connect verifier is sealed');
      const done = await browser.open(await callbackUrl(browser, start.authorize));
      assert.match(textOf(done.html), /Connected as @octocat/, 'the sealed verifier still completes the exchange');
      const exchange = traffic.calls.find((c) => c.method === 'POST' && new URL(c.url).pathname === '/login/oauth/access_token')!;
      const verifier = new URLSearchParams(exchange.body).get('code_verifier')!;
      assert.match(verifier, /^[A-Za-z0-9_-]{43}$/);
      assert.ok(!flow.code_verifier.includes(verifier));
      assert.ok(!dbBytes(stack).includes(verifier), 'the verifier is in no database byte');
    } finally {
      traffic.restore();
    }
  });

  it('answers a flow stored by the previous release (verifier in clear) with the 400 page, not a 5xx, and exchanges nothing', async () => {
    const browser = new Browser();
    const start = await startAuthorization(stack, browser, 'sec3-upgrade');
    const state = new URL(start.authorize.url).searchParams.get('state')!;
    assert.equal(
      writeDb(
        stack,
        'UPDATE oauth_flows SET code_verifier = ? WHERE state_hash = ?',
        randomBytes(32).toString('base64url'),
        sha256Hex(state),
      ),
      1,
    );
    const exchanges = countRequests(stack.github, 'POST', '/login/oauth/access_token');
    const page = await browser.open(await callbackUrl(browser, start.authorize));
    assert.equal(page.status, 400);
    assert.match(textOf(page.html), /not valid, has expired or was already used\. Nothing was connected\./);
    assert.equal(countRequests(stack.github, 'POST', '/login/oauth/access_token'), exchanges);
  });

  it('accepts a callback once: replaying the exact callback URL after success gives 400 and stores nothing new', async () => {
    const browser = new Browser();
    const { callback } = await connect(stack, browser, 'sec3-bob');
    const rowBefore = readDb(stack, (db) => db.prepare("SELECT * FROM connections WHERE subject = 'sec3-bob'").get());
    const tokenExchanges = countRequests(stack.github, 'POST', '/login/oauth/access_token');

    const replay = await browser.open(callback);
    assert.equal(replay.status, 400);
    assert.match(textOf(replay.html), /not valid, has expired or was already used\. Nothing was connected\./);
    assert.deepEqual(
      readDb(stack, (db) => db.prepare("SELECT * FROM connections WHERE subject = 'sec3-bob'").get()),
      rowBefore,
      'the connection is unchanged',
    );
    assert.equal(countRequests(stack.github, 'POST', '/login/oauth/access_token'), tokenExchanges, 'the code was not exchanged again');
  });

  it('refuses an expired state with 400, stores nothing and never exchanges the code', async () => {
    const browser = new Browser();
    const start = await startAuthorization(stack, browser, 'sec3-carol');
    const callback = await callbackUrl(browser, start.authorize);
    const state = new URL(callback).searchParams.get('state')!;
    assert.equal(writeDb(stack, 'UPDATE oauth_flows SET expires_at = ? WHERE state_hash = ?', Date.now() - 1000, sha256Hex(state)), 1);
    const before = { connections: connectionCount(), exchanges: countRequests(stack.github, 'POST', '/login/oauth/access_token') };

    const page = await browser.open(callback);
    assert.equal(page.status, 400);
    assert.match(textOf(page.html), /Nothing was connected/);
    assert.equal(connectionCount(), before.connections);
    assert.equal(countRequests(stack.github, 'POST', '/login/oauth/access_token'), before.exchanges);
    const row = readDb(stack, (db) =>
      db.prepare('SELECT status FROM pending_connections WHERE link_hash = ?').get(sha256Hex(start.handle)),
    ) as { status: string };
    assert.equal(row.status, 'failed');
  });

  it('refuses the callback in another browser signed in as the same user with 400 and stores nothing', async () => {
    const started = new Browser();
    const start = await startAuthorization(stack, started, 'sec3-dave');
    const callback = await callbackUrl(started, start.authorize);
    const other = new Browser();
    await signIn(other, stack, 'sec3-dave');
    const before = { connections: connectionCount(), exchanges: countRequests(stack.github, 'POST', '/login/oauth/access_token') };

    const page = await other.open(callback);
    assert.equal(page.status, 400);
    assert.match(textOf(page.html), /Nothing was connected/);
    assert.equal(connectionCount(), before.connections);
    assert.equal(countRequests(stack.github, 'POST', '/login/oauth/access_token'), before.exchanges, 'the code was not exchanged');
    const row = readDb(stack, (db) => db.prepare("SELECT count(*) AS n FROM connections WHERE subject = 'sec3-dave'").get()) as {
      n: number;
    };
    assert.equal(row.n, 0);

    // The refusal consumed nothing: the browser that started the flow still completes it.
    const done = await started.open(callback);
    assert.equal(done.status, 200, textOf(done.html));
    assert.match(textOf(done.html), /Connected as @octocat/);
  });

  it('refuses a forged callback with a random or missing state with 400 and stores nothing', async () => {
    const browser = new Browser();
    await startAuthorization(stack, browser, 'sec3-erin'); // a flow really is in progress for this browser
    const before = { connections: connectionCount(), exchanges: countRequests(stack.github, 'POST', '/login/oauth/access_token') };
    for (const query of [
      `code=${randomBytes(10).toString('hex')}&state=${randomBytes(32).toString('base64url')}`,
      `code=${randomBytes(10).toString('hex')}`,
      'state=&code=x',
    ]) {
      const page = await browser.open(`${stack.publicUrl}/connect/github/callback?${query}`);
      assert.equal(page.status, 400, query);
      assert.match(textOf(page.html), /Nothing was connected/);
    }
    assert.equal(connectionCount(), before.connections);
    assert.equal(countRequests(stack.github, 'POST', '/login/oauth/access_token'), before.exchanges);
  });
});

describe('invariant 3, continued: a refused callback does not burn the real one, and a spent flow refused settles its link', () => {
  // A second provider whose callback path a GitHub `state` can be sent to (Linear: explicit endpoints, nothing fetched).
  const stack = useStack({ holdSeconds: 10, env: { LINEAR_CLIENT_ID: 'linear-client', LINEAR_CLIENT_SECRET: 'linear-secret' } });

  it("refuses GitHub's state on another provider's callback path with 400 and consumes nothing: the genuine callback still connects", async () => {
    const browser = new Browser();
    const start = await startAuthorization(stack, browser, 'sec3b-alice');
    const callback = await callbackUrl(browser, start.authorize);
    const misrouted = new URL(callback);
    misrouted.pathname = '/connect/linear/callback';
    const exchanges = countRequests(stack.github, 'POST', '/login/oauth/access_token');

    const refused = await browser.open(misrouted.href);
    assert.equal(refused.status, 400);
    assert.match(textOf(refused.html), /Nothing was connected/);
    assert.equal(countRequests(stack.github, 'POST', '/login/oauth/access_token'), exchanges, 'the code was not exchanged');
    const state = new URL(callback).searchParams.get('state')!;
    assert.equal(
      (
        readDb(stack, (db) => db.prepare('SELECT count(*) AS n FROM oauth_flows WHERE state_hash = ?').get(sha256Hex(state))) as {
          n: number;
        }
      ).n,
      1,
      'the flow is still there',
    );

    const done = await browser.open(callback);
    assert.equal(done.status, 200, textOf(done.html));
    assert.match(textOf(done.html), /Connected as @octocat/);
  });

  it('settles the link failed when a callback is refused after its flow was taken, so a held repeat answers at once with a fresh link', async () => {
    const token = await stack.token('sec3b-bob');
    const args = { owner: 'octo-org', repo: 'refused', title: 'Held' };
    const first = await rawCall(stack.mcpUrl, token, {
      method: 'tools/call',
      params: { name: 'github_create_issue', arguments: args, _meta: envelope() },
    });
    const link = first.json.result.inputRequests.connect_account.params.url as string;
    const browser = new Browser();
    const consent = (await openSignedIn(browser, link, 'sec3b-bob')).at(-1)!;
    const callback = await callbackUrl(browser, await browser.submit(consent, { button: 'allow' }));
    // The session that started the flow now names someone else (as after a sign-in elsewhere kept the id).
    assert.equal(writeDb(stack, "UPDATE browser_sessions SET subject = 'sec3b-mallory' WHERE subject = 'sec3b-bob'"), 1);

    const started = Date.now();
    const held = rawCall(stack.mcpUrl, token, {
      method: 'tools/call',
      params: {
        name: 'github_create_issue',
        arguments: args,
        inputResponses: { connect_account: { action: 'accept' } },
        requestState: first.json.result.requestState,
        _meta: envelope(),
      },
    });
    await heldCalls(stack);
    const refused = await browser.open(callback);
    assert.equal(refused.status, 400);
    const repeat = await held;
    const elapsed = Date.now() - started;

    const row = readDb(stack, (db) =>
      db.prepare('SELECT status FROM pending_connections WHERE link_hash = ?').get(sha256Hex(new URL(link).searchParams.get('req')!)),
    ) as { status: string };
    assert.equal(row.status, 'failed');
    assert.equal(repeat.json.result.resultType, 'input_required', repeat.text);
    assert.notEqual(repeat.json.result.inputRequests.connect_account.params.url, link, 'a fresh link: the refused one cannot finish');
    assert.ok(elapsed < 4_000, `answered right after the refusal, not after the 10 s hold (${elapsed} ms)`);
    assert.equal(
      readDb(stack, (db) => (db.prepare("SELECT count(*) AS n FROM connections WHERE subject = 'sec3b-bob'").get() as { n: number }).n),
      0,
    );
  });
});

// ------------------------------------------------------------------------------------------------
// 4. Tokens at rest

describe('invariant 4: provider tokens are encrypted at rest and bound to their principal', () => {
  const stack = useStack({ holdSeconds: 1 });
  let traffic: ReturnType<typeof recordGitHubTraffic>;
  before(() => {
    traffic = recordGitHubTraffic(stack.github);
  });
  after(() => traffic?.restore());

  it('keeps the GitHub token only sealed: it appears in no database byte, log line, tool result, page or URL', async () => {
    const browser = new Browser();
    const { pages, token, callback } = await connect(stack, browser, 'sec4-alice');
    const result = await callTool(stack, token);
    assert.equal(result.structuredContent?.login, 'octocat', JSON.stringify(result));

    assert.equal(traffic.issued.length, 1, 'the stand-in issued one token');
    const ghToken = traffic.issued[0]!;
    assert.match(ghToken, /^gho_[A-Za-z0-9]{36}$/);

    const row = readDb(stack, (db) => db.prepare("SELECT * FROM connections WHERE subject = 'sec4-alice'").get()) as {
      key_id: string;
      sealed_tokens: string;
      account_login: string;
    };
    assert.equal(row.account_login, 'octocat');
    assert.match(row.key_id, /^k[0-9a-f]{12}$/);
    assert.match(row.sealed_tokens, /^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    assert.ok(!row.sealed_tokens.includes(ghToken));

    const db = dbBytes(stack);
    assert.ok(!db.includes(ghToken) && !db.includes('gho_'), 'no token in the database file or WAL');
    const logs = stack.logs.join('\n');
    assert.ok(!logs.includes(ghToken) && !logs.includes('gho_'), 'no token in the logs');
    assert.ok(!JSON.stringify(result).includes('gho_'), 'no token in the tool result');
    for (const page of pages) {
      assert.ok(!page.html.includes('gho_'), `no token in ${page.url}`);
      for (const url of page.trail) assert.ok(!url.includes('gho_'), `no token in ${url}`);
    }
    assert.ok(!callback.includes('gho_'));
  });

  it('makes a sealed token moved to another user row unreadable: each user is asked to connect again, never acting as the other account', async () => {
    const alice = await connect(stack, new Browser(), 'sec4-bob', 'hubot');
    const carol = await connect(stack, new Browser(), 'sec4-carol', 'monalisa');
    assert.equal((await callTool(stack, alice.token)).structuredContent?.login, 'hubot');
    assert.equal((await callTool(stack, carol.token)).structuredContent?.login, 'monalisa');

    const db = new Database(stack.env.DATABASE_PATH!, { fileMustExist: true });
    try {
      db.pragma('busy_timeout = 5000');
      db.transaction(() => {
        const get = db.prepare('SELECT sealed_tokens FROM connections WHERE subject = ?');
        const a = (get.get('sec4-bob') as { sealed_tokens: string }).sealed_tokens;
        const c = (get.get('sec4-carol') as { sealed_tokens: string }).sealed_tokens;
        const set = db.prepare('UPDATE connections SET sealed_tokens = ? WHERE subject = ?');
        set.run(c, 'sec4-bob');
        set.run(a, 'sec4-carol');
      })();
    } finally {
      db.close();
    }
    const userCalls = countRequests(stack.github, 'GET', '/api/v3/user');

    for (const { token, other } of [
      { token: alice.token, other: 'monalisa' },
      { token: carol.token, other: 'hubot' },
    ]) {
      const result = await callTool(stack, token);
      assert.equal(result.resultType, 'input_required', JSON.stringify(result));
      assert.match(result.inputRequests.connect_account.params.url, new RegExp(`^${stack.publicUrl}/connect/github\\?req=`));
      assert.ok(!JSON.stringify(result).includes(other), 'never answers as the other account');
    }
    assert.equal(countRequests(stack.github, 'GET', '/api/v3/user'), userCalls, 'no GitHub call was made with a moved token');
    assert.equal(stack.logs.filter((l) => l.includes('"connection_unreadable"') && l.includes('"tampered"')).length, 2);
  });
});

// ------------------------------------------------------------------------------------------------
// 5. MCP authentication

describe('invariant 5: every MCP request is authenticated on its own', () => {
  const stack = useStack({ holdSeconds: 1 });
  let traffic: ReturnType<typeof recordGitHubTraffic>;
  let metadataUrl: string;
  before(() => {
    traffic = recordGitHubTraffic(stack.github);
    metadataUrl = `${stack.publicUrl}/.well-known/oauth-protected-resource/mcp`;
  });
  after(() => traffic?.restore());

  function assertChallenge(res: { status: number; headers: Headers; text: string }, label: string): void {
    assert.equal(res.status, 401, `${label}: ${res.text}`);
    const challenge = res.headers.get('www-authenticate') ?? '';
    assert.match(challenge, /^Bearer /, label);
    assert.ok(challenge.includes(`resource_metadata="${metadataUrl}"`), `${label}: ${challenge}`);
    assert.ok(!STACK_TRACE.test(res.text) && !HTML.test(res.text), `${label}: ${res.text}`);
  }

  it('answers 401 with a Bearer challenge naming the resource metadata for a missing, malformed, expired, wrong-audience or foreign-issuer token', async () => {
    const { issuer } = stack.idp;
    const jwks = (await (
      await fetch(((await (await fetch(`${issuer}/.well-known/openid-configuration`)).json()) as { jwks_uri: string }).jwks_uri)
    ).json()) as { keys: Array<{ kid: string }> };
    const idpKid = jwks.keys[0]!.kid;
    const { privateKey: strangerKey } = await generateKeyPair('RS256');
    const now = Math.floor(Date.now() / 1000);
    const forged = (kid: string) =>
      new SignJWT({ client_id: 'connect-broker', scope: 'mcp' })
        .setProtectedHeader({ alg: 'RS256', kid, typ: 'at+jwt' })
        .setIssuer(issuer)
        .setSubject('sec5-alice')
        .setAudience(stack.mcpUrl)
        .setIssuedAt(now)
        .setExpirationTime(now + 300)
        .sign(strangerKey);
    const valid = await stack.token('sec5-alice');
    const [header, payload] = valid.split('.');
    const cases: Array<[string, string | undefined]> = [
      ['no token', undefined],
      ['a malformed token', 'not-a-jwt'],
      ['an unsigned token', `${header}.${payload}.`],
      [
        'a token whose payload was altered',
        `${header}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload!, 'base64url').toString()), sub: 'sec5-mallory' })).toString('base64url')}.${valid.split('.')[2]}`,
      ],
      ['an expired token', await stack.token('sec5-alice', { expiresInSeconds: -120 })],
      ['a token for another audience', await stack.token('sec5-alice', { aud: 'https://other.example/mcp' })],
      ['a token from another issuer signed with the IdP key', await stack.token('sec5-alice', { iss: 'https://evil.example' })],
      ['a token claiming our issuer signed with a stranger key', await forged('stranger')],
      ["a token claiming our issuer signed with a stranger key under the IdP's kid", await forged(idpKid)],
    ];
    const before = stack.github.requests.length;
    for (const [label, token] of cases) {
      assertChallenge(
        await rawCall(stack.mcpUrl, token, { method: 'tools/call', params: { name: 'github_whoami', arguments: {}, _meta: envelope() } }),
        label,
      );
    }
    assert.equal(stack.github.requests.length, before, 'nothing reached GitHub');
    assert.equal(
      readDb(stack, (db) => (db.prepare('SELECT count(*) AS n FROM pending_connections').get() as { n: number }).n),
      0,
      'no link was made',
    );
  });

  it('publishes protected-resource metadata at both well-known locations naming /mcp and the issuer', async () => {
    for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
      const res = await fetch(`${stack.publicUrl}${path}`);
      assert.equal(res.status, 200, path);
      const doc = (await res.json()) as { resource: string; authorization_servers: string[] };
      assert.equal(doc.resource, `${stack.publicUrl}/mcp`, path);
      assert.deepEqual(doc.authorization_servers, [stack.idp.issuer], path);
    }
  });

  it('lets no authentication carry over: a call without a token right after a valid one gets 401', async () => {
    const token = await stack.token('sec5-bob');
    const ok = await rawCall(stack.mcpUrl, token, { method: 'tools/list', params: { _meta: envelope() } });
    assert.equal(ok.status, 200, ok.text);
    assert.ok(Array.isArray(ok.json?.result?.tools));
    const carried: Record<string, string> = {};
    const sessionId = ok.headers.get('mcp-session-id');
    if (sessionId) carried['mcp-session-id'] = sessionId;
    for (const cookie of ok.headers.getSetCookie()) carried.cookie = cookie.split(';')[0]!;
    assertChallenge(
      await rawCall(stack.mcpUrl, undefined, { method: 'tools/list', params: { _meta: envelope() } }, carried),
      'after a valid call',
    );
    assertChallenge(
      await rawCall(
        stack.mcpUrl,
        undefined,
        { method: 'tools/call', params: { name: 'github_whoami', arguments: {}, _meta: envelope() } },
        carried,
      ),
      'tool call after a valid call',
    );
  });

  it('never sends the MCP access token to GitHub: GitHub only ever sees its own gho_ token', async () => {
    const { token } = await connect(stack, new Browser(), 'sec5-carol');
    const whoami = await callTool(stack, token);
    assert.equal(whoami.structuredContent?.login, 'octocat');
    const created = await callTool(stack, token, 'github_create_issue', { owner: 'octo-org', repo: 'hello', title: 'Token hygiene' });
    assert.equal(created.structuredContent?.status, 'created', JSON.stringify(created));

    const ghToken = traffic.issued.at(-1);
    assert.match(ghToken ?? '', /^gho_/);
    const api = traffic.calls.filter((c) => new URL(c.url).pathname.startsWith('/api/v3/'));
    assert.ok(api.length >= 3, `the broker called the GitHub API (${api.length})`);
    for (const call of api) assert.equal(call.authorization, `Bearer ${ghToken}`, `${call.method} ${call.url}`);
    for (const call of traffic.calls) {
      for (const part of [call.url, call.authorization ?? '', call.body]) {
        assert.ok(!part.includes(token), `the MCP token was sent to GitHub in ${call.method} ${call.url}`);
        assert.ok(!JWT_IN_CLEAR.test(part), `a JWT was sent to GitHub in ${call.method} ${call.url}`);
      }
    }
    assert.ok(!stack.logs.join('\n').includes(token), 'the MCP token is never logged');
  });
});

// ------------------------------------------------------------------------------------------------
// 6. Redirects and request hygiene

describe('invariant 6: no open redirect, and hostile requests get small JSON refusals', () => {
  const stack = useStack({ holdSeconds: 1 });
  let token: string;
  before(async () => {
    token = await stack.token('sec6-alice');
  });

  it('refuses a sign-in callback opened in another browser with 400 and consumes nothing: the real browser still signs in', async () => {
    const browser = new Browser();
    const login = await browser.open(`${stack.publicUrl}/auth/login`);
    const { action, body } = formBody(login, { fields: { login: 'sec6-bea' } });
    // Follow the IdP's redirects up to, not into, our /auth/callback.
    let current = action;
    let res = await browser.request(action, { method: 'POST', body });
    for (let hops = 0; ; hops++) {
      const location = res.headers.get('location');
      assert.ok(location && hops < 15, `expected a redirect towards /auth/callback from ${current} (${res.status})`);
      await res.body?.cancel();
      current = new URL(location, current).href;
      if (new URL(current).origin === stack.publicUrl && new URL(current).pathname === '/auth/callback') break;
      res = await browser.request(current);
    }
    const stranger = await new Browser().open(current);
    assert.equal(stranger.status, 400);
    const { page } = await follow(browser, current);
    assert.equal(page.url, `${stack.publicUrl}/connections`);
    assert.equal(page.status, 200);
    assert.match(textOf(page.html), /sec6-bea/);
  });

  for (const returnTo of [
    'https://evil.example/',
    '//evil.example',
    '/\\evil.example',
    'javascript:alert(1)',
    '///evil.example',
    'https:evil.example',
  ]) {
    it(`lands on our own origin after sign-in when returnTo is ${JSON.stringify(returnTo)}`, async () => {
      const browser = new Browser();
      const login = await browser.open(`${stack.publicUrl}/auth/login?returnTo=${encodeURIComponent(returnTo)}`);
      assert.match(login.html, /Development sign-in/);
      const { action, body } = formBody(login, { fields: { login: 'sec6-alice' } });
      const { hops, page } = await follow(browser, action, { method: 'POST', body });
      const fromCallback = hops.find((h) => new URL(h.url).origin === stack.publicUrl && new URL(h.url).pathname === '/auth/callback');
      assert.ok(fromCallback, hops.map((h) => h.url).join(' -> '));
      assert.equal(fromCallback.status, 303);
      assert.equal(fromCallback.location, '/connections', 'the final redirect is our own fallback path');
      for (const hop of hops.slice(hops.indexOf(fromCallback))) assert.equal(new URL(hop.url).origin, stack.publicUrl, hop.url);
      assert.equal(page.url, `${stack.publicUrl}/connections`);
      assert.equal(page.status, 200);
      assert.ok(!browser.requests.some((r) => r.includes('evil.example')), 'evil.example was never requested');
    });
  }

  it('refuses a foreign or null Origin on POST /mcp with 403 and a JSON-RPC error', async () => {
    for (const origin of ['https://evil.example', 'null', `http://evil.example:${new URL(stack.publicUrl).port}`]) {
      const res = await rawCall(stack.mcpUrl, token, { method: 'tools/list', params: { _meta: envelope() } }, { origin });
      assert.equal(res.status, 403, origin);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(res.json?.jsonrpc, '2.0');
      assert.equal(res.json?.error?.code, -32000);
      assert.ok(!STACK_TRACE.test(res.text) && !HTML.test(res.text), res.text);
    }
    const same = await rawCall(stack.mcpUrl, token, { method: 'tools/list', params: { _meta: envelope() } }, { origin: stack.publicUrl });
    assert.equal(same.status, 200, 'our own origin is accepted');
  });

  it('refuses a foreign Host header with 403 on /mcp (JSON-RPC) and on pages (JSON)', async () => {
    const mcp = await rawHttp(stack.mcpUrl, {
      method: 'POST',
      headers: {
        host: 'evil.example',
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${token}`,
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/list',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: envelope() } }),
    });
    assert.equal(mcp.status, 403);
    const body = JSON.parse(mcp.text) as { jsonrpc: string; error: { code: number } };
    assert.equal(body.jsonrpc, '2.0');
    assert.equal(body.error.code, -32000);
    const page = await rawHttp(`${stack.publicUrl}/connections`, {
      method: 'GET',
      headers: { host: `evil.example:${new URL(stack.publicUrl).port}`, accept: 'text/html' },
    });
    assert.equal(page.status, 403);
    assert.equal((JSON.parse(page.text) as { error: string }).error, 'invalid_host');
    for (const res of [mcp, page]) assert.ok(!STACK_TRACE.test(res.text) && !HTML.test(res.text), res.text);
  });

  it('answers /healthz and /readyz whatever the Host (probes by pod IP), and they reveal nothing', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const res = await rawHttp(`${stack.publicUrl}${path}`, { method: 'GET', headers: { host: '10.1.2.3:3000' } });
      assert.equal(res.status, 200, `${path}: ${res.text}`);
      const body = JSON.parse(res.text) as Record<string, unknown>;
      assert.ok(['ok', 'ready'].includes(String(body.status)), res.text);
      assert.deepEqual(
        Object.keys(body).filter((k) => !['status', 'store', 'checks'].includes(k)),
        [],
        'nothing but a status',
      );
      if (path === '/readyz') assert.deepEqual(body.checks, { database: 'ok', identity_provider: 'ok' }, 'the checks name only states');
    }
    const other = await rawHttp(`${stack.publicUrl}/connections`, {
      method: 'GET',
      headers: { host: '10.1.2.3:3000', accept: 'text/html' },
    });
    assert.equal(other.status, 403, 'everything else still checks the Host');
  });

  it('answers an oversized body with 413, malformed JSON with 400 -32700 and a wrong content type with 415, all as JSON-RPC without stack traces', async () => {
    const post = async (body: string | ReadableStream<Uint8Array>, contentType: string) => {
      const res = await fetch(stack.mcpUrl, {
        method: 'POST',
        headers: {
          'content-type': contentType,
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${token}`,
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/list',
        },
        body,
        ...(typeof body === 'string' ? {} : { duplex: 'half' }),
      } as RequestInit);
      const text = await res.text();
      return {
        status: res.status,
        type: res.headers.get('content-type') ?? '',
        text,
        json: JSON.parse(text) as { jsonrpc: string; error: { code: number; message: string } },
      };
    };
    const big = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { pad: 'x'.repeat(1024 * 1024) } });
    const chunked = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 9; i++) controller.enqueue(new Uint8Array(128 * 1024).fill(0x20));
        controller.close();
      },
    });
    const cases = [
      { label: 'a declared body over 1 MiB', res: await post(big, 'application/json'), status: 413, code: -32600 },
      { label: 'a streamed body over 1 MiB', res: await post(chunked, 'application/json'), status: 413, code: -32600 },
      { label: 'malformed JSON', res: await post('{"jsonrpc":"2.0","id":1,', 'application/json'), status: 400, code: -32700 },
      { label: 'a text/plain body', res: await post('{}', 'text/plain'), status: 415, code: -32000 },
      { label: 'a form body', res: await post('a=1', 'application/x-www-form-urlencoded'), status: 415, code: -32000 },
    ];
    for (const { label, res, status, code } of cases) {
      assert.equal(res.status, status, `${label}: ${res.text}`);
      assert.match(res.type, /^application\/json/, label);
      assert.equal(res.json.jsonrpc, '2.0', label);
      assert.equal(res.json.error.code, code, label);
      assert.ok(!STACK_TRACE.test(res.text) && !HTML.test(res.text), `${label}: ${res.text}`);
    }
    assert.ok(!stack.logs.some((l) => /"unhandled_error"/.test(l)), 'none of these was an unhandled error');
  });
});

// ------------------------------------------------------------------------------------------------
// 7. Used and expired links

describe('invariant 7: a used or expired connect link shows a clear 410 page and can never start another authorization', () => {
  const stack = useStack({ holdSeconds: 1 });

  const authorizeHits = () => countRequests(stack.github, 'GET', '/login/oauth/authorize');

  it('shows 410 "already used" for a completed link, and re-posting its consent form starts no authorization', async () => {
    const browser = new Browser();
    const start = await startAuthorization(stack, browser, 'sec7-alice');
    const done = await browser.open(await callbackUrl(browser, start.authorize));
    assert.equal(done.status, 200);
    const hits = authorizeHits();

    const reopened = await browser.open(start.link);
    assert.equal(reopened.status, 410);
    assert.match(textOf(reopened.html), /This link was already used/);
    assert.match(textOf(reopened.html), /This connect link has already been used\. Each link works once/);

    const reposted = await browser.submit(start.consent, { button: 'allow' });
    assert.equal(reposted.status, 410);
    assert.match(textOf(reposted.html), /already been used/);
    assert.equal(new URL(reposted.url).origin, stack.publicUrl, 'not sent to GitHub');
    assert.equal(authorizeHits(), hits, "GitHub's authorize endpoint was not hit again");
  });

  it('starts exactly one authorization when the consent form is submitted twice', async () => {
    const browser = new Browser();
    const { url } = await askForLink(stack, 'sec7-bob');
    const consent = (await openSignedIn(browser, url, 'sec7-bob')).at(-1)!;
    const { action, body } = formBody(consent, { button: 'allow' });
    const first = await browser.request(action, { method: 'POST', body });
    await first.body?.cancel();
    assert.equal(first.status, 303);
    assert.equal(new URL(first.headers.get('location')!).origin, stack.github.webUrl);
    const second = await browser.open(action, { method: 'POST', body });
    assert.equal(second.status, 410);
    assert.match(textOf(second.html), /already been used/);
    const flows = readDb(stack, (db) =>
      db
        .prepare('SELECT count(*) AS n FROM oauth_flows f JOIN pending_connections p ON p.id = f.pending_id WHERE p.subject = ?')
        .get('sec7-bob'),
    ) as { n: number };
    assert.equal(flows.n, 1, 'one OAuth flow only');
  });

  it('shows 410 "expired" for a link past its lifetime, and its consent form starts no authorization', async () => {
    const browser = new Browser();
    const { url, handle } = await askForLink(stack, 'sec7-carol');
    const consent = (await openSignedIn(browser, url, 'sec7-carol')).at(-1)!;
    assert.equal(consent.status, 200);
    assert.equal(
      writeDb(stack, 'UPDATE pending_connections SET expires_at = ? WHERE link_hash = ?', Date.now() - 1000, sha256Hex(handle)),
      1,
    );
    const hits = authorizeHits();

    const reopened = await browser.open(url);
    assert.equal(reopened.status, 410);
    assert.match(textOf(reopened.html), /This link has expired/);
    assert.match(textOf(reopened.html), /it will give you a new link/);

    const posted = await browser.submit(consent, { button: 'allow' });
    assert.equal(posted.status, 410);
    assert.match(textOf(posted.html), /This link has expired/);
    assert.equal(authorizeHits(), hits);
    const flows = readDb(stack, (db) =>
      db
        .prepare('SELECT count(*) AS n FROM oauth_flows f JOIN pending_connections p ON p.id = f.pending_id WHERE p.link_hash = ?')
        .get(sha256Hex(handle)),
    ) as { n: number };
    assert.equal(flows.n, 0, 'no OAuth flow was started');
  });

  it('treats a cancelled link as used: 410, and its consent form starts no authorization', async () => {
    const browser = new Browser();
    const { url } = await askForLink(stack, 'sec7-dave');
    const consent = (await openSignedIn(browser, url, 'sec7-dave')).at(-1)!;
    const cancelled = await browser.submit(consent, { button: 'cancel' });
    assert.equal(cancelled.status, 200);
    assert.match(textOf(cancelled.html), /Nothing was connected/);
    const hits = authorizeHits();
    const reposted = await browser.submit(consent, { button: 'allow' });
    assert.equal(reposted.status, 410);
    assert.match(textOf(reposted.html), /already been used/);
    assert.equal(authorizeHits(), hits);
  });
});

// ------------------------------------------------------------------------------------------------
// 8. Pages, cookies and CSRF

describe('pages: strict headers, a hardened session cookie, and CSRF on every form post', () => {
  const stack = useStack({ holdSeconds: 1 });

  it("sends a CSP with default-src and frame-ancestors 'none', script-src 'none' (or one nonce for /connections' own static script), X-Frame-Options DENY and Cache-Control no-store on every page", async () => {
    const pages: Page[] = [];
    const alice = new Browser();
    const { link, pages: flow, callback } = await connect(stack, alice, 'sec8-alice'); // sign-in, consent, connected
    pages.push(...flow.filter((p) => new URL(p.url).origin === stack.publicUrl));
    pages.push(await alice.open(link)); // 410
    pages.push(await alice.open(callback)); // 400
    pages.push(await alice.open(`${stack.publicUrl}/connections`)); // list
    pages.push(await alice.open(`${stack.publicUrl}/nowhere`)); // 404
    const { url } = await askForLink(stack, 'sec8-bob');
    pages.push(await alice.open(url)); // 403 wrong account
    pages.push(await alice.open(`${stack.publicUrl}/connect/github?req=${'A'.repeat(43)}`)); // unknown link
    const idpLogout = await alice.submit(pages.at(-3)!, { match: /\/auth\/logout$/ }); // the IdP asks to confirm
    pages.push(await alice.submit(idpLogout, { fields: { logout: 'yes' } })); // signed out, back on /auth/signed-out
    assert.deepEqual([...new Set(pages.map((p) => p.status))].sort(), [200, 403, 404, 410, 400].sort(), 'covers success and error pages');
    for (const page of pages) {
      const label = `${page.status} ${page.url}`;
      assert.match(page.headers.get('content-type') ?? '', /^text\/html/, label);
      const policy = csp(page.headers.get('content-security-policy'));
      assert.equal(policy.get('default-src'), "'none'", label);
      if (new URL(page.url).pathname === '/connections') {
        // Its dates in the reader's time zone: one static file of ours, allowed by this response's nonce, nothing inline.
        const nonce = /^'nonce-([A-Za-z0-9_-]{22,})'$/.exec(policy.get('script-src') ?? '')?.[1];
        assert.ok(nonce, `${label}: script-src ${policy.get('script-src')}`);
        const scripts = [...page.html.matchAll(/<script\b[^>]*>/gi)].map((m) => m[0]);
        assert.deepEqual(scripts, [`<script src="/static/local-time.js" nonce="${nonce}" defer>`], label);
        assert.ok(!/<script\b[^>]*>[^<]/i.test(page.html), `${label}: no inline script`);
      } else {
        assert.equal(policy.get('script-src'), "'none'", label);
        assert.ok(!/<script\b/i.test(page.html), `no script on ${label}`);
      }
      assert.equal(policy.get('frame-ancestors'), "'none'", label);
      assert.equal(page.headers.get('x-frame-options'), 'DENY', label);
      assert.equal(page.headers.get('cache-control'), 'no-store', label);
      assert.ok(!STACK_TRACE.test(page.html), `no stack trace on ${label}`);
    }
  });

  it('issues an HttpOnly SameSite=Lax session cookie and replaces its value at sign-in', async () => {
    const browser = new Browser();
    const start = await browser.request(`${stack.publicUrl}/auth/login?returnTo=%2Fconnections`);
    await start.body?.cancel();
    const anonymous = start.headers.getSetCookie().find((c) => c.startsWith('broker_session='));
    assert.ok(anonymous, 'a session cookie is set before sign-in');
    assert.match(anonymous, /;\s*HttpOnly/i);
    assert.match(anonymous, /;\s*SameSite=Lax/i);
    const before = browser.jar.get(new URL(stack.publicUrl).host)!.get('broker_session')!;

    const login = await browser.open(new URL(start.headers.get('location')!, stack.publicUrl).href);
    const { action, body } = formBody(login, { fields: { login: 'sec8-carol' } });
    const { hops, page } = await follow(browser, action, { method: 'POST', body });
    assert.equal(page.url, `${stack.publicUrl}/connections`);
    const callback = hops.find((h) => new URL(h.url).pathname === '/auth/callback')!;
    const signedIn = callback.setCookie.find((c) => c.startsWith('broker_session='));
    assert.ok(signedIn, 'the callback sets a new session cookie');
    assert.match(signedIn, /;\s*HttpOnly/i);
    assert.match(signedIn, /;\s*SameSite=Lax/i);
    const afterValue = browser.jar.get(new URL(stack.publicUrl).host)!.get('broker_session')!;
    assert.notEqual(afterValue, before, 'the session id changed at sign-in');

    // The pre-sign-in id is dead: a browser still holding it is not signed in.
    const planted = new Browser();
    planted.jar.set(new URL(stack.publicUrl).host, new Map([['broker_session', before]]));
    const res = await planted.request(`${stack.publicUrl}/connections`);
    await res.body?.cancel();
    assert.equal(res.status, 303);
    assert.match(res.headers.get('location') ?? '', /^\/auth\/login\?/);
  });

  it('refuses consent, sign-out, connect and disconnect posts without a valid CSRF token with 403 and changes nothing', async () => {
    // An open link, left alone (from another assistant: the same request again would be shown this very link).
    const { handle } = await askForLink(stack, 'sec8-dave', 'github_whoami', 'another-assistant');
    const alice = new Browser();
    await connect(stack, alice, 'sec8-dave', 'hubot'); // a connection to disconnect (through a second link)
    const pendingRows = () =>
      readDb(
        stack,
        (db) => (db.prepare("SELECT count(*) AS n FROM pending_connections WHERE subject = 'sec8-dave'").get() as { n: number }).n,
      );
    const pendingBefore = pendingRows();
    const other = new Browser();
    await signIn(other, stack, 'sec8-dave');
    const otherCsrf = parseForms((await other.open(`${stack.publicUrl}/connections`)).html).find((f) => f.fields.csrf)!.fields.csrf!;
    const goodCsrf = parseForms((await alice.open(`${stack.publicUrl}/connections`)).html).find((f) => f.fields.csrf)!.fields.csrf!;
    assert.notEqual(otherCsrf, goodCsrf, 'CSRF tokens are per session');
    const authorizeHits = countRequests(stack.github, 'GET', '/login/oauth/authorize');

    const badTokens: Array<[string, Record<string, string>, Record<string, string>]> = [
      ['no token', {}, {}],
      ['an empty token', { csrf: '' }, {}],
      ['a made-up token', { csrf: randomBytes(32).toString('base64url') }, {}],
      ["another session's token", { csrf: otherCsrf }, {}],
      ['a valid token from a foreign Origin', { csrf: goodCsrf }, { origin: 'https://evil.example' }],
    ];
    const targets: Array<[string, Record<string, string>]> = [
      ['/connect/github', { handle, decision: 'allow' }],
      ['/connect/github', { handle, decision: 'cancel' }],
      ['/auth/logout', {}],
      ['/connections/github/disconnect', { confirm: 'yes' }],
      ['/connections/github/connect', {}],
    ];
    for (const [path, fields] of targets) {
      for (const [label, csrf, headers] of badTokens) {
        const page = await alice.open(`${stack.publicUrl}${path}`, {
          method: 'POST',
          body: new URLSearchParams({ ...fields, ...csrf }),
          headers,
        });
        assert.equal(page.status, 403, `${path} with ${label}`);
        assert.match(textOf(page.html), /Form expired/, `${path} with ${label}`);
      }
    }

    const pending = readDb(stack, (db) =>
      db.prepare('SELECT status FROM pending_connections WHERE link_hash = ?').get(sha256Hex(handle)),
    ) as { status: string };
    assert.equal(pending.status, 'open', 'the link was neither used nor cancelled');
    assert.equal(pendingRows(), pendingBefore, 'no new link was made');
    assert.equal(countRequests(stack.github, 'GET', '/login/oauth/authorize'), authorizeHits, 'no authorization started');
    const still = await alice.open(`${stack.publicUrl}/connections`);
    assert.equal(still.status, 200, 'still signed in');
    assert.match(textOf(still.html), /GitHub @hubot/, 'still connected');
    assert.deepEqual(stack.github.revokedGrants, [], 'nothing was revoked at GitHub');
    assert.equal(
      readDb(stack, (db) => (db.prepare("SELECT count(*) AS n FROM connections WHERE subject = 'sec8-dave'").get() as { n: number }).n),
      1,
    );

    // The same forms with the right token do work (so the refusals above are about CSRF alone).
    const disconnected = await alice.open(`${stack.publicUrl}/connections/github/disconnect`, {
      method: 'POST',
      body: new URLSearchParams({ csrf: goodCsrf, confirm: 'yes' }),
    });
    assert.equal(disconnected.status, 200);
    assert.match(textOf(disconnected.html), /GitHub disconnected/);
  });
});
