import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../src/config/env.js';
import { keyIdFor } from '../src/crypto/index.js';
import { runRotateKeys } from '../src/cli/rotate-keys.js';
import { openSqliteStore } from '../src/store/index.js';
import { Browser, textOf } from './support/browser.js';
import { startIdp, type StartedIdp } from './support/idp.js';
import { envelope, modernClient, rawCall, resultText } from './support/mcp.js';
import { readConnection, seedConnection, seedGitHubConnection } from './support/seed.js';
import { completeConnect, startStack, type Stack } from './support/stack.js';
import { clientAs, useStack, useSuite } from './support/suite.js';
import { startProtectedUpstream } from './support/mcp-auth-upstream.js';
import { registrations, upstreamRegistration } from './support/upstream-registration.js';

describe('incremental consent', () => {
  const stack = useStack({ env: { GITHUB_SCOPES: 'read:user' } });

  it('asks only for the missing scope, keeps the existing connection usable meanwhile, and ends with both', async () => {
    const browser = new Browser();
    const token = await stack.token('ines');
    const first = await modernClient({
      url: stack.mcpUrl,
      token,
      onUrl: async (url) => (await completeConnect(browser, url, 'ines'), { action: 'accept' }),
    });
    await first.callTool({ name: 'github_whoami', arguments: {} });
    await first.close();
    assert.equal((await readConnection(stack.env, 'ines', 'github'))?.scopes, 'read:user');

    let consent = '';
    let authorizeUrl = '';
    let whoamiMeanwhile = '';
    const second = await modernClient({
      url: stack.mcpUrl,
      token,
      onUrl: async (url, message) => {
        assert.match(message, /needs to grant more access \(public_repo\)/);
        let page = await browser.open(url);
        consent = textOf(page.html);
        // The current connection keeps working while the user decides.
        const r = await rawCall(stack.mcpUrl, token, {
          method: 'tools/call',
          params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
        });
        whoamiMeanwhile = resultText(r.json.result);
        page = await browser.submit(page, { button: 'allow' });
        authorizeUrl = page.trail.find((u) => u.includes('/login/oauth/authorize')) ?? '';
        await browser.submit(page, { button: 'authorize', fields: { login: 'octocat' } });
        return { action: 'accept' };
      },
    });
    const result = await second.callTool({
      name: 'github_create_issue',
      arguments: { owner: 'octo-org', repo: 'incremental', title: 'more scopes' },
    });
    await second.close();

    assert.match(consent, /Allow more access to GitHub/);
    assert.match(consent, /Read and write your public repositories/);
    assert.doesNotMatch(consent, /Read your GitHub profile/, 'the page lists only what is missing');
    assert.match(whoamiMeanwhile, /@octocat/);
    // GitHub tokens carry exactly the requested scopes, so the request repeats the granted one; GitHub only prompts for the new.
    assert.deepEqual(new URL(authorizeUrl).searchParams.get('scope')?.split(' ').sort(), ['public_repo', 'read:user']);
    assert.equal((result.structuredContent as { status: string }).status, 'created');
    assert.deepEqual((await readConnection(stack.env, 'ines', 'github'))?.scopes.split(' ').sort(), ['public_repo', 'read:user']);
  });
});

describe('one upstream account, two principals', () => {
  const stack = useStack({ env: { SHARED_ACCOUNT_POLICY: 'refuse' } });

  it('refuses by default to link a GitHub account already linked to another user, with a clear page, a normal tool result and an audit entry', async () => {
    const alice = new Browser();
    const a = await clientAs(stack, 'alice', {
      onUrl: async (url) => (await completeConnect(alice, url, 'alice', { githubLogin: 'octocat' }), { action: 'accept' }),
    });
    await a.callTool({ name: 'github_whoami', arguments: {} });
    await a.close();

    const bob = new Browser();
    let page = '';
    let status = 0;
    const b = await clientAs(stack, 'bob', {
      onUrl: async (url) => {
        const last = await completeConnect(bob, url, 'bob', { githubLogin: 'octocat' });
        page = textOf(last.html);
        status = last.status;
        return { action: 'accept' };
      },
    });
    const result = await b.callTool({ name: 'github_whoami', arguments: {} });
    await b.close();
    assert.equal(status, 409);
    assert.match(page, /already linked to another user of this service/);
    assert.equal(result.isError, undefined);
    assert.deepEqual(result.structuredContent, { status: 'not_connected', reason: 'account_linked_elsewhere' });
    assert.equal(await readConnection(stack.env, 'bob', 'github'), undefined);
    assert.equal((await readConnection(stack.env, 'alice', 'github'))?.account_login, 'octocat');
    assert.equal((await stack.broker.broker.store.audit.list({ event: 'binding_refused' })).length, 1);
    // Only the token issued for bob's attempt was revoked, not the grant: alice's connection still works.
    const again = await rawCall(stack.mcpUrl, await stack.token('alice'), {
      method: 'tools/call',
      params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
    });
    assert.match(resultText(again.json.result), /Your linked GitHub account is @octocat/);
  });
});

describe('"more access" or "reconnect" that comes back as another upstream account', () => {
  // read:user by default, so github_create_issue (public_repo) asks for more access.
  const stack = useStack({ env: { GITHUB_SCOPES: 'read:user' } });

  /** Calls `tool` as `sub`, doing the browser part as GitHub account `githubLogin`; returns the result and the last page. */
  async function callThroughBrowser(sub: string, browser: Browser, githubLogin: string, tool: string, args: Record<string, unknown> = {}) {
    let status = 0;
    let page = '';
    const client = await clientAs(stack, sub, {
      onUrl: async (url) => {
        const last = await completeConnect(browser, url, sub, { githubLogin });
        status = last.status;
        page = textOf(last.html);
        return { action: 'accept' };
      },
    });
    try {
      return { result: await client.callTool({ name: tool, arguments: args }), status, page };
    } finally {
      await client.close();
    }
  }

  it('refuses to replace the linked account: 409 naming both logins, nothing replaced, the new token revoked, and a normal "nothing was done" for the held call', async () => {
    const browser = new Browser();
    await callThroughBrowser('olga', browser, 'octocat', 'github_whoami');
    const linked = await readConnection(stack.env, 'olga', 'github');
    assert.equal(linked?.account_login, 'octocat');

    for (const [label, prepare, tool] of [
      ['more access', async () => undefined, 'github_create_issue'],
      [
        'reconnect',
        () => stack.broker.broker.store.connections.markReauthRequired({ issuer: stack.idp.issuer, subject: 'olga' }, 'github', 'test'),
        'github_whoami',
      ],
    ] as const) {
      await prepare();
      const before = await readConnection(stack.env, 'olga', 'github');
      const { result, status, page } = await callThroughBrowser(
        'olga',
        browser,
        'hubot',
        tool,
        tool === 'github_create_issue' ? { owner: 'octo-org', repo: 'switch', title: 'as whom?' } : {},
      );
      assert.equal(status, 409, `${label}: ${page}`);
      assert.match(page, /connection here is to @octocat, but GitHub signed you in as @hubot/, label);
      assert.match(page, /Nothing was changed/, label);
      assert.equal(result.isError, undefined, label);
      assert.deepEqual(result.structuredContent, { status: 'not_connected', reason: 'different_account' }, label);
      assert.match(resultText(result), /different account than the one linked here, which was kept/, label);
      assert.deepEqual(await readConnection(stack.env, 'olga', 'github'), before, `${label}: the linked connection is untouched`);
      assert.equal(stack.github.activeTokenCount('hubot'), 0, `${label}: the token issued for @hubot was revoked`);
    }
    assert.equal((await stack.broker.broker.store.audit.list({ subject: 'olga', event: 'binding_refused' })).length, 2);
    assert.equal(stack.github.issues.length, 0, 'nothing was done as either account');

    // The same account coming back still reconnects.
    const again = await callThroughBrowser('olga', browser, 'octocat', 'github_whoami');
    assert.match(resultText(again.result), /@octocat/);
    assert.equal((await readConnection(stack.env, 'olga', 'github'))?.status, 'active');
  });
});

describe('encryption key rotation', () => {
  const stack = useStack();
  // An `auth: mcp` upstream behind its own authorization server, where the broker registers by RFC 7591.
  const upstream = useSuite('a protected upstream', () => startProtectedUpstream());
  /** `npm run rotate-keys`'s function, in this process, against the database and key ring `env` names. */
  const rotateKeys = async (env: Record<string, string>) => {
    let stdout = '';
    const status = await runRotateKeys(loadConfig(env), { write: (text: string) => (stdout += text) });
    return { status, stdout, stderr: '' };
  };
  /** A GitHub connection of `sub` sealed under `env`'s ring: only its seal is looked at, its token is never sent. */
  const sealedConnection = (env: Record<string, string>, sub: string, accountId: string, accessToken: string) =>
    seedConnection(env, sub, 'github', { id: accountId, login: `${sub}-gh` }, { accessToken, tokenType: 'bearer', scopes: [] });

  it('keeps old rows readable under a new ring, re-encrypts everything with npm run rotate-keys, and then works without the old key', async () => {
    const oldKey = stack.env.TOKEN_ENCRYPTION_KEY!;
    for (const [sub, login] of [
      ['rita', 'octocat'],
      ['sam', 'hubot'],
    ] as const) {
      await seedGitHubConnection(stack, sub, login);
    }
    // The broker's registration at the upstream: a confidential client whose secret is sealed under the old key.
    const registered = await upstreamRegistration(stack.env, upstream);
    assert.equal(registered.via, 'dynamic-registration');
    assert.ok(registered.clientSecret, 'the authorization server issued a client secret');
    const whoami = async (sub: string) =>
      resultText(
        (
          await rawCall(stack.mcpUrl, await stack.token(sub), {
            method: 'tools/call',
            params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
          })
        ).json.result,
      );

    // A new key first in the ring; the old one still opens old rows.
    const newKey = randomBytes(32).toString('base64');
    stack.env.TOKEN_ENCRYPTION_KEYS = `k2026:${newKey}`;
    await stack.restart();
    assert.match(await whoami('rita'), /@octocat/);
    await seedGitHubConnection(stack, 'tess', 'monalisa');

    const run = await rotateKeys(stack.env);
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /Re-encrypted 2 connection\(s\) under key "k2026"/);
    assert.match(run.stdout, /Re-encrypted 1 upstream client secret\(s\) .*under key "k2026"/);
    assert.match(run.stdout, /Keys in use: k2026 \(4\)\./);
    assert.match(run.stdout, /Every row uses the current key: older keys can be removed/);
    assert.doesNotMatch(run.stdout + run.stderr, /gho_|ghu_/);
    assert.ok(!(run.stdout + run.stderr).includes(registered.clientSecret), 'the client secret is never printed');

    const store = openSqliteStore(stack.env.DATABASE_PATH!);
    try {
      assert.deepEqual(await store.connections.countByKey(), [{ key_id: 'k2026', n: 3 }]);
      assert.deepEqual(await store.upstreamClients.countByKey(), [{ key_id: 'k2026', n: 1 }]);
      const audit = await store.audit.list({ event: 'keys_rotated' });
      assert.equal(audit.length, 1);
      assert.equal(audit[0]!.detail, 'resealed 2, unreadable 0; client secrets resealed 1, unreadable 0; under k2026');
    } finally {
      await store.close();
    }
    assert.notEqual(keyIdFor(Buffer.from(oldKey, 'base64')), 'k2026');

    // The old key can go: every connection still works.
    delete stack.env.TOKEN_ENCRYPTION_KEY;
    await stack.restart();
    for (const [sub, login] of [
      ['rita', 'octocat'],
      ['sam', 'hubot'],
      ['tess', 'monalisa'],
    ] as const)
      assert.match(await whoami(sub), new RegExp(`@${login}`));
    // The registration opens under the new ring alone: the same client and secret, no second registration.
    const again = await upstreamRegistration(stack.env, upstream);
    assert.deepEqual(again, registered);
    assert.equal(registrations(upstream), 1);
  });

  it('reports rows sealed under a key that left the ring instead of failing silently', async () => {
    const orphan = randomBytes(32).toString('base64');
    const env = { ...stack.env, TOKEN_ENCRYPTION_KEYS: `orphan:${orphan}` };
    await sealedConnection(env, 'uma', '77', 'gho_orphaned');
    const run = await rotateKeys(stack.env);
    assert.equal(run.status, 1);
    assert.match(run.stdout, /1 connection\(s\) sealed under a key no longer in TOKEN_ENCRYPTION_KEYS/);
  });

  it('says older keys cannot go while an upstream client secret is still sealed under another key, names it, and re-seals it once the key is back', async () => {
    // A database of its own, whose every connection is under the current key.
    const current = `now:${randomBytes(32).toString('base64')}`;
    const lostKey = `lost:${randomBytes(32).toString('base64')}`;
    const env: Record<string, string> = {
      ...stack.env,
      DATABASE_PATH: join(stack.dir, 'rotation-clients.db'),
      TOKEN_ENCRYPTION_KEYS: current,
    };
    delete env.TOKEN_ENCRYPTION_KEY;
    await sealedConnection(env, 'vera', '78', 'gho_current');
    // The registration was sealed under a key that has since left the ring.
    const registeredBefore = registrations(upstream);
    const registered = await upstreamRegistration({ ...env, TOKEN_ENCRYPTION_KEYS: lostKey }, upstream);
    assert.ok(registered.clientSecret);
    assert.equal(registrations(upstream), registeredBefore + 1);

    const rotate = (ring: string) => rotateKeys({ ...env, TOKEN_ENCRYPTION_KEYS: ring });
    const run = await rotate(current);
    assert.equal(run.status, 1, run.stdout + run.stderr);
    assert.match(run.stdout, /Re-encrypted 0 connection\(s\)/);
    assert.ok(
      run.stdout.includes(`1 upstream client secret(s) sealed under a key no longer in TOKEN_ENCRYPTION_KEYS (${upstream.issuer})`),
      run.stdout,
    );
    assert.match(run.stdout, /add that key back and run again\. Otherwise the broker forgets such a registration and registers anew/);
    assert.match(run.stdout, /Keys in use: lost \(1\), now \(1\)\./);
    assert.doesNotMatch(run.stdout, /older keys can be removed/);
    assert.ok(!(run.stdout + run.stderr).includes(registered.clientSecret));
    const store = openSqliteStore(env.DATABASE_PATH!);
    try {
      assert.deepEqual(await store.upstreamClients.countByKey(), [{ key_id: 'lost', n: 1 }], 'the row is left for the operator to recover');
      assert.match((await store.audit.list({ event: 'keys_rotated' }))[0]!.detail ?? '', /client secrets resealed 0, unreadable 1;/);
    } finally {
      await store.close();
    }

    // With the lost key back (last in the ring), the next run re-seals it, and only then says older keys can go.
    const back = await rotate(`${current},${lostKey}`);
    assert.equal(back.status, 0, back.stdout + back.stderr);
    assert.match(back.stdout, /Re-encrypted 1 upstream client secret\(s\)/);
    assert.match(back.stdout, /Every row uses the current key: older keys can be removed/);
    assert.deepEqual(await upstreamRegistration(env, upstream), registered, 'it opens under the current key alone');
    assert.equal(registrations(upstream), registeredBefore + 1, 'no new registration');
  });
});

describe('a generic OpenID Connect provider from PROVIDERS_FILE (a second oidc-provider playing GitLab)', () => {
  let stack: Stack;
  let gitlab: StartedIdp;
  before(async () => {
    stack = await startStack();
    gitlab = await startIdp({
      clients: [
        {
          client_id: 'gitlab-app',
          client_secret: 'gitlab-app-secret',
          redirect_uris: [`${stack.publicUrl}/connect/gitlab/callback`],
          token_endpoint_auth_method: 'client_secret_post',
          grant_types: ['authorization_code', 'refresh_token'],
        },
      ],
      resource: 'https://gitlab.test/api',
    });
    const file = join(stack.dir, 'providers.yaml');
    writeFileSync(
      file,
      [
        'providers:',
        '  - id: gitlab',
        '    displayName: GitLab (self-managed)',
        '    kind: oidc',
        `    issuer: ${gitlab.issuer}`,
        '    scopes:',
        '      - { name: openid, description: Confirm who you are on GitLab. }',
        '      - { name: profile, description: See your GitLab name. }',
        '      - { name: offline_access, description: Keep access while you are away. }',
        '    authorizeParams: { prompt: consent }',
        '    identity: { source: id_token, idField: sub, loginField: preferred_username }',
        '    revocation: { kind: rfc7009 }',
        '    status: tested',
        '',
      ].join('\n'),
    );
    Object.assign(stack.env, { PROVIDERS_FILE: file, GITLAB_CLIENT_ID: 'gitlab-app', GITLAB_CLIENT_SECRET: 'gitlab-app-secret' });
    await stack.restart();
  });
  after(async () => {
    await stack.close();
    await gitlab.close();
  });

  it('connects through discovery, PKCE and the ID token, then disconnects with RFC 7009 revocation', async () => {
    const browser = new Browser();
    let connected = '';
    const client = await clientAs(stack, 'vera', {
      onUrl: async (url) => {
        assert.match(new URL(url).pathname, /^\/connect\/gitlab$/);
        let page = await browser.open(url);
        if (/Development sign-in/.test(page.html)) page = await browser.submit(page, { fields: { login: 'vera' } });
        assert.match(textOf(page.html), /Connect your GitLab \(self-managed\) account/);
        page = await browser.submit(page, { button: 'allow' });
        assert.ok(page.url.startsWith(gitlab.issuer), 'the browser is at the GitLab sign-in');
        page = await browser.submit(page, { fields: { login: 'vera-on-gitlab' } });
        connected = textOf(page.html);
        return { action: 'accept' };
      },
      onForm: async () => ({ action: 'accept', content: { confirm: true } }),
    });
    const linked = await client.callTool({ name: 'connect_account', arguments: { provider: 'gitlab' } });
    assert.match(connected, /Connected as @vera-on-gitlab/);
    assert.deepEqual(linked.structuredContent, {
      status: 'connected',
      provider: 'gitlab',
      login: 'vera-on-gitlab',
      scopes: ['openid', 'profile', 'offline_access'],
    });
    const gone = await client.callTool({ name: 'disconnect_account', arguments: { provider: 'gitlab' } });
    await client.close();
    assert.equal(
      (gone.structuredContent as { revoked: boolean }).revoked,
      true,
      JSON.stringify(gone) + stack.logs.filter((l) => /revoke/.test(l)).join('\n'),
    );
    assert.equal(await readConnection(stack.env, 'vera', 'gitlab'), undefined);
  });

  it('answers an unknown provider with a clear 404 page and a tool error naming the choices', async () => {
    const res = await fetch(`${stack.publicUrl}/connect/nope?req=${'A'.repeat(43)}`, { headers: { accept: 'text/html' } });
    assert.equal(res.status, 404);
    assert.match(textOf(await res.text()), /This service does not connect to that provider/);
    const r = await rawCall(stack.mcpUrl, await stack.token('vera'), {
      method: 'tools/call',
      params: { name: 'connect_account', arguments: { provider: 'nope' }, _meta: envelope() },
    });
    assert.equal(r.json.result.isError, true);
    assert.match(resultText(r.json.result), /"github"\|"gitlab"|github.*gitlab/);
  });
});

describe('the provider catalog configuration', () => {
  const base = () => ({
    PUBLIC_URL: 'https://broker.example.com',
    OIDC_ISSUER: 'https://idp.example.com',
    OIDC_CLIENT_ID: 'c',
    OIDC_CLIENT_SECRET: 's',
    GITHUB_CLIENT_ID: 'g',
    GITHUB_CLIENT_SECRET: 'gs',
    BROKER_SECRET: 'x'.repeat(32),
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
  });
  const refuses = (env: Record<string, string>, message: RegExp) =>
    assert.throws(
      () => loadConfig(env),
      (err: unknown) => err instanceof ConfigError && message.test(err.message),
    );
  let dir: string;
  before(async () => {
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    dir = mkdtempSync(join(tmpdir(), 'broker-providers-'));
  });
  after(async () => (await import('node:fs')).rmSync(dir, { recursive: true, force: true }));

  it('enables GitHub always and a built-in preset only when its credentials are set', () => {
    assert.deepEqual(
      loadConfig(base()).providers.map((p) => p.definition.id),
      ['github'],
    );
    const ids = loadConfig({
      ...base(),
      GOOGLE_CLIENT_ID: 'x',
      GOOGLE_CLIENT_SECRET: 'y',
      NOTION_CLIENT_ID: 'n',
      NOTION_CLIENT_SECRET: 'm',
    }).providers.map((p) => p.definition.id);
    assert.deepEqual(ids, ['github', 'google', 'notion']);
  });

  it('retries a just-issued token refused with 401 only where the provider says tokens replicate late (GitHub)', () => {
    const byId = new Map(
      loadConfig({ ...base(), GOOGLE_CLIENT_ID: 'x', GOOGLE_CLIENT_SECRET: 'y' }).providers.map((p) => [p.definition.id, p.definition]),
    );
    assert.equal(byId.get('github')!.freshTokenRetryMs, 1_500);
    assert.equal(byId.get('google')!.freshTokenRetryMs, 0, 'others answer a 401 at once');
  });

  it('switches GitHub to GitHub App user tokens (no scopes) with GITHUB_APP_TYPE', () => {
    const github = loadConfig({ ...base(), GITHUB_APP_TYPE: 'github-app' }).providers[0]!.definition;
    assert.equal(github.scopesApply, false);
    assert.equal(github.refresh.rotates, true);
    refuses({ ...base(), GITHUB_APP_TYPE: 'app' }, /^GITHUB_APP_TYPE must be one of oauth-app, github-app/);
  });

  it('names the broken field of a provider file in one line', () => {
    const file = join(dir, 'bad.json');
    writeFileSync(
      file,
      JSON.stringify({ providers: [{ id: 'acme', displayName: 'Acme', kind: 'oidc', identity: { source: 'id_token' } }] }),
    );
    refuses({ ...base(), PROVIDERS_FILE: file }, /^PROVIDERS_FILE providers\[0\]\.issuer: an oidc provider needs an issuer$/);
    writeFileSync(file, '{ not json');
    refuses({ ...base(), PROVIDERS_FILE: file }, /^PROVIDERS_FILE is not valid JSON/);
    refuses({ ...base(), PROVIDERS_FILE: join(dir, 'missing.yaml') }, /^PROVIDERS_FILE cannot be read/);
  });

  it('refuses a definition missing a field its kind requires, naming that field', () => {
    const file = join(dir, 'kinds.json');
    const identity = { source: 'token_response', idField: 'user.id', loginField: 'user.name' };
    const oauth2 = {
      id: 'acme',
      displayName: 'Acme',
      kind: 'oauth2',
      authorizationEndpoint: 'https://acme.test/authorize',
      tokenEndpoint: 'https://acme.test/token',
      identity,
    };
    const { authorizationEndpoint: _a, ...noAuthorization } = oauth2;
    writeFileSync(file, JSON.stringify([noAuthorization]));
    refuses(
      { ...base(), PROVIDERS_FILE: file },
      /^PROVIDERS_FILE providers\[0\]\.authorizationEndpoint: an oauth2 provider needs an authorizationEndpoint$/,
    );
    const { tokenEndpoint: _t, ...noToken } = oauth2;
    writeFileSync(file, JSON.stringify([noToken]));
    refuses(
      { ...base(), PROVIDERS_FILE: file },
      /^PROVIDERS_FILE providers\[0\]\.tokenEndpoint: an oauth2 provider needs a tokenEndpoint$/,
    );
    // An issuer is not an oauth2 provider's endpoints, nor endpoints an oidc provider's issuer.
    writeFileSync(file, JSON.stringify([{ ...noToken, authorizationEndpoint: undefined, issuer: 'https://acme.test' }]));
    refuses(
      { ...base(), PROVIDERS_FILE: file },
      /^PROVIDERS_FILE providers\[0\]\.authorizationEndpoint: an oauth2 provider needs an authorizationEndpoint$/,
    );
    writeFileSync(file, JSON.stringify([{ ...oauth2, kind: 'oidc' }]));
    refuses({ ...base(), PROVIDERS_FILE: file }, /^PROVIDERS_FILE providers\[0\]\.issuer: an oidc provider needs an issuer$/);
    writeFileSync(file, JSON.stringify([{ ...oauth2, kind: 'saml' }]));
    refuses({ ...base(), PROVIDERS_FILE: file }, /^PROVIDERS_FILE providers\[0\]\.kind: Invalid option: expected one of "oauth2"\|"oidc"$/);
  });

  it('types each kind with the fields it always has, so no code asserts them present', () => {
    const github = loadConfig(base()).providers[0]!.definition;
    assert.equal(github.kind, 'oauth2');
    if (github.kind !== 'oauth2') return;
    // Compiles only while the union narrows: an optional field would be `string | undefined` here.
    const endpoints: [string, string] = [github.authorizationEndpoint, github.tokenEndpoint];
    assert.deepEqual(
      endpoints.map((e) => new URL(e).pathname),
      ['/login/oauth/authorize', '/login/oauth/access_token'],
    );
  });

  it('requires credentials from the environment for a provider declared in the file', () => {
    const file = join(dir, 'acme.json');
    writeFileSync(
      file,
      JSON.stringify([
        {
          id: 'acme-cloud',
          displayName: 'Acme',
          kind: 'oauth2',
          authorizationEndpoint: 'https://acme.test/authorize',
          tokenEndpoint: 'https://acme.test/token',
          identity: { source: 'token_response', idField: 'user.id', loginField: 'user.name' },
        },
      ]),
    );
    refuses(
      { ...base(), PROVIDERS_FILE: file },
      /^ACME_CLOUD_CLIENT_ID and ACME_CLOUD_CLIENT_SECRET are required for provider "acme-cloud"/,
    );
    const ok = loadConfig({ ...base(), PROVIDERS_FILE: file, ACME_CLOUD_CLIENT_ID: 'a', ACME_CLOUD_CLIENT_SECRET: 'b' });
    assert.deepEqual(
      ok.providers.map((p) => p.definition.id),
      ['github', 'acme-cloud'],
    );
  });

  it('refuses a <ID>_SCOPES value naming a scope the provider does not list', () => {
    refuses({ ...base(), GITHUB_SCOPES: 'repo admin:everything' }, /^GITHUB_SCOPES names "admin:everything"/);
  });
});

describe('disconnect when the provider cannot revoke', () => {
  const stack = useStack();

  it('reports the failed revocation, still deletes the stored tokens, and audits a local-only delete', async () => {
    await seedGitHubConnection(stack, 'walt', 'octocat');
    const client = await clientAs(stack, 'walt', {
      onForm: async () => ({ action: 'accept', content: { confirm: true } }),
    });
    stack.github.faults = { api: 500 };
    let result;
    try {
      result = await client.callTool({ name: 'disconnect_account', arguments: { provider: 'github' } });
    } finally {
      stack.github.faults = {};
      await client.close();
    }
    assert.equal(result.isError, undefined);
    const structured = result.structuredContent as { status: string; revoked: boolean; revokeError?: string };
    assert.equal(structured.status, 'disconnected');
    assert.equal(structured.revoked, false);
    assert.match(structured.revokeError ?? '', /did not confirm the revocation \(HTTP 500\)/);
    assert.match(resultText(result), /Deleted the stored GitHub tokens for @octocat, but GitHub could not confirm the revocation/);
    assert.equal(await readConnection(stack.env, 'walt', 'github'), undefined);
    assert.equal(stack.github.activeTokenCount('octocat') > 0, true, 'GitHub still holds the grant, as reported');
    const audit = await stack.broker.broker.store.audit.list({ subject: 'walt', event: 'connection_revoked' });
    assert.equal(audit.length, 1);
    assert.match(audit[0]!.detail ?? '', /^local delete only/);
  });
});
