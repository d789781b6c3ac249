import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import {
  createSandboxGitHub,
  normalizeScopes,
  type SandboxClient,
  type SandboxFaults,
  type SandboxGitHub,
} from '../src/dev/sandbox-github/index.js';
import { openDevTables, SandboxGitHubStore } from '../src/dev/store/index.js';
import { openSqliteStore, sqliteHandle, type SqliteDb } from '../src/store/index.js';
import { authorizeQuery, formFields } from './support/authorize-form.js';
import { assertGitHubAppTokens } from './support/github-checks.js';
import { useSuite } from './support/suite.js';
import { listenLoopback } from './support/listen.js';

const REDIRECT = 'http://127.0.0.1:1/callback';
const LABEL = 'Sandbox GitHub — simulated, not github.com';
const MOUNT = '/sandbox/github';
const CLIENT: SandboxClient = { clientId: 'Iv1.sandbox-a', clientSecret: 'secret-a-0123456789', name: 'Connect <Broker>' };
const OTHER_CLIENT = { clientId: 'Iv1.sandbox-b', clientSecret: 'secret-b-0123456789' };
/** A GitHub App (user-to-server tokens) whose access tokens live one minute. */
const APP_CLIENT = {
  clientId: 'Iv23.sandbox-app',
  clientSecret: 'secret-app-0123456789',
  kind: 'github-app',
  accessTokenTtlSeconds: 60,
} satisfies SandboxClient;
const APP_CLIENT_B = {
  clientId: 'Iv23.sandbox-app-b',
  clientSecret: 'secret-app-b-0123456789',
  kind: 'github-app',
} satisfies SandboxClient;
const REFRESH_TTL_SECONDS = 15_897_600;

interface Running {
  webUrl: string;
  apiUrl: string;
  db: SqliteDb;
  faults: SandboxFaults;
  requests: Array<{ method: string; path: string }>;
  /** `ok` of every refresh request reported to onRefresh, in order. */
  refreshes: boolean[];
  sandbox: SandboxGitHub;
  close(): Promise<void>;
}

/** {@link startSandbox} on a database in a fresh temporary folder, removed when it closes. */
async function startSandboxInTemp(prefix: string, clock: () => number): Promise<Running> {
  const { dbPath, remove } = tempDatabase(prefix);
  const running = await startSandbox(dbPath, clock);
  return {
    ...running,
    async close() {
      await running.close();
      remove();
    },
  };
}

/** A database file in a fresh temporary folder, and the function that removes the folder. */
function tempDatabase(prefix: string): { dbPath: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dbPath: join(dir, 'broker.db'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Serves the sandbox the way `npm run dev` does: mounted under /sandbox/github of a larger app. */
async function startSandbox(dbPath: string, clock: () => number = Date.now): Promise<Running> {
  const database = openSqliteStore(dbPath);
  const store = openDevTables(database).sandboxGitHub;
  const db = sqliteHandle(database);
  const app = express();
  app.get('/elsewhere', (_req, res) => void res.send('host app'));
  const listening = await listenLoopback(app);
  const faults: SandboxFaults = {};
  const requests: Array<{ method: string; path: string }> = [];
  const refreshes: boolean[] = [];
  const sandbox = createSandboxGitHub({
    store,
    clients: [CLIENT, OTHER_CLIENT, APP_CLIENT, APP_CLIENT_B],
    publicBase: `http://127.0.0.1:${listening.port}${MOUNT}/`,
    faults,
    onRequest: (method, path) => requests.push({ method, path }),
    onRefresh: (ok) => refreshes.push(ok),
    now: clock,
  });
  app.use(MOUNT, sandbox.router);
  return {
    webUrl: sandbox.webUrl,
    apiUrl: sandbox.apiUrl,
    db,
    faults,
    requests,
    refreshes,
    sandbox,
    close: async () => {
      await listening.close(); // also ends requests parked by the 'timeout' fault
      await database.close();
    },
  };
}

const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

/** Drives the authorize page like a browser would: GET the form, then POST its fields back. */
async function authorize(
  gh: Running,
  opts: {
    challenge?: string;
    login?: string;
    decision?: string;
    state?: string;
    scope?: string | null;
    client?: { clientId: string };
  } = {},
) {
  const q = authorizeQuery({
    clientId: (opts.client ?? CLIENT).clientId,
    redirectUri: REDIRECT,
    scope: opts.scope,
    state: opts.state,
    challenge: opts.challenge,
  });
  const pageRes = await fetch(`${gh.webUrl}/login/oauth/authorize?${q}`);
  assert.equal(pageRes.status, 200);
  const html = await pageRes.text();
  const form = /<form method="post" action="([^"]*)">/.exec(html);
  assert.equal(form?.[1], `${MOUNT}/login/oauth/authorize`);
  const fields = formFields(html);
  assert.equal(fields.get('login'), 'octocat');
  if (opts.login) fields.set('login', opts.login);
  fields.set('decision', opts.decision ?? 'authorize');
  const res = await fetch(new URL(form![1]!, gh.webUrl), { method: 'POST', body: fields, redirect: 'manual' });
  assert.equal(res.status, 302);
  assert.equal(res.headers.get('x-sandbox'), 'github');
  return new URL(res.headers.get('location')!);
}

const exchange = (
  gh: Running,
  fields: Record<string, string>,
  accept = 'application/json',
  client: { clientId: string; clientSecret: string } = CLIENT,
) =>
  fetch(`${gh.webUrl}/login/oauth/access_token`, {
    method: 'POST',
    headers: { accept },
    body: new URLSearchParams({ client_id: client.clientId, client_secret: client.clientSecret, redirect_uri: REDIRECT, ...fields }),
  });

/** A full web flow for `login`; returns the access token. */
async function connect(gh: Running, login = 'octocat', scope?: string | null): Promise<string> {
  return (await connectWithScope(gh, login, scope)).token;
}

/** A full web flow for `login` at the OAuth App; returns the access token and its `scope` answer. */
async function connectWithScope(gh: Running, login: string, scope?: string | null): Promise<{ token: string; scope: string }> {
  const { verifier, challenge } = pkce();
  const code = (await authorize(gh, { challenge, login, ...(scope !== undefined ? { scope } : {}) })).searchParams.get('code')!;
  const body = (await (await exchange(gh, { code, code_verifier: verifier })).json()) as {
    access_token?: string;
    scope?: string;
    error?: string;
  };
  assert.match(body.access_token ?? `error: ${body.error}`, /^gho_[A-Za-z0-9]{36}$/);
  return { token: body.access_token!, scope: body.scope! };
}

interface AppTokens {
  access_token: string;
  expires_in: number;
  refresh_token: string;
  refresh_token_expires_in: number;
  scope: string;
  token_type: string;
}

/** A full web flow for `login` at a GitHub App; returns the whole JSON token answer. */
async function connectApp(
  gh: Running,
  login = 'octocat',
  client: { clientId: string; clientSecret: string } = APP_CLIENT,
): Promise<AppTokens> {
  const { verifier, challenge } = pkce();
  const code = (await authorize(gh, { challenge, login, client })).searchParams.get('code')!;
  const body = (await (await exchange(gh, { code, code_verifier: verifier }, 'application/json', client)).json()) as AppTokens & {
    error?: string;
  };
  assert.match(body.access_token ?? `error: ${body.error}`, /^ghu_[A-Za-z0-9]{36}$/);
  return body;
}

/** POST grant_type=refresh_token; returns the parsed JSON answer. */
async function refresh(
  gh: Running,
  refreshToken: string,
  client: { clientId: string; clientSecret: string } = APP_CLIENT,
  extra: Record<string, string> = {},
) {
  const res = await fetch(`${gh.webUrl}/login/oauth/access_token`, {
    method: 'POST',
    headers: { accept: 'application/json' },
    body: new URLSearchParams({
      client_id: client.clientId,
      client_secret: client.clientSecret,
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      ...extra,
    }),
  });
  assert.equal(res.status, 200);
  return (await res.json()) as Partial<AppTokens> & { error?: string; error_description?: string; error_uri?: string };
}

const BAD_REFRESH = {
  error: 'bad_refresh_token',
  error_description: 'The refresh token passed is incorrect or expired.',
  error_uri: 'https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors#bad-refresh-token',
};
const userStatus = async (gh: Running, token: string) => (await fetch(`${gh.apiUrl}/user`, { headers: bearer(token) })).status;

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const basicAuth = (c = CLIENT) => `Basic ${Buffer.from(`${c.clientId}:${c.clientSecret}`).toString('base64')}`;

describe('sandbox GitHub (mounted under /sandbox/github, SQLite-backed)', () => {
  let clock = Date.now();
  const gh = useSuite('the sandbox', () => startSandboxInTemp('sandbox-github-', () => clock));

  it('derives webUrl and apiUrl from publicBase without its trailing slash', () => {
    assert.match(gh.webUrl, /^http:\/\/127\.0\.0\.1:\d+\/sandbox\/github$/);
    assert.equal(gh.apiUrl, `${gh.webUrl}/api/v3`);
  });

  it('labels the authorize page as a simulated sandbox and sends its own CSP, X-Sandbox and no script or inline style', async () => {
    const q = new URLSearchParams({ client_id: CLIENT.clientId, redirect_uri: REDIRECT, scope: 'repo', state: 'st<"&>' });
    const res = await fetch(`${gh.webUrl}/login/oauth/authorize?${q}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-sandbox'), 'github');
    assert.equal(
      res.headers.get('content-security-policy'),
      "default-src 'none'; style-src 'self'; form-action http://127.0.0.1:1 'self'; frame-ancestors 'none'",
    );
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
    const q = new URLSearchParams({
      client_id: CLIENT.clientId,
      redirect_uri: "http://a;b'x.example/cb",
      scope: '<img src=x>',
      login: '"><script>alert(1)</script>',
    });
    const res = await fetch(`${gh.webUrl}/login/oauth/authorize?${q}`);
    assert.equal(res.status, 200);
    assert.equal(
      res.headers.get('content-security-policy'),
      "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'",
    );
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
    const js = await fetch(
      `${gh.webUrl}/login/oauth/authorize?client_id=${CLIENT.clientId}&redirect_uri=${encodeURIComponent('javascript:alert(1)')}`,
    );
    assert.equal(js.status, 400);
    assert.ok((await js.text()).includes('The redirect_uri parameter is missing or invalid.'));
    const post = await fetch(`${gh.webUrl}/login/oauth/authorize`, {
      method: 'POST',
      redirect: 'manual',
      body: new URLSearchParams({ client_id: CLIENT.clientId, redirect_uri: 'javascript:alert(1)', decision: 'authorize' }),
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
    const q = new URLSearchParams({
      client_id: CLIENT.clientId,
      redirect_uri: REDIRECT,
      state: 's',
      code_challenge: 'abc',
      code_challenge_method: 'plain',
      login: 'octocat',
      decision: 'authorize',
    });
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
    assert.equal(
      await errorOf(await exchange(gh, { code: forA }, 'application/json', OTHER_CLIENT)),
      'bad_verification_code',
      'a code only works for its own client',
    );
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
    assert.equal(
      Number((await fetch(`${gh.apiUrl}/user`, { headers: bearer(token) })).headers.get('x-ratelimit-remaining')),
      remaining - 1,
    );

    const post = (owner: string, repo: string, body: unknown) =>
      fetch(`${gh.apiUrl}/repos/${owner}/${repo}/issues`, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const created = await post('octo', 'hello', { title: 'Bug <b>', body: 'It broke <script>x</script>', labels: ['bug'] });
    assert.equal(created.status, 201);
    const issue = (await created.json()) as {
      number: number;
      html_url: string;
      url: string;
      labels: Array<{ name: string }>;
      user: { login: string };
    };
    assert.equal(issue.number, 1);
    assert.equal(issue.html_url, `${gh.webUrl}/octo/hello/issues/1`);
    assert.equal(issue.url, `${gh.apiUrl}/repos/octo/hello/issues/1`);
    assert.equal(created.headers.get('location'), issue.url);
    assert.deepEqual(issue.labels, [{ name: 'bug' }]);
    assert.equal(issue.user.login, 'new-user');
    assert.equal(((await (await post('octo', 'hello', { title: 'Two' })).json()) as { number: number }).number, 2);
    assert.equal(
      ((await (await post('octo', 'other', { title: 'One' })).json()) as { number: number }).number,
      1,
      'numbers are per repository',
    );
    assert.equal(
      ((await (await post('OCTO', 'Hello', { title: 'Three' })).json()) as { number: number }).number,
      3,
      'repository names are case-insensitive',
    );

    const view = await fetch(issue.html_url);
    assert.equal(view.status, 200);
    assert.equal(view.headers.get('x-sandbox'), 'github');
    assert.equal(
      view.headers.get('content-security-policy'),
      "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'",
    );
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
    assert.ok(
      profileHtml.includes('<strong>Connect &lt;Broker&gt;</strong> <span class="meta">(scopes: repo, read:user)</span>'),
      'the user page lists the authorized app by name',
    );
    assert.ok(!profileHtml.includes(token));

    const home = await fetch(gh.webUrl);
    assert.equal(home.status, 200);
    const homeHtml = await home.text();
    assert.ok(homeHtml.includes(LABEL));
    assert.ok(homeHtml.includes(`href="${MOUNT}/octo/hello/issues/1"`));
  });

  it('validates issues like GitHub: 422 without a title or with bad labels, 410 when issues are disabled, 404 for a private org', async () => {
    const token = await connect(gh, 'hubot');
    const post = (owner: string, repo: string, body: unknown) =>
      fetch(`${gh.apiUrl}/repos/${owner}/${repo}/issues`, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const missing = await post('octo', 'v', { body: 'no title' });
    assert.equal(missing.status, 422);
    assert.deepEqual(((await missing.json()) as { errors: unknown }).errors, [
      { resource: 'Issue', field: 'title', code: 'missing_field' },
    ]);
    assert.equal((await post('octo', 'v', { title: 'x', labels: [1] })).status, 422);
    assert.equal((await post('octo', 'disabled-issues', { title: 'x' })).status, 410);
    assert.equal((await post('private-org', 'v', { title: 'x' })).status, 404);
    const badJson = await fetch(`${gh.apiUrl}/repos/octo/v/issues`, {
      method: 'POST',
      headers: { ...bearer(token), 'content-type': 'application/json' },
      body: '{"title":',
    });
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

  it("revokes one token or the whole grant with the app's Basic credentials", async () => {
    const one = await connect(gh, 'monalisa');
    const two = await connect(gh, 'monalisa', 'repo');
    const revoke = (what: 'grant' | 'token', token: string, authorization = basicAuth(), clientId = CLIENT.clientId) =>
      fetch(`${gh.apiUrl}/applications/${clientId}/${what}`, {
        method: 'DELETE',
        headers: { authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ access_token: token }),
      });
    assert.equal((await revoke('token', one, 'Basic bm9wZTpub3Bl')).status, 401);
    assert.equal(
      (await revoke('token', one, basicAuth(OTHER_CLIENT), OTHER_CLIENT.clientId)).status,
      404,
      "another app cannot revoke this app's token",
    );
    assert.equal((await revoke('token', one, basicAuth(), OTHER_CLIENT.clientId)).status, 404);
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(one) })).status, 200);

    assert.equal((await revoke('token', one)).status, 204);
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(one) })).status, 401);
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(two) })).status, 200, 'revoking one token leaves the others');
    assert.equal((await revoke('token', one)).status, 404);

    const pendingCode = (await authorize(gh, { login: 'monalisa' })).searchParams.get('code')!;
    assert.equal((await revoke('grant', two)).status, 204);
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(two) })).status, 401);
    assert.equal(
      ((await (await exchange(gh, { code: pendingCode })).json()) as { error: string }).error,
      'bad_verification_code',
      'a revoked grant takes its pending codes with it',
    );
    const profile = await (await fetch(`${gh.webUrl}/monalisa`)).text();
    assert.ok(profile.includes('<h2>Authorized applications</h2>\n<p>None.</p>'));
    const revocations = new SandboxGitHubStore(gh.db).listGrantRevocations().map(({ clientId, login }) => ({ clientId, login }));
    assert.deepEqual(
      revocations.filter((r) => r.login === 'monalisa'),
      [{ clientId: CLIENT.clientId, login: 'monalisa' }],
    );
  });

  it("the user page names each authorized app, revokes it from a form of its own origin only, and lists the user's repositories", async () => {
    const token = await connect(gh, 'page-user', 'repo');
    const otherCode = (await authorize(gh, { login: 'page-user', scope: 'gist', client: OTHER_CLIENT })).searchParams.get('code')!;
    const other = ((await (await exchange(gh, { code: otherCode }, 'application/json', OTHER_CLIENT)).json()) as { access_token: string })
      .access_token;
    const created = await fetch(`${gh.apiUrl}/repos/someone/made-here/issues`, {
      method: 'POST',
      headers: { ...bearer(token), 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'first' }),
    });
    assert.equal(created.status, 201);
    const profile = await (await fetch(`${gh.webUrl}/page-user`)).text();
    // The app's name (escaped), not its client id; one without a name keeps its id.
    assert.match(profile, /<strong>Connect &lt;Broker&gt;<\/strong> <span class="meta">\(scopes: repo\)<\/span>/);
    assert.match(profile, new RegExp(`<strong>${OTHER_CLIENT.clientId.replace('.', '\\.')}</strong>`));
    assert.match(profile, /<code>someone\/made-here<\/code> <span class="meta">\(you created it\)<\/span>/);
    const action = `${gh.webUrl}/page-user/applications/${encodeURIComponent(CLIENT.clientId)}/revoke`;
    assert.ok(profile.includes(`action="${new URL(action).pathname}"`));

    // A form from another site (or none that says where it came from) revokes nothing.
    const foreign = await fetch(action, { method: 'POST', headers: { origin: 'https://evil.example' }, redirect: 'manual' });
    assert.equal(foreign.status, 403);
    const unlabelled = await fetch(action, { method: 'POST', redirect: 'manual' });
    assert.equal(unlabelled.status, 403);
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(token) })).status, 200);

    const revoked = await fetch(action, { method: 'POST', headers: { origin: new URL(gh.webUrl).origin }, redirect: 'manual' });
    assert.equal(revoked.status, 303);
    assert.equal(revoked.headers.get('location'), new URL(`${gh.webUrl}/page-user`).pathname);
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(token) })).status, 401, "the app's token stops working");
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(other) })).status, 200, 'the other app keeps its grant');
    const again = await fetch(action, { method: 'POST', headers: { origin: new URL(gh.webUrl).origin }, redirect: 'manual' });
    assert.equal(again.status, 404);
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

  it('gives an OAuth App token exactly the scopes requested, while the grant accumulates every scope the user authorized', async () => {
    const first = await connectWithScope(gh, 'scoper', 'read:user');
    assert.equal(first.scope, 'read:user');
    const second = await connectWithScope(gh, 'scoper', 'repo');
    assert.equal(second.scope, 'repo', 'a token asked for `repo` carries `repo` (github/docs: "identical to what you requested")');
    const me = await fetch(`${gh.apiUrl}/user`, { headers: bearer(second.token) });
    assert.equal(me.headers.get('x-oauth-scopes'), 'repo');
    assert.equal(
      (await fetch(`${gh.apiUrl}/user`, { headers: bearer(first.token) })).headers.get('x-oauth-scopes'),
      'read:user',
      'the earlier token keeps its scopes',
    );
    const store = new SandboxGitHubStore(gh.db);
    assert.deepEqual(store.findGrant(CLIENT.clientId, 'scoper')?.scopes, ['read:user', 'repo']);
    assert.match(
      await (await fetch(`${gh.webUrl}/scoper`)).text(),
      /Connect &lt;Broker&gt;<\/strong> <span class="meta">\(scopes: read:user, repo\)/,
    );

    const page = await (await fetch(`${gh.webUrl}/login/oauth/authorize?client_id=${CLIENT.clientId}&redirect_uri=${REDIRECT}`)).text();
    assert.ok(page.includes('with the scopes you have already authorized for it'), 'the page says what a request without scope gets');
    const union = await connectWithScope(gh, 'scoper', null);
    assert.equal(union.scope, 'read:user,repo', 'a web flow without `scope` gets every scope the user authorized for the app');
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(union.token) })).headers.get('x-oauth-scopes'), 'read:user, repo');
    assert.equal((await connectWithScope(gh, 'scoper', '')).scope, 'read:user,repo', 'an empty scope counts as none');
    assert.equal((await connectWithScope(gh, 'scope-newcomer', null)).scope, '', 'a first authorization without `scope` gets no scopes');
    assert.deepEqual(store.findGrant(CLIENT.clientId, 'scope-newcomer')?.scopes, []);
    assert.equal(store.findGrant(OTHER_CLIENT.clientId, 'scoper'), undefined, 'grants are per app');
  });

  it("normalizes scopes like GitHub: user,gist,user:email gives user and gist, and a broader scope absorbs the grant's narrower one", async () => {
    assert.deepEqual(normalizeScopes(['user', 'gist', 'user:email', 'gist']), ['user', 'gist']);
    assert.deepEqual(normalizeScopes(['public_repo', 'repo:status', 'read:org']), ['public_repo', 'repo:status', 'read:org']);
    assert.deepEqual(normalizeScopes(['public_repo', 'repo', 'admin:org', 'read:org']), ['repo', 'admin:org']);
    assert.equal((await connectWithScope(gh, 'normal', 'user,gist,user:email')).scope, 'user,gist');
    const q = new URLSearchParams({ client_id: CLIENT.clientId, redirect_uri: REDIRECT, scope: 'user:email user' });
    assert.ok(
      (await (await fetch(`${gh.webUrl}/login/oauth/authorize?${q}`)).text()).includes('with scopes: <code>user</code>.'),
      'the page lists the normalized scopes',
    );
    await connectWithScope(gh, 'narrow-then-broad', 'read:user public_repo');
    await connectWithScope(gh, 'narrow-then-broad', 'user');
    await connectWithScope(gh, 'narrow-then-broad', 'repo');
    assert.deepEqual(new SandboxGitHubStore(gh.db).findGrant(CLIENT.clientId, 'narrow-then-broad')?.scopes, ['user', 'repo']);
    assert.equal((await connectWithScope(gh, 'narrow-then-broad', null)).scope, 'user,repo');
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
      await assert.rejects(fetch(`${gh.webUrl}/login/oauth/access_token`, { method: 'POST', signal: AbortSignal.timeout(100) }), {
        name: 'TimeoutError',
      });
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

describe('sandbox GitHub as a GitHub App (user-to-server tokens)', () => {
  let clock = Date.UTC(2026, 0, 1);
  const gh = useSuite('the sandbox', () => startSandboxInTemp('sandbox-github-app-', () => clock));

  it('shows a GitHub App authorize page without scopes and issues ghu_ + ghr_ tokens with expires_in, refresh_token_expires_in and an empty scope', async () => {
    const q = new URLSearchParams({ client_id: APP_CLIENT.clientId, redirect_uri: REDIRECT, scope: 'repo admin:org' });
    const html = await (await fetch(`${gh.webUrl}/login/oauth/authorize?${q}`)).text();
    assert.ok(html.includes(`GitHub App <code>${APP_CLIENT.clientId}</code> requests to act on your behalf`));
    assert.ok(!html.includes('admin:org</code>'), 'the scope parameter is not offered');

    const tokens = await connectApp(gh, 'app-user');
    assertGitHubAppTokens(tokens);
    assert.equal(tokens.expires_in, 60, "the client's TTL");
    assert.equal(tokens.refresh_token_expires_in, REFRESH_TTL_SECONDS);
    assert.equal(tokens.scope, '', 'the requested `repo read:user` is ignored');
    assert.equal(tokens.token_type, 'bearer');
    const me = await fetch(`${gh.apiUrl}/user`, { headers: bearer(tokens.access_token) });
    assert.equal(me.status, 200);
    assert.equal(me.headers.get('x-oauth-scopes'), '');
    assert.equal(((await me.json()) as { login: string }).login, 'app-user');
    assert.ok(
      (await (await fetch(`${gh.webUrl}/app-user`)).text()).includes(
        `<strong>${APP_CLIENT.clientId}</strong> <span class="meta">(GitHub App)</span>`,
      ),
    );

    const { verifier, challenge } = pkce();
    const code = (await authorize(gh, { challenge, login: 'app-user', client: APP_CLIENT_B })).searchParams.get('code')!;
    const form = new URLSearchParams(await (await exchange(gh, { code, code_verifier: verifier }, '*/*', APP_CLIENT_B)).text());
    assert.equal(form.get('expires_in'), '28800', "GitHub's 8 hours by default, form-encoded as a string");
    assert.equal(form.get('refresh_token_expires_in'), String(REFRESH_TTL_SECONDS));
    assert.equal(form.get('scope'), '');
    assert.match(form.get('refresh_token')!, /^ghr_/);
  });

  it('answers 401 Bad credentials once the access token expires, and refreshes it into a new pair', async () => {
    const tokens = await connectApp(gh, 'expiring');
    clock += 59_999;
    assert.equal(await userStatus(gh, tokens.access_token), 200);
    clock += 1;
    const res = await fetch(`${gh.apiUrl}/user`, { headers: bearer(tokens.access_token) });
    assert.equal(res.status, 401);
    assert.deepEqual(await res.json(), { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest', status: '401' });

    const next = await refresh(gh, tokens.refresh_token);
    assert.deepEqual(Object.keys(next), ['access_token', 'expires_in', 'refresh_token', 'refresh_token_expires_in', 'scope', 'token_type']);
    assert.match(next.access_token!, /^ghu_[A-Za-z0-9]{36}$/);
    assert.match(next.refresh_token!, /^ghr_[A-Za-z0-9]{76}$/);
    assert.notEqual(next.access_token, tokens.access_token);
    assert.notEqual(next.refresh_token, tokens.refresh_token);
    assert.deepEqual(
      [next.expires_in, next.refresh_token_expires_in, next.scope, next.token_type],
      [60, REFRESH_TTL_SECONDS, '', 'bearer'],
    );
    assert.equal(await userStatus(gh, next.access_token!), 200);
    clock += 60_000;
    assert.equal(await userStatus(gh, next.access_token!), 401, 'the refreshed token expires after the TTL too');
  });

  it('rotates: after a refresh the old access and refresh tokens stop working, and reusing the old refresh token answers HTTP 200 bad_refresh_token', async () => {
    const tokens = await connectApp(gh, 'rotator');
    const next = await refresh(gh, tokens.refresh_token);
    assert.match(next.access_token!, /^ghu_/);
    assert.equal(await userStatus(gh, tokens.access_token), 401, 'the old access token died with the refresh, before its expiry');
    assert.equal(await userStatus(gh, next.access_token!), 200);
    assert.deepEqual(await refresh(gh, tokens.refresh_token), BAD_REFRESH);
    assert.equal(await userStatus(gh, next.access_token!), 200, 'a failed reuse does not kill the current pair');
    const third = await refresh(gh, next.refresh_token!);
    assert.match(third.access_token!, /^ghu_/);
    assert.equal(await userStatus(gh, next.access_token!), 401);
    assert.equal(new SandboxGitHubStore(gh.db).countTokens('rotator', clock), 1, 'one live access token: the pair was replaced, not added');
    assert.equal(new SandboxGitHubStore(gh.db).countRefreshTokens('rotator', clock), 1);
  });

  it("refuses unknown, missing and expired refresh tokens, another app's refresh token, wrong client credentials and refreshes at an OAuth App, burning nothing", async () => {
    const tokens = await connectApp(gh, 'refuser');
    assert.deepEqual(await refresh(gh, `ghr_${'x'.repeat(76)}`), BAD_REFRESH);
    const missing = await fetch(`${gh.webUrl}/login/oauth/access_token`, {
      method: 'POST',
      headers: { accept: 'application/json' },
      body: new URLSearchParams({ client_id: APP_CLIENT.clientId, client_secret: APP_CLIENT.clientSecret, grant_type: 'refresh_token' }),
    });
    assert.deepEqual(await missing.json(), BAD_REFRESH);
    assert.deepEqual(await refresh(gh, tokens.refresh_token, APP_CLIENT_B), BAD_REFRESH, 'another GitHub App');
    assert.deepEqual(await refresh(gh, tokens.refresh_token, CLIENT), BAD_REFRESH, 'an OAuth App');
    assert.equal((await refresh(gh, tokens.refresh_token, { ...APP_CLIENT, clientSecret: 'wrong' })).error, 'incorrect_client_credentials');
    const grant = await fetch(`${gh.webUrl}/login/oauth/access_token`, {
      method: 'POST',
      headers: { accept: 'application/json' },
      body: new URLSearchParams({ client_id: APP_CLIENT.clientId, client_secret: APP_CLIENT.clientSecret, grant_type: 'password' }),
    });
    assert.equal(((await grant.json()) as { error: string }).error, 'unsupported_grant_type');
    assert.match((await refresh(gh, tokens.refresh_token)).access_token!, /^ghu_/, 'none of the refusals burned the refresh token');

    const old = await connectApp(gh, 'refuser');
    clock += REFRESH_TTL_SECONDS * 1000;
    try {
      assert.deepEqual(await refresh(gh, old.refresh_token), BAD_REFRESH, 'refresh tokens expire after 15897600 s');
    } finally {
      clock -= REFRESH_TTL_SECONDS * 1000;
    }
    assert.deepEqual(await refresh(gh, old.refresh_token), BAD_REFRESH, 'an expired refresh token is gone for good');
  });

  it('reports every refresh request to onRefresh, successful or not, faults included', async () => {
    const tokens = await connectApp(gh, 'counted');
    const before = gh.refreshes.length;
    const next = await refresh(gh, tokens.refresh_token);
    await refresh(gh, tokens.refresh_token);
    await refresh(gh, next.refresh_token!, { ...APP_CLIENT, clientSecret: 'wrong' });
    try {
      gh.faults.token = 'http500';
      const res = await fetch(`${gh.webUrl}/login/oauth/access_token`, {
        method: 'POST',
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: next.refresh_token! }),
      });
      assert.equal(res.status, 500);
      gh.faults.token = 'error200';
      assert.deepEqual(await refresh(gh, next.refresh_token!), BAD_REFRESH);
    } finally {
      gh.faults.token = undefined;
    }
    await connectApp(gh, 'counted'); // a code exchange is not a refresh
    assert.deepEqual(gh.refreshes.slice(before), [true, false, false, false, false]);
    assert.match((await refresh(gh, next.refresh_token!)).access_token!, /^ghu_/, 'faulted requests burned nothing');
  });

  it('delays refresh answers with faults.refreshDelayMs but rotates on arrival, so of two concurrent refreshes with one token exactly one wins', async () => {
    const tokens = await connectApp(gh, 'racer');
    gh.faults.refreshDelayMs = 300;
    try {
      const started = performance.now();
      const answers = await Promise.all([refresh(gh, tokens.refresh_token), refresh(gh, tokens.refresh_token)]);
      assert.ok(performance.now() - started >= 290, 'both answers waited');
      const winners = answers.filter((a) => a.access_token !== undefined);
      assert.equal(winners.length, 1);
      assert.deepEqual(
        answers.find((a) => a.error !== undefined),
        BAD_REFRESH,
      );
      assert.equal(await userStatus(gh, winners[0]!.access_token!), 200);
    } finally {
      gh.faults.refreshDelayMs = undefined;
    }
    const started = performance.now();
    await refresh(gh, `ghr_${'y'.repeat(76)}`);
    assert.ok(performance.now() - started < 250, 'no delay once cleared');
  });

  it('revokes a GitHub App token together with its refresh token, and the grant with every token and refresh token; an expired token cannot revoke', async () => {
    const revoke = (what: 'grant' | 'token', token: string) =>
      fetch(`${gh.apiUrl}/applications/${APP_CLIENT.clientId}/${what}`, {
        method: 'DELETE',
        headers: { authorization: basicAuth(APP_CLIENT), 'content-type': 'application/json' },
        body: JSON.stringify({ access_token: token }),
      });
    const one = await connectApp(gh, 'revokee');
    const two = await connectApp(gh, 'revokee');
    assert.equal((await revoke('token', one.access_token)).status, 204);
    assert.equal(await userStatus(gh, one.access_token), 401);
    assert.deepEqual(await refresh(gh, one.refresh_token), BAD_REFRESH, 'the pair went together');
    assert.equal(await userStatus(gh, two.access_token), 200);

    const three = await connectApp(gh, 'revokee');
    clock += 60_000;
    try {
      assert.equal((await revoke('grant', three.access_token)).status, 404, 'an expired access token is not a valid token');
    } finally {
      clock -= 60_000;
    }
    assert.equal((await revoke('grant', three.access_token)).status, 204);
    for (const t of [two, three]) {
      assert.equal(await userStatus(gh, t.access_token), 401);
      assert.deepEqual(await refresh(gh, t.refresh_token), BAD_REFRESH, 'grant revocation kills refresh tokens');
    }
    const store = new SandboxGitHubStore(gh.db);
    assert.equal(store.countRefreshTokens('revokee'), 0);
    assert.deepEqual(
      store
        .listGrantRevocations()
        .filter((r) => r.login === 'revokee')
        .map((r) => r.clientId),
      [APP_CLIENT.clientId],
    );
  });

  it('mints tokens without a browser with issueToken and expires them with expireAccessTokens', async () => {
    const app = gh.sandbox.issueToken(APP_CLIENT.clientId, 'seeded');
    assert.match(app.accessToken, /^ghu_[A-Za-z0-9]{36}$/);
    assert.match(app.refreshToken!, /^ghr_[A-Za-z0-9]{76}$/);
    assert.equal(app.expiresAt, clock + 60_000);
    assert.deepEqual(app.scopes, []);
    assert.equal(await userStatus(gh, app.accessToken), 200);
    const short = gh.sandbox.issueToken(APP_CLIENT.clientId, 'seeded', { expiresInSeconds: 5, scopes: ['repo'] });
    assert.equal(short.expiresAt, clock + 5_000);
    assert.deepEqual(short.scopes, [], 'GitHub App tokens have no scopes');

    const oauth = gh.sandbox.issueToken(CLIENT.clientId, 'seeded', { scopes: ['repo', 'public_repo'] });
    assert.match(oauth.accessToken, /^gho_[A-Za-z0-9]{36}$/);
    assert.deepEqual(oauth, { accessToken: oauth.accessToken, scopes: ['repo'] }, 'no refresh token, no expiry, normalized scopes');
    assert.equal((await fetch(`${gh.apiUrl}/user`, { headers: bearer(oauth.accessToken) })).headers.get('x-oauth-scopes'), 'repo');
    assert.throws(() => gh.sandbox.issueToken('nope', 'seeded'), /No client nope/);

    assert.equal(gh.sandbox.expireAccessTokens('seeded', APP_CLIENT.clientId), 2);
    assert.equal(await userStatus(gh, app.accessToken), 401);
    assert.equal(await userStatus(gh, oauth.accessToken), 200, "only that app's tokens");
    assert.match((await refresh(gh, app.refreshToken!)).access_token!, /^ghu_/, 'the refresh token still works');
    assert.ok(gh.sandbox.expireAccessTokens() >= 1);
    assert.equal(await userStatus(gh, oauth.accessToken), 401);
  });
});

describe('sandbox GitHub persistence', () => {
  it('keeps users, tokens, grants and issues across a re-created router on the same database file, and stores no raw token or code', async () => {
    const { dbPath, remove } = tempDatabase('sandbox-github-');
    let gh = await startSandbox(dbPath);
    try {
      const token = await connect(gh, 'persistent');
      const unusedCode = (await authorize(gh, { login: 'persistent' })).searchParams.get('code')!;
      const firstId = ((await (await fetch(`${gh.apiUrl}/user`, { headers: bearer(token) })).json()) as { id: number }).id;
      const created = await fetch(`${gh.apiUrl}/repos/octo/persist/issues`, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'Before restart' }),
      });
      assert.equal(created.status, 201);
      const tables = gh.db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'sandbox%'").all() as Array<{
        name: string;
      }>;
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
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'After restart' }),
      });
      assert.equal(((await next.json()) as { number: number }).number, 2, 'issue numbering continues');
      assert.match(
        ((await (await exchange(gh, { code: unusedCode })).json()) as { access_token: string }).access_token,
        /^gho_/,
        'a code issued before the restart can still be exchanged',
      );
      assert.ok(
        (await (await fetch(`${gh.webUrl}/persistent`)).text()).includes('<strong>Connect &lt;Broker&gt;</strong>'),
        'the grant survived',
      );
    } finally {
      await gh.close();
      remove();
    }
  });

  it('stores GitHub App refresh tokens only as SHA-256 digests and keeps them usable across a re-created router', async () => {
    const { dbPath, remove } = tempDatabase('sandbox-github-');
    let gh = await startSandbox(dbPath);
    try {
      const tokens = await connectApp(gh, 'persistent-app');
      const row = gh.db.prepare('SELECT * FROM sandbox_github_refresh_tokens WHERE login = ?').get('persistent-app') as Record<
        string,
        unknown
      >;
      assert.equal(row.token_hash, createHash('sha256').update(tokens.refresh_token).digest('hex'));
      assert.equal(row.access_token_hash, createHash('sha256').update(tokens.access_token).digest('hex'));
      for (const { name } of gh.db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'sandbox%'").all() as Array<{
        name: string;
      }>) {
        const dump = JSON.stringify(gh.db.prepare(`SELECT * FROM ${name}`).all());
        assert.ok(!dump.includes(tokens.refresh_token) && !dump.includes(tokens.access_token), `no raw token in ${name}`);
      }
      await gh.close();
      gh = await startSandbox(dbPath);
      assert.equal(await userStatus(gh, tokens.access_token), 200);
      const next = await refresh(gh, tokens.refresh_token);
      assert.match(next.access_token!, /^ghu_/, 'a refresh token issued before the restart can be used after it');
      assert.deepEqual(await refresh(gh, tokens.refresh_token), BAD_REFRESH);
    } finally {
      await gh.close();
      remove();
    }
  });

  it('works over an in-memory database with the default users seeded', async () => {
    const database = openSqliteStore(':memory:');
    try {
      const store = openDevTables(database).sandboxGitHub;
      assert.deepEqual(store.findUser('OctoCat'), { id: 583231, login: 'octocat', name: 'The Octocat' });
      assert.deepEqual(store.ensureUser('Someone'), { id: 1000, login: 'Someone', name: 'Someone' });
      assert.equal(store.ensureUser('someone').id, 1000);
      assert.equal(store.ensureUser('another').id, 1001);
      const a = store.createIssue({ owner: 'o', repo: 'r', title: 't', body: null, labels: ['x'], author: 'someone', createdAt: 1 });
      assert.deepEqual({ number: a.number, labels: a.labels, body: a.body }, { number: 1, labels: ['x'], body: null });
      assert.equal(
        store.createIssue({ owner: 'O', repo: 'R', title: 't', body: 'b', labels: [], author: 'someone', createdAt: 2 }).number,
        2,
      );
      assert.equal(store.getIssue('o', 'R', 2)?.body, 'b');
    } finally {
      await database.close();
    }
  });
});
