import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { startGitHubStandIn } from './support/github-standin.js';
import type { GitHubStandIn } from './support/github-standin.js';

const REDIRECT = 'http://127.0.0.1:1/callback';

describe('GitHub stand-in', () => {
  let gh: GitHubStandIn;
  before(async () => { gh = await startGitHubStandIn(); });
  after(async () => { await gh.close(); });

  const pkce = () => {
    const verifier = randomBytes(32).toString('base64url');
    return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
  };

  /** Drives the authorize page like a browser would: GET the form, then POST its fields back. */
  async function authorize(opts: { challenge?: string; login?: string; decision?: string; state?: string } = {}) {
    const q = new URLSearchParams({ client_id: gh.clientId, redirect_uri: REDIRECT, scope: 'repo read:user', state: opts.state ?? 'st<"&>' });
    if (opts.challenge) q.set('code_challenge', opts.challenge), q.set('code_challenge_method', 'S256');
    const pageRes = await fetch(`${gh.webUrl}/login/oauth/authorize?${q}`);
    assert.equal(pageRes.status, 200);
    const html = await pageRes.text();
    assert.match(html, /<title>GitHub stand-in — Authorize application<\/title>/);
    assert.match(html, /<form method="post" action="\/login\/oauth\/authorize">/);
    assert.ok(html.includes('value="st&lt;&quot;&amp;&gt;"'), 'state is HTML-escaped');
    assert.ok(!/<script/i.test(html));
    const fields = new URLSearchParams();
    for (const m of html.matchAll(/<input type="(?:hidden|text)"[^>]*name="([^"]*)" value="([^"]*)">/g)) {
      const unescape = (s: string) => s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
      fields.set(unescape(m[1]!), unescape(m[2]!));
    }
    assert.equal(fields.get('login'), 'octocat');
    if (opts.login) fields.set('login', opts.login);
    fields.set('decision', opts.decision ?? 'authorize');
    const res = await fetch(`${gh.webUrl}/login/oauth/authorize`, { method: 'POST', body: fields, redirect: 'manual' });
    assert.equal(res.status, 302);
    return new URL(res.headers.get('location')!);
  }

  const exchange = (fields: Record<string, string>, accept = 'application/json') =>
    fetch(`${gh.webUrl}/login/oauth/access_token`, {
      method: 'POST', headers: { accept }, body: new URLSearchParams({ client_id: gh.clientId, client_secret: gh.clientSecret, redirect_uri: REDIRECT, ...fields }),
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
      headers: { accept: 'application/json', 'content-type': 'application/json', authorization: `Basic ${Buffer.from(`${gh.clientId}:${gh.clientSecret}`).toString('base64')}` },
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

    const post = (repo: string, body: unknown) => fetch(`${gh.apiUrl}/repos/octo/${repo}/issues`, {
      method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body),
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
    const revoke = (authorization: string) => fetch(`${gh.apiUrl}/applications/${gh.clientId}/grant`, {
      method: 'DELETE', headers: { authorization, 'content-type': 'application/json' }, body: JSON.stringify({ access_token: token }),
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
    await assert.rejects(fetch(`${gh.webUrl}/login/oauth/access_token`, { method: 'POST', signal: AbortSignal.timeout(100) }), { name: 'TimeoutError' });
    gh.faults.token = undefined;
    assert.equal(((await (await exchange({ code: 'x' })).json()) as { error: string }).error, 'bad_verification_code');
  });
});
