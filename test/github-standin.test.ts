import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { startGitHubStandIn } from './support/github-standin.js';
import type { GitHubStandIn } from './support/github-standin.js';
import { authorizeQuery, formFields } from './support/authorize-form.js';
import { assertGitHubAppTokens } from './support/github-checks.js';

const REDIRECT = 'http://127.0.0.1:1/callback';
const BAD_REFRESH = {
  error: 'bad_refresh_token',
  error_description: 'The refresh token passed is incorrect or expired.',
  error_uri: 'https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors#bad-refresh-token',
};

const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

/** GET the stand-in's authorize page, POST its form back as `login`; returns the code. */
async function authorizeAt(gh: GitHubStandIn, opts: { login: string; scope?: string | null; challenge?: string }): Promise<string> {
  const q = new URLSearchParams({ client_id: gh.clientId, redirect_uri: REDIRECT, state: 's' });
  if (opts.scope !== null) q.set('scope', opts.scope ?? 'repo read:user');
  if (opts.challenge) {
    q.set('code_challenge', opts.challenge);
    q.set('code_challenge_method', 'S256');
  }
  const html = await (await fetch(`${gh.webUrl}/login/oauth/authorize?${q}`)).text();
  const fields = new URLSearchParams();
  for (const m of html.matchAll(/<input type="(?:hidden|text)"[^>]*name="([^"]*)" value="([^"]*)">/g))
    fields.set(m[1]!, m[2]!.replace(/&amp;/g, '&'));
  fields.set('login', opts.login);
  fields.set('decision', 'authorize');
  const res = await fetch(`${gh.webUrl}/login/oauth/authorize`, { method: 'POST', body: fields, redirect: 'manual' });
  assert.equal(res.status, 302);
  return new URL(res.headers.get('location')!).searchParams.get('code')!;
}

/** POST to the token endpoint with the stand-in's client credentials; returns the parsed JSON. */
async function tokenRequest(gh: GitHubStandIn, fields: Record<string, string>): Promise<Record<string, string | number>> {
  const res = await fetch(`${gh.webUrl}/login/oauth/access_token`, {
    method: 'POST',
    headers: { accept: 'application/json' },
    body: new URLSearchParams({ client_id: gh.clientId, client_secret: gh.clientSecret, redirect_uri: REDIRECT, ...fields }),
  });
  assert.equal(res.status, 200);
  return (await res.json()) as Record<string, string | number>;
}

const refreshAt = (gh: GitHubStandIn, refreshToken: string) =>
  tokenRequest(gh, { grant_type: 'refresh_token', refresh_token: refreshToken });
const userStatus = async (gh: GitHubStandIn, token: string) =>
  (await fetch(`${gh.apiUrl}/user`, { headers: { authorization: `Bearer ${token}` } })).status;

describe('GitHub stand-in', () => {
  let gh: GitHubStandIn;
  before(async () => {
    gh = await startGitHubStandIn();
  });
  after(async () => {
    await gh.close();
  });

  /** Drives the authorize page like a browser would: GET the form, then POST its fields back. */
  async function authorize(opts: { challenge?: string; login?: string; decision?: string; state?: string } = {}) {
    const q = authorizeQuery({ clientId: gh.clientId, redirectUri: REDIRECT, state: opts.state, challenge: opts.challenge });
    const pageRes = await fetch(`${gh.webUrl}/login/oauth/authorize?${q}`);
    assert.equal(pageRes.status, 200);
    const html = await pageRes.text();
    assert.match(html, /<title>GitHub stand-in — Authorize application<\/title>/);
    assert.match(html, /<form method="post" action="\/login\/oauth\/authorize">/);
    assert.ok(html.includes('value="st&lt;&quot;&amp;&gt;"'), 'state is HTML-escaped');
    assert.ok(!/<script/i.test(html));
    const fields = formFields(html);
    assert.equal(fields.get('login'), 'octocat');
    if (opts.login) fields.set('login', opts.login);
    fields.set('decision', opts.decision ?? 'authorize');
    const res = await fetch(`${gh.webUrl}/login/oauth/authorize`, { method: 'POST', body: fields, redirect: 'manual' });
    assert.equal(res.status, 302);
    return new URL(res.headers.get('location')!);
  }

  const exchange = (fields: Record<string, string>, accept = 'application/json') =>
    fetch(`${gh.webUrl}/login/oauth/access_token`, {
      method: 'POST',
      headers: { accept },
      body: new URLSearchParams({ client_id: gh.clientId, client_secret: gh.clientSecret, redirect_uri: REDIRECT, ...fields }),
    });

  it('rejects unknown clients and missing redirect_uri on the authorize page', async () => {
    assert.equal((await fetch(`${gh.webUrl}/login/oauth/authorize?client_id=nope&redirect_uri=${REDIRECT}`)).status, 404);
    assert.equal((await fetch(`${gh.webUrl}/login/oauth/authorize?client_id=${gh.clientId}`)).status, 400);
  });

  it('redirects with access_denied on cancel', async () => {
    const loc = await authorize({ decision: 'cancel' });
    assert.equal(loc.searchParams.get('error'), 'access_denied');
    assert.equal(loc.searchParams.get('state'), 'st<"&>');
    assert.equal(loc.searchParams.get('code'), null);
  });

  it('runs the PKCE web flow with a JSON answer and refuses code reuse', async () => {
    const { verifier, challenge } = pkce();
    const loc = await authorize({ challenge });
    assert.equal(loc.origin + loc.pathname, REDIRECT);
    assert.equal(loc.searchParams.get('state'), 'st<"&>');
    const code = loc.searchParams.get('code')!;
    const res = await exchange({ code, code_verifier: verifier });
    assert.equal(res.status, 200);
    const json = (await res.json()) as Record<string, string>;
    assert.match(json.access_token!, /^gho_[A-Za-z0-9]{36}$/);
    assert.equal(json.token_type, 'bearer');
    assert.equal(json.scope, 'repo,read:user');

    const again = await exchange({ code, code_verifier: verifier });
    assert.equal(again.status, 200);
    assert.equal(((await again.json()) as { error: string }).error, 'bad_verification_code');
  });

  it('answers form-encoded without Accept: application/json, and accepts HTTP Basic + JSON bodies', async () => {
    const { verifier, challenge } = pkce();
    const code = (await authorize({ challenge })).searchParams.get('code')!;
    const res = await exchange({ code, code_verifier: verifier }, '*/*');
    assert.match(res.headers.get('content-type')!, /^application\/x-www-form-urlencoded/);
    const form = new URLSearchParams(await res.text());
    assert.match(form.get('access_token')!, /^gho_/);
    assert.equal(form.get('token_type'), 'bearer');

    const code2 = (await authorize()).searchParams.get('code')!;
    const res2 = await fetch(`${gh.webUrl}/login/oauth/access_token`, {
      method: 'POST',
      headers: {
        accept: 'application/json',
        'content-type': 'application/json',
        authorization: `Basic ${Buffer.from(`${gh.clientId}:${gh.clientSecret}`).toString('base64')}`,
      },
      body: JSON.stringify({ code: code2 }),
    });
    assert.match(((await res2.json()) as { access_token: string }).access_token, /^gho_/);
  });

  it('returns HTTP 200 + an error body for a wrong verifier, a missing verifier and bad credentials', async () => {
    const { challenge } = pkce();
    for (const fields of [{ code_verifier: pkce().verifier }, {}] as Array<Record<string, string>>) {
      const code = (await authorize({ challenge })).searchParams.get('code')!;
      const res = await exchange({ code, ...fields });
      assert.equal(res.status, 200);
      const body = (await res.json()) as Record<string, string>;
      assert.deepEqual(Object.keys(body).sort(), ['error', 'error_description', 'error_uri']);
      assert.equal(body.error, 'bad_verification_code');
    }
    const res = await exchange({ code: 'x', client_secret: 'wrong' });
    assert.equal(((await res.json()) as { error: string }).error, 'incorrect_client_credentials');
  });

  it('serves /user and creates issues, then a revoked grant makes the token answer 401', async () => {
    const { verifier, challenge } = pkce();
    const code = (await authorize({ challenge, login: 'new-user' })).searchParams.get('code')!;
    const { access_token: token } = (await (await exchange({ code, code_verifier: verifier })).json()) as { access_token: string };
    const auth = { authorization: `Bearer ${token}` };

    const me = await fetch(`${gh.apiUrl}/user`, { headers: auth });
    assert.equal(me.status, 200);
    assert.equal(me.headers.get('x-oauth-scopes'), 'repo, read:user');
    assert.equal(me.headers.get('x-ratelimit-limit'), '5000');
    const user = (await me.json()) as { login: string; id: number; html_url: string; type: string };
    assert.equal(user.login, 'new-user');
    assert.equal(user.html_url, `${gh.webUrl}/new-user`);
    assert.equal(gh.users.get('new-user')?.id, user.id);

    const post = (repo: string, body: unknown) =>
      fetch(`${gh.apiUrl}/repos/octo/${repo}/issues`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const created = await post('hello', { title: 'Bug', body: 'It broke', labels: ['bug'] });
    assert.equal(created.status, 201);
    const issue = (await created.json()) as { number: number; html_url: string; labels: Array<{ name: string }>; user: { login: string } };
    assert.equal(issue.number, 1);
    assert.equal(issue.html_url, `${gh.webUrl}/octo/hello/issues/1`);
    assert.deepEqual(issue.labels, [{ name: 'bug' }]);
    assert.equal(gh.issues.at(-1)?.author, 'new-user');
    assert.equal(((await (await post('hello', { title: 'Two' })).json()) as { number: number }).number, 2);
    assert.equal((await post('hello', { body: 'no title' })).status, 422);
    assert.equal((await post('disabled-issues', { title: 'x' })).status, 410);

    gh.faults.api = 429;
    const limited = await fetch(`${gh.apiUrl}/user`, { headers: auth });
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get('retry-after'), '60');
    gh.faults.api = undefined;

    const basic = `Basic ${Buffer.from(`${gh.clientId}:${gh.clientSecret}`).toString('base64')}`;
    const revoke = (authorization: string) =>
      fetch(`${gh.apiUrl}/applications/${gh.clientId}/grant`, {
        method: 'DELETE',
        headers: { authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ access_token: token }),
      });
    assert.equal((await revoke('Basic bm9wZTpub3Bl')).status, 401);
    assert.equal(gh.activeTokenCount('new-user'), 1);
    assert.equal((await revoke(basic)).status, 204);
    assert.equal(gh.activeTokenCount('new-user'), 0);
    assert.deepEqual(gh.revokedGrants, [{ clientId: gh.clientId, login: 'new-user' }]);
    const after = await fetch(`${gh.apiUrl}/user`, { headers: auth });
    assert.equal(after.status, 401);
    assert.equal(((await after.json()) as { message: string }).message, 'Bad credentials');
    assert.equal((await revoke(basic)).status, 404);

    assert.ok(gh.requests.some((r) => r.method === 'DELETE' && r.path === `/api/v3/applications/${gh.clientId}/grant`));
    assert.ok(gh.requests.every((r) => !r.path.includes('?')));
  });

  it('is an OAuth App by default: issueTokenFor mints a gho_ token with the given scopes that never expires and has no refresh token', async () => {
    assert.equal(gh.kind, 'oauth-app');
    const issued = gh.issueTokenFor('seeded-oauth', { scopes: ['repo'] });
    assert.match(issued.accessToken, /^gho_[A-Za-z0-9]{36}$/);
    assert.deepEqual(issued, { accessToken: issued.accessToken, scopes: ['repo'] });
    const me = await fetch(`${gh.apiUrl}/user`, { headers: { authorization: `Bearer ${issued.accessToken}` } });
    assert.equal(me.status, 200);
    assert.equal(me.headers.get('x-oauth-scopes'), 'repo');
    assert.equal(((await me.json()) as { login: string }).login, 'seeded-oauth');
    assert.equal(gh.activeTokenCount('seeded-oauth'), 1);

    const before = gh.refreshCount;
    assert.deepEqual(await refreshAt(gh, `ghr_${'z'.repeat(76)}`), BAD_REFRESH, 'an OAuth App issues no refresh tokens');
    assert.equal(gh.refreshCount, before + 1);
    assert.equal(gh.refreshes.at(-1)?.ok, false);

    gh.expireAccessTokens('seeded-oauth');
    assert.equal(await userStatus(gh, issued.accessToken), 401);
    assert.equal(gh.activeTokenCount('seeded-oauth'), 0);
  });

  it('gives OAuth App tokens the requested scopes and a web flow without scope every scope the user authorized so far', async () => {
    const exchangeCode = async (code: string) => tokenRequest(gh, { code });
    assert.equal((await exchangeCode(await authorizeAt(gh, { login: 'accumulator', scope: 'read:user' }))).scope, 'read:user');
    const repo = await exchangeCode(await authorizeAt(gh, { login: 'accumulator', scope: 'repo' }));
    assert.equal(repo.scope, 'repo', 'exactly what was asked for');
    const me = await fetch(`${gh.apiUrl}/user`, { headers: { authorization: `Bearer ${repo.access_token}` } });
    assert.equal(me.headers.get('x-oauth-scopes'), 'repo');
    assert.ok(
      (await (await fetch(`${gh.webUrl}/accumulator`)).text()).includes(
        `<strong>${gh.clientId}</strong> <span class="meta">(scopes: read:user, repo)</span>`,
      ),
      'the grant holds both',
    );
    assert.equal((await exchangeCode(await authorizeAt(gh, { login: 'accumulator', scope: null }))).scope, 'read:user,repo');
    assert.equal(
      (await exchangeCode(await authorizeAt(gh, { login: 'accumulator', scope: 'user user:email gist' }))).scope,
      'user,gist',
      'normalized',
    );
    assert.equal(
      (await exchangeCode(await authorizeAt(gh, { login: 'accumulator', scope: null }))).scope,
      'repo,user,gist',
      'user absorbed read:user in the grant',
    );
  });

  it('applies sticky token-endpoint faults until cleared', async () => {
    gh.faults.token = 'malformed';
    for (let i = 0; i < 2; i++) {
      const res = await exchange({ code: 'x' });
      assert.equal(res.status, 200);
      await assert.rejects(res.json());
    }
    gh.faults.token = 'http500';
    assert.equal((await exchange({ code: 'x' })).status, 500);
    gh.faults.token = 'timeout';
    await assert.rejects(fetch(`${gh.webUrl}/login/oauth/access_token`, { method: 'POST', signal: AbortSignal.timeout(100) }), {
      name: 'TimeoutError',
    });
    gh.faults.token = undefined;
    assert.equal(((await (await exchange({ code: 'x' })).json()) as { error: string }).error, 'bad_verification_code');
  });
});

describe('GitHub stand-in as a GitHub App', () => {
  let gh: GitHubStandIn;
  let clock = Date.UTC(2026, 5, 1);
  before(async () => {
    gh = await startGitHubStandIn({ kind: 'github-app', accessTokenTtlSeconds: 120, now: () => clock });
  });
  after(async () => {
    await gh.close();
  });

  it('runs the web flow into a ghu_ access token that expires after accessTokenTtlSeconds, a ghr_ refresh token and no scopes', async () => {
    assert.equal(gh.kind, 'github-app');
    const { verifier, challenge } = pkce();
    const tokens = await tokenRequest(gh, {
      code: await authorizeAt(gh, { login: 'app-web', challenge, scope: 'repo' }),
      code_verifier: verifier,
    });
    assertGitHubAppTokens(tokens);
    assert.deepEqual([tokens.expires_in, tokens.refresh_token_expires_in, tokens.scope, tokens.token_type], [120, 15897600, '', 'bearer']);
    assert.equal(await userStatus(gh, String(tokens.access_token)), 200);
    assert.equal(gh.activeTokenCount('app-web'), 1);
    clock += 120_000;
    assert.equal(await userStatus(gh, String(tokens.access_token)), 401);
    assert.equal(gh.activeTokenCount('app-web'), 0, 'an expired token is not active');
    assert.match(String((await refreshAt(gh, String(tokens.refresh_token))).access_token), /^ghu_/);
    assert.equal(gh.activeTokenCount('app-web'), 1);
  });

  it('rotates on refresh and answers bad_refresh_token to a reused refresh token, counting every attempt in refreshCount and refreshes', async () => {
    const seeded = gh.issueTokenFor('app-rotate');
    const before = gh.refreshCount;
    const beforeList = gh.refreshes.length;
    const next = await refreshAt(gh, seeded.refreshToken!);
    assert.match(String(next.access_token), /^ghu_[A-Za-z0-9]{36}$/);
    assert.equal(await userStatus(gh, seeded.accessToken), 401, 'the old access token stopped working');
    assert.equal(await userStatus(gh, String(next.access_token)), 200);
    clock += 1000;
    assert.deepEqual(await refreshAt(gh, seeded.refreshToken!), BAD_REFRESH);
    assert.equal(await userStatus(gh, String(next.access_token)), 200);
    assert.equal(gh.refreshCount, before + 2);
    assert.deepEqual(gh.refreshes.slice(beforeList), [
      { at: clock - 1000, ok: true },
      { at: clock, ok: false },
    ]);
    assert.ok(gh.requests.filter((r) => r.path === '/login/oauth/access_token').length >= 2);
    assert.ok(gh.requests.every((r) => !r.path.includes('ghr_')));
  });

  it('mints pairs with issueTokenFor (TTL from the options or expiresInSeconds) and expires access tokens with expireAccessTokens while refresh tokens keep working', async () => {
    const seeded = gh.issueTokenFor('app-seeded');
    assert.match(seeded.accessToken, /^ghu_[A-Za-z0-9]{36}$/);
    assert.match(seeded.refreshToken!, /^ghr_[A-Za-z0-9]{76}$/);
    assert.equal(seeded.expiresAt, clock + 120_000);
    assert.deepEqual(seeded.scopes, []);
    const short = gh.issueTokenFor('app-seeded', { expiresInSeconds: 1 });
    assert.equal(short.expiresAt, clock + 1000);
    const other = gh.issueTokenFor('app-bystander');
    assert.equal(gh.activeTokenCount('app-seeded'), 2);

    gh.expireAccessTokens('app-seeded');
    assert.equal(await userStatus(gh, seeded.accessToken), 401);
    assert.equal(await userStatus(gh, short.accessToken), 401);
    assert.equal(gh.activeTokenCount('app-seeded'), 0);
    assert.equal(await userStatus(gh, other.accessToken), 200, 'other users are untouched');
    const next = await refreshAt(gh, seeded.refreshToken!);
    assert.equal(next.expires_in, 120, 'a refresh uses the stand-in TTL');
    assert.equal(await userStatus(gh, String(next.access_token)), 200);
    gh.expireAccessTokens();
    assert.equal(await userStatus(gh, other.accessToken), 401);
    assert.equal(gh.activeTokenCount(), 0);
  });

  it('delays refresh answers by faults.refreshDelayMs so two concurrent refreshes race, exactly one winning', async () => {
    const seeded = gh.issueTokenFor('app-race');
    const before = gh.refreshCount;
    gh.faults.refreshDelayMs = 250;
    const started = performance.now();
    const answers = await Promise.all([refreshAt(gh, seeded.refreshToken!), refreshAt(gh, seeded.refreshToken!)]);
    assert.ok(performance.now() - started >= 240);
    assert.equal(answers.filter((a) => typeof a.access_token === 'string').length, 1);
    assert.deepEqual(
      answers.find((a) => a.error !== undefined),
      BAD_REFRESH,
    );
    assert.equal(gh.refreshCount, before + 2);
    assert.deepEqual(
      gh.refreshes
        .slice(-2)
        .map((r) => r.ok)
        .sort(),
      [false, true],
    );
    gh.faults = {};
    assert.equal(gh.faults.refreshDelayMs, undefined, 'replacing faults clears the delay');
  });

  it('revokes the grant of a GitHub App user with DELETE /applications/:client_id/grant, killing every access and refresh token', async () => {
    const one = gh.issueTokenFor('app-revoked');
    const two = gh.issueTokenFor('app-revoked');
    const basic = `Basic ${Buffer.from(`${gh.clientId}:${gh.clientSecret}`).toString('base64')}`;
    const del = (what: 'grant' | 'token', token: string) =>
      fetch(`${gh.apiUrl}/applications/${gh.clientId}/${what}`, {
        method: 'DELETE',
        headers: { authorization: basic, 'content-type': 'application/json' },
        body: JSON.stringify({ access_token: token }),
      });
    const three = gh.issueTokenFor('app-revoked');
    assert.equal((await del('token', three.accessToken)).status, 204);
    assert.deepEqual(await refreshAt(gh, three.refreshToken!), BAD_REFRESH, 'token revocation takes its refresh token');
    assert.equal((await del('grant', one.accessToken)).status, 204);
    assert.deepEqual(
      gh.revokedGrants.filter((g) => g.login === 'app-revoked'),
      [{ clientId: gh.clientId, login: 'app-revoked' }],
    );
    for (const t of [one, two]) {
      assert.equal(await userStatus(gh, t.accessToken), 401);
      assert.deepEqual(await refreshAt(gh, t.refreshToken!), BAD_REFRESH);
    }
    assert.equal(gh.activeTokenCount('app-revoked'), 0);
  });
});
