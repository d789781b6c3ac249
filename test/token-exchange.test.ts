import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { randomUUID } from 'node:crypto';
import { sha256Hex } from '../src/crypto/index.js';
import { Browser, textOf } from './support/browser.js';
import { revokeGrantUpstream, seedExpired } from './support/expiring-tokens.js';
import { readConnection, seedGitHubConnection } from './support/seed.js';
import { completeConnect, heldCalls, signIn, startStack, type Stack } from './support/stack.js';
import { secretBasicServiceLines, writeYamlLines } from './support/config-file.js';
import { JWT_IN_CLEAR } from './support/token-checks.js';
import { eventually } from './support/eventually.js';

const BOT = { id: 'issue-bot', secret: 'issue-bot-secret-for-tests-0123', audience: 'https://bot.example.com/mcp' };
const TRACKER = { id: 'tracker-bot', audience: 'https://tracker-bot.example.com/mcp' };
const GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const AT = 'urn:ietf:params:oauth:token-type:access_token';
const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/** Every response body the tests saw: none may hold a refresh token. */
const bodies: string[] = [];

interface Answer {
  status: number;
  json: Record<string, unknown>;
  headers: Headers;
}

async function startJwks(): Promise<{ url: string; key: CryptoKey; otherKey: CryptoKey; close(): Promise<void> }> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const other = await generateKeyPair('ES256');
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid: 'tracker-1', alg: 'ES256', use: 'sig' };
  const server: Server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`,
    key: privateKey,
    otherKey: other.privateKey,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

describe('token exchange (RFC 8693) at POST /oauth/token', () => {
  let stack: Stack;
  let jwks: Awaited<ReturnType<typeof startJwks>>;
  let dir: string;
  let tokenUrl: string;

  before(async () => {
    jwks = await startJwks();
    dir = mkdtempSync(join(tmpdir(), 'exchange-test-'));
    const file = writeYamlLines(join(dir, 'services.yaml'), [
      'services:',
      `  - id: ${BOT.id}`,
      '    displayName: Issue Bot',
      `    audiences: [${BOT.audience}]`,
      '    auth: client_secret_basic',
      '    allow: { github: [public_repo, repo] }',
      `  - id: ${TRACKER.id}`,
      `    audiences: [${TRACKER.audience}]`,
      '    auth: private_key_jwt',
      `    jwksUri: ${jwks.url}`,
      '    allow: { github: [public_repo] }',
    ]);
    // GitLab is configured (a provider of this broker) but in no service's allow.
    stack = await startStack({
      env: { PROVIDERS_FILE: file, SERVICE_ISSUE_BOT_SECRET: BOT.secret, GITLAB_CLIENT_ID: 'gl-id', GITLAB_CLIENT_SECRET: 'gl-secret' },
      holdSeconds: 2,
    });
    tokenUrl = `${stack.publicUrl}/oauth/token`;
  });
  after(async () => {
    await stack.close();
    await jwks.close();
    rmSync(dir, { recursive: true, force: true });
    for (const body of bodies) assert.doesNotMatch(body, /refresh_token|ghr_/, 'no response ever carries a refresh token');
  });

  const basic = (id = BOT.id, secret = BOT.secret) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

  async function post(form: Record<string, string>, headers: Record<string, string> = { authorization: basic() }): Promise<Answer> {
    const res = await fetch(tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams(form).toString(),
    });
    const text = await res.text();
    bodies.push(text);
    return { status: res.status, json: JSON.parse(text) as Record<string, unknown>, headers: res.headers };
  }

  async function exchange(sub: string, extra: Record<string, string> = {}, headers?: Record<string, string>): Promise<Answer> {
    return post(
      {
        grant_type: GRANT,
        subject_token: await stack.token(sub, { aud: BOT.audience }),
        subject_token_type: AT,
        audience: 'github',
        ...extra,
      },
      headers,
    );
  }

  async function assertion(
    claims: { aud?: string; exp?: number; jti?: string; iss?: string; key?: CryptoKey; typ?: string } = {},
  ): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: 'tracker-1', ...(claims.typ !== undefined ? { typ: claims.typ } : {}) })
      .setIssuer(claims.iss ?? TRACKER.id)
      .setSubject(claims.iss ?? TRACKER.id)
      .setAudience(claims.aud ?? tokenUrl)
      .setIssuedAt(now)
      .setExpirationTime(claims.exp ?? now + 60)
      .setJti(claims.jti ?? randomUUID())
      .sign(claims.key ?? jwks.key);
  }

  async function trackerExchange(sub: string, clientAssertion: string, extra: Record<string, string> = {}): Promise<Answer> {
    return post(
      {
        grant_type: GRANT,
        subject_token: await stack.token(sub, { aud: TRACKER.audience }),
        subject_token_type: AT,
        audience: 'github',
        client_assertion_type: JWT_BEARER,
        client_assertion: clientAssertion,
        ...extra,
      },
      {},
    );
  }

  /** Whether the broker logged a failed client authentication whose reason matches `reason`. */
  const failureLogged = (reason: RegExp): boolean =>
    stack.logs.some((l) => l.includes('"event":"client_authentication_failed"') && reason.test(l));

  async function seedGitHub(sub: string, login: string, scopes: string[]): Promise<string> {
    return (await seedGitHubConnection(stack, sub, login, scopes)).accessToken;
  }

  it('serves RFC 8414 metadata naming the token endpoint, the grant and both auth methods', async () => {
    const res = await fetch(`${stack.publicUrl}/.well-known/oauth-authorization-server`);
    const meta = (await res.json()) as Record<string, unknown>;
    assert.equal(meta.issuer, new URL(stack.publicUrl).origin);
    assert.equal(meta.token_endpoint, tokenUrl);
    assert.deepEqual(meta.grant_types_supported, [GRANT]);
    assert.deepEqual(meta.token_endpoint_auth_methods_supported, ['client_secret_basic', 'private_key_jwt']);
    assert.ok(Array.isArray(meta.token_endpoint_auth_signing_alg_values_supported));
  });

  it('connected: 200 with the stand-in token, no-store, never a refresh token, audited and recorded as usage', async () => {
    const token = await seedGitHub('alice', 'octocat', ['repo']);
    const r = await exchange('alice', { scope: 'public_repo' });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.access_token, token);
    assert.equal(r.json.issued_token_type, AT);
    assert.equal(r.json.token_type, 'Bearer');
    assert.equal(r.json.scope, 'repo');
    assert.equal(r.json.refresh_token, undefined);
    assert.equal(r.json.account_login, 'octocat', 'the non-secret extra member naming the account');
    assert.equal(r.headers.get('cache-control'), 'no-store');
    assert.equal(r.headers.get('pragma'), 'no-cache');
    const owner = { issuer: stack.idp.issuer, subject: 'alice' };
    const audit = await stack.broker.broker.store.audit.list({ subject: 'alice', event: 'token_exchanged' });
    assert.equal(audit.length, 1);
    assert.match(audit[0]!.detail!, /service=issue-bot scopes=repo/);
    const trail = JSON.stringify(await stack.broker.broker.store.audit.list());
    assert.doesNotMatch(trail, /gh[uopr]_/, 'no GitHub token in the audit trail');
    assert.doesNotMatch(trail, JWT_IN_CLEAR, 'no JWT in the audit trail');
    const usage = await stack.broker.broker.store.serviceUsage.list(owner);
    assert.deepEqual(
      usage.map((u) => [u.provider, u.service_id]),
      [['github', 'issue-bot']],
    );
  });

  it('marks a service’s usage once a minute, not on every exchange, while each exchange is still audited', async () => {
    await seedGitHub('ulla', 'ulla-gh', ['repo']);
    const usage = stack.broker.broker.store.serviceUsage;
    const touch = usage.touch.bind(usage);
    let touches = 0;
    usage.touch = (...args) => {
      touches++;
      return touch(...args);
    };
    try {
      for (let i = 0; i < 3; i++) assert.equal((await exchange('ulla')).status, 200);
    } finally {
      usage.touch = touch;
    }
    assert.equal(touches, 1, 'one usage write for three exchanges in a minute');
    assert.equal((await stack.broker.broker.store.audit.list({ subject: 'ulla', event: 'token_exchanged' })).length, 3);
    const rows = await usage.list({ issuer: stack.idp.issuer, subject: 'ulla' });
    assert.deepEqual(
      rows.map((u) => [u.provider, u.service_id]),
      [['github', 'issue-bot']],
    );
  });

  it('accepts resource=<the GitHub API base URL> as the target', async () => {
    const r = await exchange('alice', { audience: '', resource: stack.github.apiUrl }).catch(() => undefined);
    // audience= empty names no provider: refused; resource alone works.
    assert.equal(r?.status, 400);
    const ok = await post({
      grant_type: GRANT,
      subject_token: await stack.token('alice', { aud: BOT.audience }),
      subject_token_type: AT,
      resource: stack.github.apiUrl,
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
  });

  it('refuses a subject token issued for another service (invalid_grant)', async () => {
    const r = await post({
      grant_type: GRANT,
      subject_token: await stack.token('alice', { aud: TRACKER.audience }),
      subject_token_type: AT,
      audience: 'github',
    });
    assert.equal(r.status, 400);
    assert.equal(r.json.error, 'invalid_grant');
  });

  it("refuses a subject token for the broker's own /mcp (invalid_grant)", async () => {
    const r = await post({ grant_type: GRANT, subject_token: await stack.token('alice'), subject_token_type: AT, audience: 'github' });
    assert.equal(r.status, 400);
    assert.equal(r.json.error, 'invalid_grant');
  });

  it('refuses an expired or ID-token subject token (invalid_grant)', async () => {
    const expired = await stack.token('alice', { aud: BOT.audience, expiresInSeconds: -60 });
    const r = await post({ grant_type: GRANT, subject_token: expired, subject_token_type: AT, audience: 'github' });
    assert.equal(r.json.error, 'invalid_grant');
    const idToken = await stack.idp.mintAccessToken({ sub: 'alice', aud: BOT.audience, nonce: 'n' });
    const r2 = await post({ grant_type: GRANT, subject_token: idToken, subject_token_type: AT, audience: 'github' });
    assert.equal(r2.json.error, 'invalid_grant');
  });

  it('refuses a service asking beyond its allow (invalid_scope) or for a provider it may not use (invalid_target)', async () => {
    const scope = await trackerExchange('alice', await assertion(), { scope: 'repo' });
    assert.equal(scope.status, 400);
    assert.equal(scope.json.error, 'invalid_scope');
    const unknown = await exchange('alice', { audience: 'gitlab' });
    assert.equal(unknown.json.error, 'invalid_target');
    assert.match(String(unknown.json.error_description), /may not obtain tokens for gitlab/);
    const none = await exchange('alice', { audience: 'nowhere' });
    assert.equal(none.json.error, 'invalid_target');
  });

  it('refuses a wrong secret with 401 invalid_client and a Basic challenge', async () => {
    const r = await exchange('alice', {}, { authorization: basic(BOT.id, 'wrong-secret-wrong-secret') });
    assert.equal(r.status, 401);
    assert.equal(r.json.error, 'invalid_client');
    assert.match(r.headers.get('www-authenticate') ?? '', /^Basic realm=/);
    const unknown = await exchange('alice', {}, { authorization: basic('nobody', BOT.secret) });
    assert.equal(unknown.status, 401);
    const none = await exchange('alice', {}, {});
    assert.equal(none.status, 401);
    assert.equal(none.json.error, 'invalid_client');
  });

  it('refuses a service authenticating with another method than its own (invalid_client)', async () => {
    const r = await exchange('alice', {}, { authorization: basic(TRACKER.id, BOT.secret) });
    assert.equal(r.status, 401);
    assert.equal(r.json.error, 'invalid_client');
  });

  it('keeps a used jti past the last instant its assertion could still be accepted, so a late replay finds it', async () => {
    await seedGitHub('tara', 'octocat', ['public_repo']);
    const exp = Math.floor(Date.now() / 1000) + 60;
    const jti = randomUUID();
    const ok = await trackerExchange('tara', await assertion({ exp, jti }), { scope: 'public_repo' });
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
    // A replay jose accepted just before exp + its 5 s leeway, stored a moment after that.
    const lateReplay = await stack.broker.broker.store.clientAssertions.use(sha256Hex(`${TRACKER.id}\n${jti}`), 0, (exp + 5) * 1000 + 1);
    assert.equal(lateReplay, false, 'the row still guards the jti');
  });

  it('private_key_jwt: a valid assertion works; a wrong signature, an expired, an over-long or a reused one is invalid_client', async () => {
    await seedGitHub('tess', 'octocat', ['public_repo']);
    const good = await assertion();
    const ok = await trackerExchange('tess', good, { scope: 'public_repo' });
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
    const reused = await trackerExchange('tess', good);
    assert.equal(reused.status, 401);
    assert.equal(reused.json.error, 'invalid_client');
    assert.ok(failureLogged(/already used/), 'the reason is in the log');
    const forged = await trackerExchange('tess', await assertion({ key: jwks.otherKey }));
    assert.equal(forged.status, 401);
    assert.equal(forged.json.error, 'invalid_client');
    const expired = await trackerExchange('tess', await assertion({ exp: Math.floor(Date.now() / 1000) - 60 }));
    assert.equal(expired.status, 401);
    assert.ok(failureLogged(/expired/), 'the reason is in the log');
    const long = await trackerExchange('tess', await assertion({ exp: Math.floor(Date.now() / 1000) + 3600 }));
    assert.equal(long.status, 401);
    const wrongAud = await trackerExchange('tess', await assertion({ aud: 'https://elsewhere.example.com/token' }));
    assert.equal(wrongAud.status, 401);
    const issuerAud = await trackerExchange('tess', await assertion({ aud: new URL(stack.publicUrl).origin }));
    assert.equal(issuerAud.status, 200, 'the issuer identifier is an accepted aud');
    const mismatch = await trackerExchange('tess', await assertion(), { client_id: BOT.id });
    assert.equal(mismatch.status, 401);
  });

  it('answers every failed authentication of a named client with one text, so nobody learns which services exist or how they authenticate', async () => {
    const texts = new Map<string, string>();
    const refusals: Array<[string, Answer]> = [
      ['an unknown id (Basic)', await exchange('alice', {}, { authorization: basic('nobody', BOT.secret) })],
      ['a wrong secret', await exchange('alice', {}, { authorization: basic(BOT.id, 'wrong-secret-wrong-secret') })],
      ['Basic for a private_key_jwt service', await exchange('alice', {}, { authorization: basic(TRACKER.id, BOT.secret) })],
      ['an assertion for an unknown id', await trackerExchange('tess', await assertion({ iss: 'nobody' }))],
      ['an assertion for a client_secret_basic service', await trackerExchange('tess', await assertion({ iss: BOT.id }))],
      ['an assertion with a wrong signature', await trackerExchange('tess', await assertion({ key: jwks.otherKey }))],
      ['an expired assertion', await trackerExchange('tess', await assertion({ exp: Math.floor(Date.now() / 1000) - 60 }))],
      ['a client_id naming another client', await trackerExchange('tess', await assertion(), { client_id: BOT.id })],
    ];
    for (const [label, r] of refusals) {
      assert.equal(r.status, 401, label);
      assert.equal(r.json.error, 'invalid_client', label);
      texts.set(label, String(r.json.error_description));
    }
    assert.equal(new Set(texts.values()).size, 1, JSON.stringify(Object.fromEntries(texts)));
    const [text] = texts.values();
    for (const word of [BOT.id, TRACKER.id, 'client_secret_basic', 'private_key_jwt', 'unknown', 'registered for'])
      assert.ok(!text!.includes(word), `the one text names no service or method: ${text}`);
    for (const reason of [/unknown client id/, /wrong client secret/, /registered for private_key_jwt, sent client_secret_basic/])
      assert.ok(failureLogged(reason), `the log says why: ${reason}`);
  });

  it("takes a client assertion's typ only where RFC 10070 lets it be: absent, JWT or client-authentication+jwt, nothing else", async () => {
    await seedGitHub('tyra', 'octocat', ['public_repo']);
    for (const typ of [undefined, 'JWT', 'client-authentication+jwt', 'application/client-authentication+jwt']) {
      const r = await trackerExchange('tyra', await assertion({ ...(typ !== undefined ? { typ } : {}) }), { scope: 'public_repo' });
      assert.equal(r.status, 200, `typ ${String(typ)}: ${JSON.stringify(r.json)}`);
    }
    for (const typ of ['at+jwt', 'dpop+jwt', 'oauth-authz-req+jwt', 'JOSE', 'secevent+jwt']) {
      const r = await trackerExchange('tyra', await assertion({ typ }), { scope: 'public_repo' });
      assert.equal(r.status, 401, `typ ${typ}`);
      assert.equal(r.json.error, 'invalid_client', `typ ${typ}`);
    }
    assert.ok(failureLogged(/typ is \\"at\+jwt\\"/), 'the log names the refused typ');
  });

  it('refuses actor_token and subject tokens carrying act or may_act with invalid_request, never serving them as the user’s own token', async () => {
    await seedGitHub('amos', 'octocat', ['public_repo']);
    const ok = await exchange('amos', { scope: 'public_repo' });
    assert.equal(ok.status, 200, 'the same user, without delegation, is served');
    const actor = await stack.token('bot-operator', { aud: BOT.audience });
    const asks: Array<Record<string, string>> = [
      { actor_token: actor, actor_token_type: AT },
      { actor_token: actor },
      { actor_token_type: AT },
    ];
    for (const extra of asks) {
      const r = await exchange('amos', { scope: 'public_repo', ...extra });
      assert.equal(r.status, 400, Object.keys(extra).join(' and '));
      assert.equal(r.json.error, 'invalid_request');
      assert.equal(r.json.access_token, undefined);
      assert.match(String(r.json.error_description), /actor_token is not supported/);
    }
    for (const claims of [{ act: { sub: 'bot-operator' } }, { may_act: { sub: BOT.id } }]) {
      const subjectToken = await stack.idp.mintAccessToken({ sub: 'amos', aud: BOT.audience, claims });
      const r = await post({
        grant_type: GRANT,
        subject_token: subjectToken,
        subject_token_type: AT,
        audience: 'github',
        scope: 'public_repo',
      });
      const [claim] = Object.keys(claims);
      assert.equal(r.status, 400, claim);
      assert.equal(r.json.error, 'invalid_request', claim);
      assert.equal(r.json.access_token, undefined, claim);
      assert.match(String(r.json.error_description), new RegExp(`carries ${claim}`));
    }
  });

  it('refuses other content types, duplicate parameters and other grants with the RFC codes, never a 5xx', async () => {
    const json = await fetch(tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: basic() },
      body: '{}',
    });
    assert.equal(json.status, 400);
    assert.equal(((await json.json()) as { error: string }).error, 'invalid_request');
    const dup = await fetch(tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic() },
      body: `grant_type=${encodeURIComponent(GRANT)}&subject_token=${await stack.token('alice', { aud: BOT.audience })}&subject_token_type=${encodeURIComponent(AT)}&audience=github&audience=github`,
    });
    assert.equal(dup.status, 400);
    assert.equal(((await dup.json()) as { error: string }).error, 'invalid_request');
    const grant = await post({ grant_type: 'client_credentials' });
    assert.equal(grant.json.error, 'unsupported_grant_type');
    const badWait = await exchange('alice', { wait: '51' });
    assert.equal(badWait.json.error, 'invalid_request');
    const badType = await exchange('alice', { subject_token_type: 'urn:ietf:params:oauth:token-type:id_token' });
    assert.equal(badType.json.error, 'invalid_request');
  });

  it('not connected: interaction_required with a link, the user connects in the browser, the held repeat answers 200', async () => {
    const first = await exchange('bob', { scope: 'public_repo' });
    assert.equal(first.status, 400);
    assert.equal(first.json.error, 'interaction_required');
    assert.equal(first.json.reason, 'not_connected');
    assert.deepEqual(first.json.missing_scopes, ['repo', 'public_repo']);
    const link = String(first.json.connect_uri);
    assert.ok(link.startsWith(`${stack.publicUrl}/connect/github?req=`));
    const connectRequest = String(first.json.connect_request);
    const row = (await stack.broker.broker.store.pending.byId(connectRequest.split('.')[0]!))!;
    assert.equal(row.service_id, BOT.id);
    // The link's short form for another device, under RFC 8628's names: the row's own code.
    assert.equal(first.json.verification_uri, `${stack.publicUrl}/activate`);
    assert.match(String(first.json.user_code), /^[2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4}$/);
    assert.equal(first.json.user_code, stack.broker.broker.toolDeps.links.activationCode(row));

    // While unopened, the repeat answers with the same link and the same code.
    const again = await exchange('bob', { scope: 'public_repo', connect_request: connectRequest });
    assert.equal(again.json.connect_uri, link);
    assert.equal(again.json.user_code, first.json.user_code);

    // The held repeat is released when the callback lands.
    const held = exchange('bob', { scope: 'public_repo', connect_request: connectRequest, wait: '20' });
    await new Promise((r) => setTimeout(r, 200));
    const browser = new Browser();
    const page = await completeConnect(browser, link, 'bob');
    assert.equal(page.status, 200);
    const done = await held;
    assert.equal(done.status, 200, JSON.stringify(done.json));
    assert.match(String(done.json.access_token), /^gh/);
    // Settled: the owner presenting it again gets the outcome.
    const settled = await exchange('bob', { scope: 'public_repo', connect_request: connectRequest });
    assert.equal(settled.status, 200);
  });

  it('a held exchange whose service goes away stops waiting at once, and its answer is never sent', async () => {
    const first = await exchange('dora', { scope: 'public_repo' });
    assert.equal(first.json.error, 'interaction_required');
    const watcher = stack.broker.broker.watcher;
    const before = watcher.waiting;
    const leave = new AbortController();
    const held = fetch(tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic() },
      body: new URLSearchParams({
        grant_type: GRANT,
        subject_token: await stack.token('dora', { aud: BOT.audience }),
        subject_token_type: AT,
        audience: 'github',
        scope: 'public_repo',
        connect_request: String(first.json.connect_request),
        wait: '20',
      }).toString(),
      signal: leave.signal,
    });
    await eventually('the exchange is held', () => watcher.waiting === before + 1);
    leave.abort();
    await assert.rejects(held, { name: 'AbortError' });
    await eventually('the hold to end with its client', () => watcher.waiting === before, { timeoutMs: 2_000 });
  });

  it('a connect_request replayed by another user or another service is invalid_grant', async () => {
    const first = await exchange('carol');
    assert.equal(first.json.error, 'interaction_required');
    const connectRequest = String(first.json.connect_request);
    const otherUser = await exchange('mallory', { connect_request: connectRequest });
    assert.equal(otherUser.status, 400);
    assert.equal(otherUser.json.error, 'invalid_grant');
    const otherService = await trackerExchange('carol', await assertion(), { connect_request: connectRequest });
    assert.equal(otherService.status, 400);
    assert.equal(otherService.json.error, 'invalid_grant');
    const forged = await exchange('carol', { connect_request: `${connectRequest.split('.')[0]}.AAAA` });
    assert.equal(forged.json.error, 'invalid_grant');
  });

  it('the link completed by another signed-in user is refused (403) and nothing is issued', async () => {
    const first = await exchange('dave');
    const link = String(first.json.connect_uri);
    const browser = new Browser();
    await signIn(browser, stack, 'eve');
    const page = await browser.open(link);
    assert.equal(page.status, 403);
    assert.equal(await readConnection(stack.env, 'eve', 'github'), undefined);
    assert.equal(await readConnection(stack.env, 'dave', 'github'), undefined);
    const repeat = await exchange('dave', { connect_request: String(first.json.connect_request) });
    assert.equal(repeat.json.error, 'interaction_required');
  });

  it('a cancelled link answers access_denied with reason cancelled', async () => {
    const first = await exchange('fran');
    const browser = new Browser();
    await completeConnect(browser, String(first.json.connect_uri), 'fran', { consent: 'cancel' });
    const r = await exchange('fran', { connect_request: String(first.json.connect_request), wait: '5' });
    assert.equal(r.status, 400);
    assert.equal(r.json.error, 'access_denied');
    assert.equal(r.json.reason, 'cancelled');
  });

  it('the consent page names the asking service; /connections shows which services used the connection', async () => {
    const first = await exchange('hank');
    const browser = new Browser();
    await signIn(browser, stack, 'hank');
    const consent = await browser.open(String(first.json.connect_uri));
    assert.match(consent.html, /The service <strong><bdi>Issue Bot<\/bdi><\/strong>/);
    // The token is handed to that service: the page says so, and that the assistant never gets it.
    assert.match(
      textOf(consent.html),
      /The access token is kept on this server and handed to Issue Bot whenever it acts for you: that service receives it, your AI assistant never does\./,
    );
    assert.doesNotMatch(textOf(consent.html), /stays on this server/);
    const alice = new Browser();
    await signIn(alice, stack, 'alice');
    const page = await alice.open(`${stack.publicUrl}/connections`);
    assert.match(page.html, /Used by services/);
    assert.match(page.html, /<bdi>Issue Bot<\/bdi>, last/);
  });

  it("Disconnect on /connections asks first; confirmed, it revokes and takes the services' usage along, so a reconnect (another GitHub login) shows none", async () => {
    await seedGitHub('ivy', 'ivy-gh', ['repo']);
    assert.equal((await exchange('ivy')).status, 200);
    const browser = new Browser();
    const list = await signIn(browser, stack, 'ivy');
    assert.match(list.html, /<bdi>Issue Bot<\/bdi>, last/);
    // The card links to a confirmation; it holds no form that would disconnect in one click.
    assert.match(list.html, /<a class="button secondary" href="\/connections\/github\/disconnect">Disconnect/);
    assert.doesNotMatch(list.html, /action="\/connections\/github\/disconnect"/);
    const revokedBefore = stack.github.revokedGrants.length;

    const confirm = await browser.open(`${stack.publicUrl}/connections/github/disconnect`);
    assert.equal(confirm.status, 200);
    const said = textOf(confirm.html);
    assert.match(said, /Disconnect GitHub @ivy-gh \?/);
    assert.match(said, /asks GitHub to revoke the access you granted/);
    assert.match(said, /neither can Issue Bot , which used it/);
    assert.equal(stack.github.revokedGrants.length, revokedBefore, 'showing the question changes nothing');
    // A POST without the confirmation (an old one-click form) only shows the question.
    const unconfirmed = await browser.submit(confirm, { match: /\/connections\/github\/disconnect$/, fields: { confirm: '' } });
    assert.equal(unconfirmed.url, `${stack.publicUrl}/connections/github/disconnect`);
    assert.ok(await readConnection(stack.env, 'ivy', 'github'), 'still connected');
    assert.equal(stack.github.revokedGrants.length, revokedBefore);

    const done = await browser.submit(confirm, { button: 'yes' });
    assert.match(textOf(done.html), /GitHub disconnected Your GitHub account is disconnected and the access was revoked at GitHub\./);
    assert.equal(stack.github.revokedGrants.length, revokedBefore + 1);

    // Reconnected through the page as another GitHub login: no service use from before it existed.
    const empty = await browser.open(`${stack.publicUrl}/connections`);
    assert.match(textOf(empty.html), /No accounts are connected right now\. Connect an account/);
    const consent = await browser.submit(empty, { match: /\/connections\/github\/connect$/ });
    const connected = await completeConnect(browser, consent.url, 'ivy', { githubLogin: 'ivy-second' });
    assert.equal(connected.status, 200, textOf(connected.html));
    const after = await browser.open(`${stack.publicUrl}/connections`);
    assert.match(textOf(after.html), /GitHub @ivy-second/);
    assert.doesNotMatch(after.html, /Used by services|Issue Bot/);
  });

  it('sits behind the Host guard: a foreign Host gets 403 and no exchange', async () => {
    const { request } = await import('node:http');
    const url = new URL(tokenUrl);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          headers: { host: 'evil.example.com', 'content-type': 'application/x-www-form-urlencoded', authorization: basic() },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(`grant_type=${encodeURIComponent(GRANT)}`);
    });
    assert.equal(status, 403);
  });

  it('insufficient_scope names only the missing scopes; a reauth_required connection is never handed out', async () => {
    await seedGitHub('gina', 'octocat', ['read:user']);
    const more = await exchange('gina', { scope: 'public_repo' });
    assert.equal(more.json.error, 'interaction_required');
    assert.equal(more.json.reason, 'insufficient_scope');
    assert.deepEqual(more.json.missing_scopes, ['public_repo']);
    await stack.broker.broker.store.connections.markReauthRequired({ issuer: stack.idp.issuer, subject: 'gina' }, 'github', 'api_401');
    const reauth = await exchange('gina');
    assert.equal(reauth.json.error, 'interaction_required');
    assert.equal(reauth.json.reason, 'reauth_required');
    assert.equal(reauth.json.access_token, undefined);
  });
});

describe('token exchange with expiring GitHub App tokens: refresh, reauth_required, rate limit', () => {
  let stack: Stack;
  let dir: string;
  const basic = `Basic ${Buffer.from(`${BOT.id}:${BOT.secret}`).toString('base64')}`;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'exchange-app-test-'));
    const file = join(dir, 'services.json');
    writeFileSync(
      file,
      JSON.stringify({ services: [{ id: BOT.id, audiences: [BOT.audience], auth: 'client_secret_basic', allow: { github: [] } }] }),
    );
    stack = await startStack({
      standIn: { kind: 'github-app', accessTokenTtlSeconds: 3600 },
      env: {
        GITHUB_APP_TYPE: 'github-app',
        PROVIDERS_FILE: file,
        SERVICE_ISSUE_BOT_SECRET: BOT.secret,
        SERVICE_RATE_LIMIT_PER_MINUTE: '6',
        RATE_LIMIT_PER_MINUTE: '4',
      },
    });
  });
  after(async () => {
    await stack.close();
    rmSync(dir, { recursive: true, force: true });
    for (const body of bodies) assert.doesNotMatch(body, /refresh_token|ghr_/, 'no response ever carries a refresh token');
  });

  async function exchange(sub: string): Promise<Answer> {
    const res = await fetch(`${stack.publicUrl}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic },
      body: new URLSearchParams({
        grant_type: GRANT,
        subject_token: await stack.token(sub, { aud: BOT.audience }),
        subject_token_type: AT,
        audience: 'github',
      }).toString(),
    });
    const text = await res.text();
    bodies.push(text);
    return { status: res.status, json: JSON.parse(text) as Record<string, unknown>, headers: res.headers };
  }

  it('refreshes a token near expiry first (once) and answers with the new one and its expires_in', async () => {
    await seedExpired(stack.env, stack.github, 'ivy', 'octocat');
    const before = stack.github.refreshCount;
    const r = await exchange('ivy');
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(stack.github.refreshCount, before + 1);
    assert.ok(typeof r.json.expires_in === 'number' && r.json.expires_in > 3000, `expires_in ${String(r.json.expires_in)}`);
    const again = await exchange('ivy');
    assert.equal(again.json.access_token, r.json.access_token, 'no second refresh for a fresh token');
    assert.equal(stack.github.refreshCount, before + 1);
  });

  it('a refresh GitHub refuses is never handed out: interaction_required, reason reauth_required', async () => {
    await seedExpired(stack.env, stack.github, 'jack', 'hubot');
    await revokeGrantUpstream(stack.github, 'hubot');
    const r = await exchange('jack');
    assert.equal(r.status, 400);
    assert.equal(r.json.error, 'interaction_required');
    assert.equal(r.json.reason, 'reauth_required');
    assert.equal(r.json.access_token, undefined);
  });

  it('limits each service to SERVICE_RATE_LIMIT_PER_MINUTE exchanges a minute: 429 with Retry-After', async () => {
    let limited: Answer | undefined;
    for (let i = 0; i < 8 && !limited; i++) {
      const r = await exchange('ivy');
      if (r.status === 429) limited = r;
    }
    assert.ok(limited, 'a 429 within the budget plus two');
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    assert.equal(typeof limited.json.error, 'string');
  });

  it('bounds failed client authentications per client address (RATE_LIMIT_PER_MINUTE): 429 with Retry-After once they are spent', async () => {
    const wrong = `Basic ${Buffer.from(`${BOT.id}:not-the-secret-at-all`).toString('base64')}`;
    const attempt = () =>
      fetch(`${stack.publicUrl}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: wrong },
        body: new URLSearchParams({ grant_type: GRANT, subject_token: 'x', subject_token_type: AT, audience: 'github' }).toString(),
      });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await attempt()).status);
    assert.deepEqual(statuses, [401, 401, 401, 401, 429], 'four guesses, then refused before authentication');
    const limited = await attempt();
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    assert.equal(((await limited.json()) as { error: string }).error, 'rate_limited');
  });
});

describe('the failed-client-authentication limit at /oauth/token: per declared service and address', () => {
  const OTHER = { id: 'other-bot', secret: 'other-bot-secret-for-tests-0123', audience: 'https://other-bot.example.com/mcp' };
  const LIMIT = 4;
  let stack: Stack;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'exchange-limit-test-'));
    const file = writeYamlLines(join(dir, 'services.yaml'), [
      'services:',
      ...secretBasicServiceLines({ ...BOT, allow: { github: ['public_repo'] } }),
      ...secretBasicServiceLines({ ...OTHER, allow: { github: ['public_repo'] } }),
    ]);
    stack = await startStack({
      env: {
        PROVIDERS_FILE: file,
        SERVICE_ISSUE_BOT_SECRET: BOT.secret,
        SERVICE_OTHER_BOT_SECRET: OTHER.secret,
        RATE_LIMIT_PER_MINUTE: String(LIMIT),
      },
    });
  });
  after(async () => {
    await stack.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** An exchange for `sub` as `id:secret`, sent from the loopback address `from` (127.0.0.1, 127.0.0.2, …). */
  async function exchangeFrom(
    from: string,
    service: { id: string; secret: string; audience: string },
    sub: string,
    extra: Record<string, string> = {},
  ): Promise<Answer> {
    const body = new URLSearchParams({
      grant_type: GRANT,
      subject_token: await stack.token(sub, { aud: service.audience }),
      subject_token_type: AT,
      audience: 'github',
      ...extra,
    }).toString();
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        `${stack.publicUrl}/oauth/token`,
        {
          method: 'POST',
          localAddress: from,
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            authorization: `Basic ${Buffer.from(`${service.id}:${service.secret}`).toString('base64')}`,
          },
        },
        (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString('utf8')));
          res.on('end', () =>
            resolve({ status: res.statusCode!, json: JSON.parse(text) as Record<string, unknown>, headers: new Headers() }),
          );
        },
      );
      req.once('error', reject);
      req.end(body);
    });
  }

  const wrong = <T extends { secret: string }>(service: T): T => ({ ...service, secret: 'not-the-secret-at-all-0123' });
  const statuses = async (n: number, send: () => Promise<Answer>): Promise<number[]> => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push((await send()).status);
    return out;
  };

  it("spends a guesser's failures on its own address and the id it guessed: the real service elsewhere, another service and made-up ids keep their budgets", async () => {
    await seedGitHubConnection(stack, 'lena', 'octocat', ['public_repo']);
    const guesser = '127.0.0.2';
    assert.deepEqual(await statuses(LIMIT + 2, () => exchangeFrom(guesser, wrong(BOT), 'lena')), [401, 401, 401, 401, 429, 429]);
    // The right secret from the guesser's address is refused too: it cannot be told from a guess.
    assert.equal((await exchangeFrom(guesser, BOT, 'lena')).status, 429);
    assert.equal((await exchangeFrom('127.0.0.1', BOT, 'lena')).status, 200, 'the real service on its own address works');
    assert.equal((await exchangeFrom('127.0.0.1', wrong(BOT), 'lena')).status, 401, 'and keeps its own budget there');
    assert.equal((await exchangeFrom(guesser, OTHER, 'lena')).status, 200, 'another service on the guesser’s address works');
    // Made-up ids share one budget per address: new names buy no new guesses.
    const madeUp = (i: number) => ({ id: `nobody-${i}`, secret: 'x'.repeat(30), audience: BOT.audience });
    const unknown: number[] = [];
    for (let i = 0; i < LIMIT + 2; i++) unknown.push((await exchangeFrom(guesser, madeUp(i), 'lena')).status);
    assert.deepEqual(unknown, [401, 401, 401, 401, 429, 429]);
    assert.equal((await exchangeFrom(guesser, wrong(OTHER), 'lena')).status, 401, 'a declared id is not in the made-up ids’ budget');
  });

  it('takes an authenticated exchange back at once: exchanges held for their user keep no failure slot', async () => {
    await seedGitHubConnection(stack, 'mona', 'octocat', ['public_repo']);
    const from = '127.0.0.3';
    const held: Array<Promise<Answer>> = [];
    for (let i = 0; i < LIMIT; i++) {
      const sub = `held-${i}`;
      const first = await exchangeFrom(from, BOT, sub);
      assert.equal(first.json.error, 'interaction_required', JSON.stringify(first.json));
      held.push(exchangeFrom(from, BOT, sub, { connect_request: String(first.json.connect_request), wait: '3' }));
      await heldCalls(stack, i + 1);
    }
    const meanwhile = await exchangeFrom(from, BOT, 'mona');
    assert.equal(meanwhile.status, 200, `with ${LIMIT} exchanges held: ${JSON.stringify(meanwhile.json)}`);
    for (const r of await Promise.all(held)) assert.notEqual(r.status, 429);
  });
});
