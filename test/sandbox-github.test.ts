import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { createSandboxGitHub, type SandboxFaults } from '../src/dev/sandbox-github/index.js';
import { openDatabase, type Db } from '../src/store/database.js';
import { SandboxGitHubStore } from '../src/store/sandbox-github-store.js';

const REDIRECT = 'http://127.0.0.1:1/callback';
const LABEL = 'Sandbox GitHub — simulated, not github.com';
const MOUNT = '/sandbox/github';
const CLIENT = { clientId: 'Iv1.sandbox-a', clientSecret: 'secret-a-0123456789' };
const OTHER_CLIENT = { clientId: 'Iv1.sandbox-b', clientSecret: 'secret-b-0123456789' };

interface Running {
  webUrl: string;
  apiUrl: string;
  db: Db;
  faults: SandboxFaults;
  requests: Array<{ method: string; path: string }>;
  close(): Promise<void>;
}

/** Serves the sandbox the way `npm run dev` does: mounted under /sandbox/github of a larger app. */
async function startSandbox(dbPath: string, clock: () => number = Date.now): Promise<Running> {
  const db = openDatabase(dbPath);
  const app = express();
  app.get('/elsewhere', (_req, res) => void res.send('host app'));
  const server: Server = await new Promise((resolve, reject) => {
    const s = app.listen(0, '127.0.0.1', (err?: Error) => (err ? reject(err) : resolve(s)));
  });
  const faults: SandboxFaults = {};
  const requests: Array<{ method: string; path: string }> = [];
  const sandbox = createSandboxGitHub({
    store: new SandboxGitHubStore(db),
    clients: [CLIENT, OTHER_CLIENT],
    publicBase: `http://127.0.0.1:${(server.address() as AddressInfo).port}${MOUNT}/`,
    faults,
    onRequest: (method, path) => requests.push({ method, path }),
    now: clock,
  });
  app.use(MOUNT, sandbox.router);
  return {
    webUrl: sandbox.webUrl, apiUrl: sandbox.apiUrl, db, faults, requests,
    close: async () => {
      await new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections(); // also ends requests parked by the 'timeout' fault
      });
      db.close();
    },
  };
}

const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

const unescape = (s: string) => s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

/** Drives the authorize page like a browser would: GET the form, then POST its fields back. */
async function authorize(gh: Running, opts: { challenge?: string; login?: string; decision?: string; state?: string; scope?: string; client?: typeof CLIENT } = {}) {
  const q = new URLSearchParams({ client_id: (opts.client ?? CLIENT).clientId, redirect_uri: REDIRECT, scope: opts.scope ?? 'repo read:user', state: opts.state ?? 'st<"&>' });
  if (opts.challenge) q.set('code_challenge', opts.challenge), q.set('code_challenge_method', 'S256');
  const pageRes = await fetch(`${gh.webUrl}/login/oauth/authorize?${q}`);
  assert.equal(pageRes.status, 200);
  const html = await pageRes.text();
  const form = /<form method="post" action="([^"]*)">/.exec(html);
  assert.equal(form?.[1], `${MOUNT}/login/oauth/authorize`);
  const fields = new URLSearchParams();
  for (const m of html.matchAll(/<input type="(?:hidden|text)"[^>]*name="([^"]*)" value="([^"]*)">/g)) fields.set(unescape(m[1]!), unescape(m[2]!));
  assert.equal(fields.get('login'), 'octocat');
  if (opts.login) fields.set('login', opts.login);
  fields.set('decision', opts.decision ?? 'authorize');
  const res = await fetch(new URL(form![1]!, gh.webUrl), { method: 'POST', body: fields, redirect: 'manual' });
  assert.equal(res.status, 302);
  assert.equal(res.headers.get('x-sandbox'), 'github');
  return new URL(res.headers.get('location')!);
}

const exchange = (gh: Running, fields: Record<string, string>, accept = 'application/json', client = CLIENT) =>
  fetch(`${gh.webUrl}/login/oauth/access_token`, {
    method: 'POST', headers: { accept }, body: new URLSearchParams({ client_id: client.clientId, client_secret: client.clientSecret, redirect_uri: REDIRECT, ...fields }),
  });

/** A full web flow for `login`; returns the access token. */
async function connect(gh: Running, login = 'octocat', scope?: string): Promise<string> {
  const { verifier, challenge } = pkce();
  const code = (await authorize(gh, { challenge, login, ...(scope !== undefined ? { scope } : {}) })).searchParams.get('code')!;
  const body = (await (await exchange(gh, { code, code_verifier: verifier })).json()) as { access_token?: string; error?: string };
  assert.match(body.access_token ?? `error: ${body.error}`, /^gho_[A-Za-z0-9]{36}$/);
  return body.access_token!;
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const basicAuth = (c = CLIENT) => `Basic ${Buffer.from(`${c.clientId}:${c.clientSecret}`).toString('base64')}`;

describe('sandbox GitHub (mounted under /sandbox/github, SQLite-backed)', () => {
  let dir: string;
  let gh: Running;
  let clock = Date.now();
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sandbox-github-'));
    gh = await startSandbox(join(dir, 'broker.db'), () => clock);
  });
  after(async () => {
    await gh.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('derives webUrl and apiUrl from publicBase without its trailing slash', () => {
    assert.match(gh.webUrl, /^http:\/\/127\.0\.0\.1:\d+\/sandbox\/github$/);
    assert.equal(gh.apiUrl, `${gh.webUrl}/api/v3`);
  });

  it('labels the authorize page as a simulated sandbox and sends its own CSP, X-Sandbox and no script or inline style', async () => {
    const q = new URLSearchParams({ client_id: CLIENT.clientId, redirect_uri: REDIRECT, scope: 'repo', state: 'st<"&>' });
    const res = await fetch(`${gh.webUrl}/login/oauth/authorize?${q}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-sandbox'), 'github');
    assert.equal(res.headers.get('content-security-policy'), "default-src 'none'; style-src 'self'; form-action http://127.0.0.1:1 'self'; frame-ancestors 'none'");
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const html = await res.text();
    assert.ok(html.includes(LABEL), 'sandbox label present');
    assert.match(html, /<title>Sandbox GitHub — Authorize application<\/title>/);
    assert.match(html, /<link rel="stylesheet" href="\/sandbox\/github\/style\.css">/);
    assert.match(html, /<label for="login">Sign in as<\/label>/);
    assert.match(html, /<button type="submit" name="decision" value="authorize">Authorize<\/button>/);
    assert.match(html, /<button type="submit" name="decision" value="cancel">Cancel<\/button>/);
    assert.ok(html.includes('value="st&lt;&quot;&amp;&gt;"'), 'state is HTML-escaped');
    assert.ok(!/<script|<style|\sstyle=|\son[a-z]+=/i.test(html), 'no script, no inline style, no event handlers');

    const css = await fetch(`${gh.webUrl}/style.css`);
    assert.equal(css.status, 200);
    assert.match(css.headers.get('content-type')!, /^text\/css/);
    assert.equal(css.headers.get('x-sandbox'), 'github');
    assert.match(await css.text(), /\.sandbox-label/);
  });

  it('escapes hostile parameters and keeps a non-plain redirect origin out of the CSP', async () => {
    const q = new URLSearchParams({ client_id: CLIENT.clientId, redirect_uri: "http://a;b'x.example/cb", scope: '<img src=x>', login: '"><script>alert(1)</script>' });
    const res = await fetch(`${gh.webUrl}/login/oauth/authorize?${q}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-security-policy'), "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'");
    const html = await res.text();
    assert.ok(!html.includes('<script>alert(1)'), 'login is escaped');
    assert.ok(!html.includes('<img src=x>'), 'scope is escaped');
    assert.ok(html.includes('value="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"'));
  });

  it('rejects unknown clients and missing or non-http redirect_uri on the authorize page, with labelled pages', async () => {
    const unknown = await fetch(`${gh.webUrl}/login/oauth/authorize?client_id=nope&redirect_uri=${REDIRECT}`);
    assert.equal(unknown.status, 404);
    assert.ok((await unknown.text()).includes(LABEL));
    assert.equal((await fetch(`${gh.webUrl}/login/oauth/authorize?client_id=${CLIENT.clientId}`)).status, 400);
    const js = await fetch(`${gh.webUrl}/login/oauth/authorize?client_id=${CLIENT.clientId}&redirect_uri=${encodeURIComponent('javascript:alert(1)')}`);
    assert.equal(js.status, 400);
    assert.ok((await js.text()).includes('The redirect_uri parameter is missing or invalid.'));
    const post = await fetch(`${gh.webUrl}/login/oauth/authorize`, {
      method: 'POST', redirect: 'manual', body: new URLSearchParams({ client_id: CLIENT.clientId, redirect_uri: 'javascript:alert(1)', decision: 'authorize' }),
    });
    assert.equal(post.status, 400);
    assert.equal(post.headers.get('location'), null);
  });

  it('redirects with access_denied and the state on cancel', async () => {
    const loc = await authorize(gh, { decision: 'cancel' });
    assert.equal(`${loc.origin}${loc.pathname}`, REDIRECT);
    assert.equal(loc.searchParams.get('error'), 'access_denied');
    assert.equal(loc.searchParams.get('error_description'), 'The user has denied your application access.');
    assert.equal(loc.searchParams.get('state'), 'st<"&>');
    assert.equal(loc.searchParams.get('code'), null);
  });

  it('refuses a code_challenge_method other than S256 with invalid_request', async () => {
    const q = new URLSearchParams({ client_id: CLIENT.clientId, redirect_uri: REDIRECT, state: 's', code_challenge: 'abc', code_challenge_method: 'plain', login: 'octocat', decision: 'authorize' });
    const res = await fetch(`${gh.webUrl}/login/oauth/authorize`, { method: 'POST', body: q, redirect: 'manual' });
    assert.equal(res.status, 302);
    const loc = new URL(res.headers.get('location')!);
    assert.equal(loc.searchParams.get('error'), 'invalid_request');
    assert.equal(loc.searchParams.get('code'), null);
  });

  it('runs the PKCE web flow with a JSON answer and refuses code reuse', async () => {
    const { verifier, challenge } = pkce();
    const loc = await authorize(gh, { challenge });
    assert.equal(loc.searchParams.get('state'), 'st<"&>');
    const code = loc.searchParams.get('code')!;
    assert.match(code, /^[0-9a-f]{20}$/);

    const res = await exchange(gh, { code, code_verifier: verifier });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const json = (await res.json()) as Record<string, string>;
    assert.match(json.access_token!, /^gho_[A-Za-z0-9]{36}$/);
    assert.equal(json.token_type, 'bearer');
    assert.equal(json.scope, 'repo,read:user');

    const again = await exchange(gh, { code, code_verifier: verifier });
    assert.equal(again.status, 200);
    assert.equal(((await again.json()) as { error: string }).error, 'bad_verification_code');
  });

  it('answers form-encoded without Accept: application/json, and accepts HTTP Basic + JSON bodies', async () => {
    const { verifier, challenge } = pkce();
    const code = (await authorize(gh, { challenge })).searchParams.get('code')!;
    const res = await exchange(gh, { code, code_verifier: verifier }, '*/*');
    assert.match(res.headers.get('content-type')!, /^application\/x-www-form-urlencoded/);
    const form = new URLSearchParams(await res.text());
    assert.match(form.get('access_token')!, /^gho_/);
    assert.equal(form.get('token_type'), 'bearer');

    const code2 = (await authorize(gh)).searchParams.get('code')!;
    const res2 = await fetch(`${gh.webUrl}/login/oauth/access_token`, {
      method: 'POST',
      headers: { accept: 'application/json', 'content-type': 'application/json', authorization: basicAuth() },
      body: JSON.stringify({ code: code2 }),
    });
    assert.match(((await res2.json()) as { access_token: string }).access_token, /^gho_/);
  });

  it('returns HTTP 200 + an error body for a wrong or missing verifier, bad credentials, another client, a redirect mismatch and a foreign grant type', async () => {
    const errorOf = async (res: Response) => {
      assert.equal(res.status, 200);
      const body = (await res.json()) as Record<string, string>;
      assert.deepEqual(Object.keys(body).sort(), ['error', 'error_description', 'error_uri']);
      return body.error;
    };
    const { challenge } = pkce();
    for (const fields of [{ code_verifier: pkce().verifier }, {}] as Array<Record<string, string>>) {
      const code = (await authorize(gh, { challenge })).searchParams.get('code')!;
      assert.equal(await errorOf(await exchange(gh, { code, ...fields })), 'bad_verification_code');
    }
    assert.equal(await errorOf(await exchange(gh, { code: 'x', client_secret: 'wrong' })), 'incorrect_client_credentials');
    assert.equal(await errorOf(await exchange(gh, { code: 'x', client_id: 'Iv1.unknown' })), 'incorrect_client_credentials');
    assert.equal(await errorOf(await exchange(gh, { code: 'x', grant_type: 'password' })), 'unsupported_grant_type');

    const forA = (await authorize(gh)).searchParams.get('code')!;
    assert.equal(await errorOf(await exchange(gh, { code: forA }, 'application/json', OTHER_CLIENT)), 'bad_verification_code', 'a code only works for its own client');
    const mismatch = (await authorize(gh)).searchParams.get('code')!;
    assert.equal(await errorOf(await exchange(gh, { code: mismatch, redirect_uri: 'http://127.0.0.1:1/other' })), 'redirect_uri_mismatch');
  });

  it('expires codes after 10 minutes', async () => {
    const code = (await authorize(gh)).searchParams.get('code')!;
    clock += 10 * 60 * 1000;
    try {
      assert.equal(((await (await exchange(gh, { code })).json()) as { error: string }).error, 'bad_verification_code');
    } finally {
      clock -= 10 * 60 * 1000;
    }
    const fresh = (await authorize(gh)).searchParams.get('code')!;
    clock += 10 * 60 * 1000 - 1;
    try {
      assert.match(((await (await exchange(gh, { code: fresh })).json()) as { access_token: string }).access_token, /^gho_/);
    } finally {
      clock -= 10 * 60 * 1000 - 1;
    }
  });

  it('serves /user with scope and rate-limit headers, creates issues with per-repo numbers and shows them on a labelled page', async () => {
    const token = await connect(gh, 'new-user');
    const me = await fetch(`${gh.apiUrl}/user`, { headers: bearer(token) });
    assert.equal(me.status, 200);
    assert.equal(me.headers.get('x-sandbox'), 'github');
    assert.equal(me.headers.get('x-oauth-scopes'), 'repo, read:user');
    assert.equal(me.headers.get('x-ratelimit-limit'), '5000');
    assert.equal(me.headers.get('x-ratelimit-resource'), 'core');
    const remaining = Number(me.headers.get('x-ratelimit-remaining'));
    const user = (await me.json()) as { login: string; id: number; html_url: string; type: string };
    assert.equal(user.login, 'new-user');
    assert.ok(user.id >= 1000);
    assert.equal(user.html_url, `${gh.webUrl}/new-user`);
    assert.equal(user.type, 'User');
    assert.equal(Number((await fetch(`${gh.apiUrl}/user`, { headers: bearer(token) })).headers.get('x-ratelimit-remaining')), remaining - 1);

    const post = (owner: string, repo: string, body: unknown) => fetch(`${gh.apiUrl}/repos/${owner}/${repo}/issues`, {
      method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    const created = await post('octo', 'hello', { title: 'Bug <b>', body: 'It broke <script>x</script>', labels: ['bug'] });
    assert.equal(created.status, 201);
    const issue = (await created.json()) as { number: number; html_url: string; url: string; labels: Array<{ name: string }>; user: { login: string } };
    assert.equal(issue.number, 1);
    assert.equal(issue.html_url, `${gh.webUrl}/octo/hello/issues/1`);
    assert.equal(issue.url, `${gh.apiUrl}/repos/octo/hello/issues/1`);
    assert.equal(created.headers.get('location'), issue.url);
    assert.deepEqual(issue.labels, [{ name: 'bug' }]);
    assert.equal(issue.user.login, 'new-user');
    assert.equal(((await (await post('octo', 'hello', { title: 'Two' })).json()) as { number: number }).number, 2);
    assert.equal(((await (await post('octo', 'other', { title: 'One' })).json()) as { number: number }).number, 1, 'numbers are per repository');
    assert.equal(((await (await post('OCTO', 'Hello', { title: 'Three' })).json()) as { number: number }).number, 3, 'repository names are case-insensitive');

    const view = await fetch(issue.html_url);
    assert.equal(view.status, 200);
    assert.equal(view.headers.get('x-sandbox'), 'github');
    assert.equal(view.headers.get('content-security-policy'), "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'");
    const html = await view.text();
    assert.ok(html.includes(LABEL));
    assert.match(html, /<title>Sandbox GitHub — octo\/hello#1<\/title>/);
    assert.ok(html.includes('Bug &lt;b&gt;'));
    assert.ok(html.includes('It broke &lt;script&gt;x&lt;/script&gt;'));
    assert.ok(!html.includes('<script>'));
    assert.ok(html.includes('<span class="label">bug</span>'));
    assert.equal((await fetch(`${gh.webUrl}/octo/hello/issues/99`)).status, 404);
    assert.equal((await fetch(`${gh.webUrl}/octo/hello/issues/abc`)).status, 404);

    const profile = await fetch(user.html_url);
    assert.equal(profile.status, 200);
    const profileHtml = await profile.text();
    assert.ok(profileHtml.includes(LABEL));
    assert.ok(profileHtml.includes(`<code>${CLIENT.clientId}</code> (scopes: repo, read:user)`), 'the user page lists the authorized app');
    assert.ok(!profileHtml.includes(token));

    const home = await fetch(gh.webUrl);
    assert.equal(home.status, 200);
    const homeHtml = await home.text();
    assert.ok(homeHtml.includes(LABEL));
    assert.ok(homeHtml.includes(`href="${MOUNT}/octo/hello/issues/1"`));
  });

  it('validates issues like GitHub: 422 without a title or with bad labels, 410 when issues are disabled, 404 for a private org', async () => {
    const token = await connect(gh, 'hubot');
    const post = (owner: string, repo: string, body: unknown) => fetch(`${gh.apiUrl}/repos/${owner}/${repo}/issues`, {
      method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    const missing = await post('octo', 'v', { body: 'no title' });
    assert.equal(missing.status, 422);
    assert.deepEqual(((await missing.json()) as { errors: unknown }).errors, [{ resource: 'Issue', field: 'title', code: 'missing_field' }]);
    assert.equal((await post('octo', 'v', { title: 'x', labels: [1] })).status, 422);
    assert.equal((await post('octo', 'disabled-issues', { title: 'x' })).status, 410);
    assert.equal((await post('private-org', 'v', { title: 'x' })).status, 404);
    const badJson = await fetch(`${gh.apiUrl}/repos/octo/v/issues`, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: '{"title":' });
    assert.equal(badJson.status, 400);
    assert.equal(((await badJson.json()) as { message: string }).message, 'Problems parsing JSON');
    assert.equal((await fetch(`${gh.apiUrl}/nope`, { headers: bearer(token) })).status, 404);
  });

  it('answers 401 Bad credentials without a token or with an unknown one', async () => {
    for (const headers of [{}, { authorization: 'Bearer gho_unknown' }, { authorization: 'Basic eDp5' }] as Array<Record<string, string>>) {
      const res = await fetch(`${gh.apiUrl}/user`, { headers });
      assert.equal(res.status, 401);
      assert.deepEqual(await res.json(), { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest', status: '401' });
    }
  });

  it('revokes one token or the whole grant with the app\'s Basic credentials', async () => {
    const one = await connect(gh, 'monalisa');
    const two = await connect(gh, 'monalisa', 'repo');
    const revoke = (what: 'grant' | 'token', token: string, authorization = basicAuth(), clientId = CLIENT.clientId) => fetch(`${gh.apiUrl}/applications/${clientId}/${what}`, {
      method: 'DELETE', headers: { authorization, 'content-type': 'application/json' }, body: JSON.stringify({ access_token: token }),
    });
    assert.equal((await revoke('token', one, 'Basic bm9wZTpub3Bl')).status, 401);
    assert.equal((await revoke('token', one, basicAuth(OTHER_CLIENT), OTHER_CLIENT.clientId)).status, 404, 'another app cannot revoke this app\'s token');
    assert.equal((await revoke('token', one, basicAuth(), OTHER_CLIENT.clientId)).status, 404);
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(one) })).status, 200);

    assert.equal((await revoke('token', one)).status, 204);
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(one) })).status, 401);
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(two) })).status, 200, 'revoking one token leaves the others');
    assert.equal((await revoke('token', one)).status, 404);

    const pendingCode = (await authorize(gh, { login: 'monalisa' })).searchParams.get('code')!;
    assert.equal((await revoke('grant', two)).status, 204);
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(two) })).status, 401);
    assert.equal(((await (await exchange(gh, { code: pendingCode })).json()) as { error: string }).error, 'bad_verification_code', 'a revoked grant takes its pending codes with it');
    const profile = await (await fetch(`${gh.webUrl}/monalisa`)).text();
    assert.ok(profile.includes('<h2>Authorized applications</h2>\n<p>None.</p>'));
    const revocations = new SandboxGitHubStore(gh.db).listGrantRevocations().map(({ clientId, login }) => ({ clientId, login }));
    assert.deepEqual(revocations.filter((r) => r.login === 'monalisa'), [{ clientId: CLIENT.clientId, login: 'monalisa' }]);
  });

  it('keeps only the 10 newest tokens per user, app and scope set', async () => {
    const tokens: string[] = [];
    for (let i = 0; i < 11; i++) tokens.push(await connect(gh, 'many-tokens', 'gist'));
    const other = await connect(gh, 'many-tokens', 'repo');
    const store = new SandboxGitHubStore(gh.db);
    assert.equal(store.countTokens('many-tokens'), 11);
    assert.equal(store.countTokens('MANY-TOKENS'), 11);
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(tokens[0]!) })).status, 401, 'the oldest token stopped working');
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(tokens[1]!) })).status, 200);
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(other) })).status, 200);
  });

  it('applies sticky API faults, read on every request, until cleared', async () => {
    const token = await connect(gh, 'faulty');
    const get = () => fetch(`${gh.apiUrl}/user`, { headers: bearer(token) });
    try {
      gh.faults.api = 401;
      for (let i = 0; i < 2; i++) assert.equal((await get()).status, 401);
      gh.faults.api = 403;
      const limited = await get();
      assert.equal(limited.status, 403);
      assert.equal(limited.headers.get('x-ratelimit-remaining'), '0');
      gh.faults.api = 429;
      const secondary = await get();
      assert.equal(secondary.status, 429);
      assert.equal(secondary.headers.get('retry-after'), '60');
      gh.faults.api = 500;
      assert.equal((await get()).status, 500);
    } finally {
      gh.faults.api = undefined;
    }
    assert.equal((await get()).status, 200);
  });

  it('applies sticky token-endpoint faults until cleared', async () => {
    try {
      gh.faults.token = 'malformed';
      for (let i = 0; i < 2; i++) {
        const res = await exchange(gh, { code: 'x' });
        assert.equal(res.status, 200);
        await assert.rejects(res.json());
      }
      gh.faults.token = 'http500';
      assert.equal((await exchange(gh, { code: 'x' })).status, 500);
      gh.faults.token = 'error200';
      const code = (await authorize(gh)).searchParams.get('code')!;
      assert.equal(((await (await exchange(gh, { code })).json()) as { error: string }).error, 'bad_verification_code');
      gh.faults.token = 'timeout';
      await assert.rejects(fetch(`${gh.webUrl}/login/oauth/access_token`, { method: 'POST', signal: AbortSignal.timeout(100) }), { name: 'TimeoutError' });
    } finally {
      gh.faults.token = undefined;
    }
    assert.equal(((await (await exchange(gh, { code: 'x' })).json()) as { error: string }).error, 'bad_verification_code');
  });

  it('reports every request to onRequest with the path below the mount point and without the query', async () => {
    const before = gh.requests.length;
    await fetch(`${gh.webUrl}/login/oauth/authorize?client_id=${CLIENT.clientId}&redirect_uri=${REDIRECT}&state=secret-state`);
    await fetch(`${gh.apiUrl}/user?access_token=gho_secret`);
    assert.deepEqual(gh.requests.slice(before), [
      { method: 'GET', path: '/login/oauth/authorize' },
      { method: 'GET', path: '/api/v3/user' },
    ]);
    assert.ok(gh.requests.every((r) => !r.path.includes('?') && !r.path.includes('gho_')));
  });

  it('answers only below its mount point and labels its 404 page', async () => {
    assert.equal(await (await fetch(gh.webUrl.replace(MOUNT, '/elsewhere'))).text(), 'host app');
    const missing = await fetch(`${gh.webUrl}/some/unknown/page`);
    assert.equal(missing.status, 404);
    assert.equal(missing.headers.get('x-sandbox'), 'github');
    assert.ok((await missing.text()).includes(LABEL));
  });
});

describe('sandbox GitHub persistence', () => {
  it('keeps users, tokens, grants and issues across a re-created router on the same database file, and stores no raw token or code', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sandbox-github-'));
    const dbPath = join(dir, 'broker.db');
    let gh = await startSandbox(dbPath);
    try {
      const token = await connect(gh, 'persistent');
      const unusedCode = (await authorize(gh, { login: 'persistent' })).searchParams.get('code')!;
      const firstId = ((await (await fetch(`${gh.apiUrl}/user`, { headers: bearer(token) })).json()) as { id: number }).id;
      const created = await fetch(`${gh.apiUrl}/repos/octo/persist/issues`, {
        method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify({ title: 'Before restart' }),
      });
      assert.equal(created.status, 201);
      const tables = gh.db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'sandbox%'").all() as Array<{ name: string }>;
      assert.ok(tables.length >= 5 && tables.every((t) => t.name.startsWith('sandbox_github_')));
      for (const { name } of tables) {
        const dump = JSON.stringify(gh.db.prepare(`SELECT * FROM ${name}`).all());
        assert.ok(!dump.includes(token), `no raw token in ${name}`);
        assert.ok(!dump.includes(unusedCode), `no raw code in ${name}`);
      }
      const row = gh.db.prepare('SELECT token_hash FROM sandbox_github_tokens WHERE login = ?').get('persistent') as { token_hash: string };
      assert.equal(row.token_hash, createHash('sha256').update(token).digest('hex'));
      await gh.close();
      for (const file of [dbPath, `${dbPath}-wal`]) {
        if (existsSync(file)) assert.ok(!readFileSync(file).includes(token), `no raw token in ${file}`);
      }

      gh = await startSandbox(dbPath);
      const me = await fetch(`${gh.apiUrl}/user`, { headers: bearer(token) });
      assert.equal(me.status, 200, 'a token issued before the restart still works');
      assert.equal(((await me.json()) as { id: number; login: string }).id, firstId);
      const view = await fetch(`${gh.webUrl}/octo/persist/issues/1`);
      assert.equal(view.status, 200);
      assert.ok((await view.text()).includes('Before restart'));
      const next = await fetch(`${gh.apiUrl}/repos/octo/persist/issues`, {
        method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify({ title: 'After restart' }),
      });
      assert.equal(((await next.json()) as { number: number }).number, 2, 'issue numbering continues');
      assert.match(((await (await exchange(gh, { code: unusedCode })).json()) as { access_token: string }).access_token, /^gho_/, 'a code issued before the restart can still be exchanged');
      assert.ok((await (await fetch(`${gh.webUrl}/persistent`)).text()).includes(`<code>${CLIENT.clientId}</code>`), 'the grant survived');
    } finally {
      await gh.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('works over an in-memory database with the default users seeded', () => {
    const db = openDatabase(':memory:');
    try {
      const store = new SandboxGitHubStore(db);
      assert.deepEqual(store.findUser('OctoCat'), { id: 583231, login: 'octocat', name: 'The Octocat' });
      assert.deepEqual(store.ensureUser('Someone'), { id: 1000, login: 'Someone', name: 'Someone' });
      assert.equal(store.ensureUser('someone').id, 1000);
      assert.equal(store.ensureUser('another').id, 1001);
      const a = store.createIssue({ owner: 'o', repo: 'r', title: 't', body: null, labels: ['x'], author: 'someone', createdAt: 1 });
      assert.deepEqual({ number: a.number, labels: a.labels, body: a.body }, { number: 1, labels: ['x'], body: null });
      assert.equal(store.createIssue({ owner: 'O', repo: 'R', title: 't', body: 'b', labels: [], author: 'someone', createdAt: 2 }).number, 2);
      assert.equal(store.getIssue('o', 'R', 2)?.body, 'b');
    } finally {
      db.close();
    }
  });
});
