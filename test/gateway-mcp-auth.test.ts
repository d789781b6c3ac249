// `auth: mcp` upstreams (issue 13): the broker discovers an upstream MCP server's own authorization
// server, becomes its client and connects each user through the usual /connect pages. Real parts:
// a 2025-11-25 sessionful MCP server (official SDK) protected by its own oidc-provider (not the
// broker's IdP), the broker in-process, the official SDK client calling the upstream with the token.
import assert from 'node:assert/strict';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { loadConfig } from '../src/config/env.js';
import { ConnectionService } from '../src/connections/index.js';
import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import { Sealer } from '../src/crypto/index.js';
import { clientDocumentRoutes, preRegisteredClient } from '../src/providers/mcp-auth/index.js';
import { createLogger } from '../src/log.js';
import { asMetadata, authorizeAt, onBench, providerBench, refusal, staticUpstream } from './support/mcp-auth-bench.js';
import type { Provider } from '../src/providers/provider.js';
import { sqliteHandle, type Store } from '../src/store/index.js';
import { Browser, textOf, type Page } from './support/browser.js';
import { connectUpstream } from './support/mcp-auth-connect.js';
import { bindUpstreamServer, startProtectedUpstream, type ProtectedUpstream, type UpstreamOptions } from './support/mcp-auth-upstream.js';
import { providersFile } from './support/gateway.js';
import type { IdpClient } from './support/idp.js';
import { portOf } from './support/listen.js';
import { signIn, startStack, type Stack } from './support/stack.js';
import { selfSignedCertificate } from './support/tls.js';

const quiet = createLogger('error');

interface World {
  upstream: ProtectedUpstream;
  stack: Stack;
  provider: () => Provider;
  close(): Promise<void>;
}

/**
 * A broker configured as an operator would (PROVIDERS_FILE `upstreams:` with the upstream as
 * `tracker`, `auth: mcp`; `TRACKER_CLIENT_ID` / `_SECRET` for a pre-registered client), then the
 * upstream behind its own AS (started second, on a port picked first, so its AS can pre-register
 * the broker's callback; the broker's start-up discovery fails meanwhile and is retried on first use).
 */
async function world(
  opts: {
    upstream?: Omit<UpstreamOptions, 'mcpServer' | 'clients'>;
    /** Clients the upstream's AS knows beforehand, given the broker's callback. */
    preRegistered?: (callback: string) => IdpClient[];
    provider?: { clientId?: string; clientSecret?: string };
    env?: Record<string, string>;
  } = {},
): Promise<World> {
  const mcpServer = await bindUpstreamServer();
  const upstreamUrl = `http://127.0.0.1:${portOf(mcpServer)}/mcp`;
  const file = providersFile({ upstreams: [{ id: 'tracker', url: upstreamUrl, auth: 'mcp', displayName: 'Tracker' }] });
  const { clientId, clientSecret } = opts.provider ?? {};
  let stack: Stack;
  try {
    stack = await startStack({
      env: {
        ...opts.env,
        PROVIDERS_FILE: file.path,
        ...(clientId ? { TRACKER_CLIENT_ID: clientId } : {}),
        ...(clientSecret ? { TRACKER_CLIENT_SECRET: clientSecret } : {}),
      },
    });
  } catch (err) {
    mcpServer.close();
    file.remove();
    throw err;
  }
  let upstream: ProtectedUpstream;
  try {
    upstream = await startProtectedUpstream({
      ...opts.upstream,
      mcpServer,
      ...(opts.preRegistered ? { clients: () => opts.preRegistered!(`${stack.publicUrl}/connect/tracker/callback`) } : {}),
    });
  } catch (err) {
    await stack.close();
    mcpServer.close();
    file.remove();
    throw err;
  }
  return {
    upstream,
    stack,
    provider: () => stack.broker.broker.toolDeps.providers.get('tracker')!,
    async close() {
      await stack.close();
      await upstream.close();
      file.remove();
    },
  };
}

/** The whole browser side: our pages, then the upstream AS's sign-in as `upstreamLogin`. */
function connect(browser: Browser, w: World, user: string, upstreamLogin: string): Promise<Page> {
  return connectUpstream(browser, w.stack, w.upstream.issuer, user, upstreamLogin);
}

function connectionRows(
  store: Store,
): Array<{ subject: string; provider: string; account_id: string; account_login: string; scopes: string }> {
  return sqliteHandle(store)
    .prepare("SELECT subject, provider, account_id, account_login, scopes FROM connections WHERE provider = 'tracker'")
    .all() as never;
}

/** The user's tracker tokens, opened the way the broker opens them (a ConnectionService over its store). */
function serviceOf(w: World): ConnectionService {
  return new ConnectionService(w.stack.broker.broker.store, new Sealer(loadConfig(w.stack.env).tokenKeys), quiet);
}

function principal(w: World, user: string) {
  return principalFromVerifiedClaims(w.stack.idp.issuer, user);
}

/** Calls the upstream's tool with `token` through the official SDK client (2025-11-25, initialize + session). */
async function callUpstream(url: string, token: string): Promise<string> {
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: { token: async () => token } }));
  try {
    const result = await client.callTool({ name: 'whoami', arguments: {} });
    return (result.content as Array<{ text?: string }>).map((c) => c.text ?? '').join('');
  } finally {
    await client.close();
  }
}

describe('auth: mcp upstreams through the connect flow', () => {
  test('discovers the upstream, registers dynamically once, connects the user with state, PKCE and resource, and the token works at the upstream', async () => {
    const w = await world();
    try {
      const browser = new Browser();
      const done = await connect(browser, w, 'alice', 'alice-at-tracker');
      assert.equal(done.status, 200, done.html);
      assert.match(done.html, /Connected as @alice-at-tracker/);

      // The authorization request: code, state, PKCE S256, resource = the upstream, client = the registered one.
      const authorize = new URL(done.trail.find((u) => u.startsWith(`${w.upstream.issuer}/auth?`))!);
      const q = authorize.searchParams;
      assert.equal(q.get('response_type'), 'code');
      assert.equal(q.get('code_challenge_method'), 'S256');
      assert.match(q.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/);
      assert.match(q.get('state') ?? '', /^[A-Za-z0-9_-]{43,}$/);
      assert.equal(q.get('resource'), w.upstream.url);
      assert.deepEqual((q.get('scope') ?? '').split(' ').sort(), ['mcp', 'offline_access', 'openid', 'profile']);
      assert.equal(q.get('redirect_uri'), `${w.stack.publicUrl}/connect/tracker/callback`);

      // One RFC 7591 registration, kept per issuer in the store; the code exchange names the resource too.
      const registrations = w.upstream.asRequests.filter((r) => r.method === 'POST' && r.path === '/reg');
      assert.equal(registrations.length, 1);
      const registered = JSON.parse(registrations[0]!.raw) as Record<string, unknown>;
      assert.deepEqual(registered.redirect_uris, [`${w.stack.publicUrl}/connect/tracker/callback`]);
      assert.deepEqual(registered.grant_types, ['authorization_code', 'refresh_token']);
      // The scopes the authorization request asks for are the ones registered (an AS may refuse any other).
      assert.deepEqual(String(registered.scope).split(' ').sort(), (q.get('scope') ?? '').split(' ').sort());
      const stored = await w.stack.broker.broker.store.upstreamClients.find(
        w.upstream.issuer,
        `${w.stack.publicUrl}/connect/tracker/callback`,
      );
      assert.ok(stored, 'the registration is stored');
      assert.equal(q.get('client_id'), stored.client_id);
      assert.ok(stored.client_secret_sealed?.startsWith('v1.'), 'the client secret is stored only sealed');
      assert.doesNotMatch(stored.metadata_json, /client_secret"|registration_access_token/);
      const codeExchange = w.upstream.asRequests.find((r) => r.path === '/token' && r.body.get('grant_type') === 'authorization_code');
      assert.equal(codeExchange?.body.get('resource'), w.upstream.url);
      assert.ok(codeExchange?.body.get('code_verifier'));
      // Basic authentication, and the client_id in the body as well (the Python SDK's AS looks the client up there).
      assert.equal(codeExchange?.body.get('client_id'), stored.client_id);

      // The connection: the account from the AS's ID token, shown on /connections.
      assert.deepEqual(connectionRows(w.stack.broker.broker.store), [
        { subject: 'alice', provider: 'tracker', account_id: 'alice-at-tracker', account_login: 'alice-at-tracker', scopes: 'mcp' },
      ]);
      const list = await browser.open(`${w.stack.publicUrl}/connections`);
      assert.match(list.html, /Tracker/);
      assert.match(list.html, /alice-at-tracker/);

      // The access token is for the upstream alone (RFC 8707), and the upstream accepts it.
      const usable = await serviceOf(w).usable(principal(w, 'alice'), w.provider());
      assert.equal(usable.kind, 'ok');
      const token = usable.kind === 'ok' ? usable.connection.tokens.accessToken : '';
      assert.equal(decodeJwt(token).aud, w.upstream.url);
      assert.equal(await callUpstream(w.upstream.url, token), 'you are alice-at-tracker');
      assert.ok(!done.html.includes(token) && !list.html.includes(token), 'no page shows the token');
      const code = codeExchange?.body.get('code') ?? '';
      const secret = new Sealer(loadConfig(w.stack.env).tokenKeys).open(
        { keyId: stored.key_id!, value: stored.client_secret_sealed! },
        { issuer: w.upstream.issuer, subject: stored.client_key, provider: 'upstream-client-secret' },
      );
      for (const s of [token, code, secret])
        assert.ok(s && w.stack.logs.every((l) => !l.includes(s)), 'no log line carries a token, code or client secret');

      // A second user connects with the same registration: no second /reg.
      const bob = new Browser();
      const bobDone = await connect(bob, w, 'bob', 'bob-at-tracker');
      assert.match(bobDone.html, /Connected as @bob-at-tracker/);
      assert.equal(w.upstream.asRequests.filter((r) => r.path === '/reg').length, 1);
    } finally {
      await w.close();
    }
  });

  test('refreshes with the resource indicator, the refreshed token still works at the upstream, and disconnecting revokes (RFC 7009)', async () => {
    const w = await world();
    try {
      const browser = new Browser();
      await connect(browser, w, 'carol', 'carol-at-tracker');
      const service = serviceOf(w);
      const connected = (await service.open(principal(w, 'carol'), 'tracker'))!;
      const before = connected.tokens;
      // Stored as expired, so usable() refreshes through the lease.
      const account = { id: connected.row.account_id, login: connected.row.account_login };
      await service.save(principal(w, 'carol'), 'tracker', account, { ...before, expiresAt: Date.now() - 1_000 }, { refuseShared: false });
      const usable = await service.usable(principal(w, 'carol'), w.provider());
      assert.equal(usable.kind, 'ok');
      const after = usable.kind === 'ok' ? usable.connection.tokens : before;
      assert.notEqual(after.accessToken, before.accessToken, 'a new access token');
      const refresh = w.upstream.asRequests.filter((r) => r.path === '/token' && r.body.get('grant_type') === 'refresh_token');
      assert.equal(refresh.length, 1);
      assert.equal(refresh[0]!.body.get('resource'), w.upstream.url);
      assert.equal(decodeJwt(after.accessToken).aud, w.upstream.url);
      assert.equal(await callUpstream(w.upstream.url, after.accessToken), 'you are carol-at-tracker');
      assert.ok(after.refreshToken, 'a refresh token is kept');

      // Disconnecting revokes at the AS (RFC 7009, advertised there): the refresh token, and with it the grant.
      const list = await browser.open(`${w.stack.publicUrl}/connections`);
      const confirm = await browser.open(`${w.stack.publicUrl}/connections/tracker/disconnect`);
      assert.match(list.html, /href="\/connections\/tracker\/disconnect"/, 'the page links to the confirmation');
      const gone = await browser.submit(confirm, { match: /^\/connections\/tracker\/disconnect$/, button: 'yes' });
      assert.match(textOf(gone.html), /Your Tracker account is disconnected and the access was revoked at Tracker\./);
      const revocation = w.upstream.asRequests.filter((r) => r.path === '/token/revocation');
      assert.equal(revocation.length, 1);
      assert.equal(revocation[0]!.body.get('token'), after.refreshToken);
      assert.equal(await w.stack.broker.broker.store.connections.find(principal(w, 'carol'), 'tracker'), undefined);
    } finally {
      await w.close();
    }
  });

  test('uses a pre-registered client (<ID>_CLIENT_ID / <ID>_CLIENT_SECRET) before registering, sending the secret as the AS asks', async () => {
    const w = await world({
      preRegistered: (callback) => [
        {
          client_id: 'tracker-preregistered',
          client_secret: 'tracker-preregistered-secret-0123456789',
          redirect_uris: [callback],
          grant_types: ['authorization_code', 'refresh_token'],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
      provider: { clientId: 'tracker-preregistered', clientSecret: 'tracker-preregistered-secret-0123456789' },
    });
    try {
      const done = await connect(new Browser(), w, 'dave', 'dave-at-tracker');
      assert.match(done.html, /Connected as @dave-at-tracker/, done.html);
      assert.equal(w.upstream.asRequests.filter((r) => r.path === '/reg').length, 0, 'no dynamic registration');
      const authorize = new URL(done.trail.find((u) => u.startsWith(`${w.upstream.issuer}/auth?`))!);
      assert.equal(authorize.searchParams.get('client_id'), 'tracker-preregistered');
      const exchange = w.upstream.asRequests.find((r) => r.path === '/token' && r.body.get('grant_type') === 'authorization_code')!;
      assert.equal(exchange.body.get('client_secret'), null, 'client_secret_basic: the secret is not in the body');
      assert.equal(
        await w.stack.broker.broker.store.upstreamClients.find(w.upstream.issuer, `${w.stack.publicUrl}/connect/tracker/callback`),
        undefined,
      );
    } finally {
      await w.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The provider on its own, over a store of its own: discovery, registration and the callback checks.

describe('auth: mcp discovery and registration', () => {
  test('refuses protected resource metadata for another resource, with a clear page, sending nothing to the AS', async () => {
    const w = await world({ upstream: { prmResource: () => 'https://elsewhere.example/mcp' } });
    try {
      const browser = new Browser();
      await signIn(browser, w.stack, 'erin');
      const list = await browser.open(`${w.stack.publicUrl}/connections`);
      const page = await browser.submit(list, { match: /^\/connections\/tracker\/connect$/ });
      assert.equal(page.status, 503);
      assert.match(
        textOf(page.html),
        /Tracker is not set up correctly: its protected resource metadata is not for http:\/\/127\.0\.0\.1:\d+\/mcp\./,
      );
      assert.doesNotMatch(page.html, /elsewhere/, "the document's own text is never shown");
      assert.doesNotMatch(page.html, /at .*\.ts:\d+/, 'no stack trace');
      assert.deepEqual(w.upstream.asRequests, [], 'the authorization server was never contacted');
    } finally {
      await w.close();
    }
  });

  test('refuses an authorization server whose metadata names another issuer, and non-https metadata URLs, without fetching them', () =>
    onBench(async (b, upstream) => {
      // An impostor serving the real AS's metadata as its own: its issuer is not the impostor's URL.
      const real = (await (await fetch(`${upstream.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
      const impostor = await staticUpstream((base) => ({
        '/.well-known/oauth-protected-resource/mcp': { resource: `${base}/mcp`, authorization_servers: [base] },
        '/.well-known/oauth-authorization-server': real,
      }));
      const plainHttp = await staticUpstream((base) => ({
        '/.well-known/oauth-protected-resource/mcp': { resource: `${base}/mcp`, authorization_servers: ['http://as.example.test'] },
      }));
      const insecureChallenge = await staticUpstream(() => ({}), {
        challenge: () => 'Bearer resource_metadata="http://metadata.example.test/prm"',
      });
      try {
        const wrongIssuer = await refusal(b.provider(`${impostor.base}/mcp`).prepare());
        assert.equal(wrongIssuer.code, 'misconfigured');
        assert.match(wrongIssuer.message, /its authorization server's metadata names another issuer/);
        assert.ok(!wrongIssuer.message.includes(upstream.issuer), "the document's issuer is never repeated");
        assert.ok(
          !upstream.asRequests.some((r) => r.path === '/reg' || r.path === '/auth'),
          'nothing sent to the real AS but its metadata',
        );

        const http = await refusal(b.provider(`${plainHttp.base}/mcp`).prepare());
        assert.equal(http.code, 'misconfigured');
        assert.match(http.message, /its authorization server is not an https URL/);
        const challenge = await refusal(b.provider(`${insecureChallenge.base}/mcp`).prepare());
        assert.match(challenge.message, /its resource_metadata URL is not an https URL/);
        assert.deepEqual(insecureChallenge.hits, ['POST /mcp'], 'the http metadata URL was not fetched');
      } finally {
        await Promise.all([impostor.close(), plainHttp.close(), insecureChallenge.close()]);
      }
    }));

  test('finds the metadata at the well-known URL when the 401 names none, and names the variable to set when no registration is possible', () =>
    onBench(
      async (b, upstream) => {
        // An AS that offers neither dynamic registration nor metadata documents.
        const closed = await staticUpstream((base) => ({
          '/.well-known/oauth-protected-resource/mcp': { resource: `${base}/mcp`, authorization_servers: [base] },
          '/.well-known/oauth-authorization-server': asMetadata(base),
        }));
        try {
          const provider = b.provider(upstream.url);
          await provider.prepare();
          assert.equal(provider.authorizationOrigin, new URL(upstream.issuer).origin);
          assert.deepEqual(provider.defaultScopes, ['mcp'], 'the challenge scope');

          const none = await refusal(b.provider(`${closed.base}/mcp`).prepare());
          assert.equal(none.code, 'misconfigured');
          assert.equal(
            none.message,
            'This service cannot sign in to Tracker: its authorization server offers neither client ID metadata documents nor dynamic registration. Tell the operator: register a client there and set TRACKER_CLIENT_ID.',
          );
          const ok = await b.provider(`${closed.base}/mcp`, { clientId: 'operator-client' }).buildAuthorizationUrl({
            redirectUri: 'http://127.0.0.1:9/connect/tracker/callback',
            state: 's'.repeat(43),
            codeChallenge: 'c'.repeat(43),
            scopes: [],
          });
          assert.equal(ok.origin + ok.pathname, `${closed.base}/authorize`);
          assert.equal(ok.searchParams.get('client_id'), 'operator-client');
        } finally {
          await closed.close();
        }
      },
      { noChallengeMetadata: true },
    ));

  test('two instances sharing one store end up with one registration per issuer, and a later one registers nothing', () =>
    onBench(async (b, upstream) => {
      const [one, two] = [b.store(), b.store()];
      const a = b.provider(upstream.url, { store: one });
      const c = b.provider(upstream.url, { store: two });
      await Promise.all([a.prepare(), c.prepare()]);
      const params = { redirectUri: a.redirectUri, state: 's'.repeat(43), codeChallenge: 'c'.repeat(43), scopes: [] };
      const [ua, uc] = await Promise.all([a.buildAuthorizationUrl(params), c.buildAuthorizationUrl(params)]);
      assert.equal(ua.searchParams.get('client_id'), uc.searchParams.get('client_id'), 'both use the one stored');
      const rows = sqliteHandle(one).prepare('SELECT issuer, client_id FROM upstream_clients').all() as Array<{
        issuer: string;
        client_id: string;
      }>;
      assert.deepEqual(rows, [{ issuer: upstream.issuer, client_id: ua.searchParams.get('client_id') }]);
      const before = upstream.asRequests.filter((r) => r.path === '/reg').length;
      assert.ok(before >= 1 && before <= 2);
      const third = b.provider(upstream.url, { store: b.store() });
      const ut = await third.buildAuthorizationUrl(params);
      assert.equal(ut.searchParams.get('client_id'), ua.searchParams.get('client_id'));
      assert.equal(upstream.asRequests.filter((r) => r.path === '/reg').length, before, 'a third instance registers nothing');
    }));

  test('a registration the AS refuses (invalid_client) or whose secret can no longer be opened is forgotten, and the next connect registers anew', () =>
    onBench(async (b, upstream) => {
      const store = b.store();
      await b.provider(upstream.url, { store }).prepare();
      const key = 'http://127.0.0.1:9/connect/tracker/callback';
      const first = (await store.upstreamClients.find(upstream.issuer, key))!;
      // The stored secret no longer matches what the AS holds (e.g. it rotated it): the code exchange gets invalid_client.
      await store.upstreamClients.delete(upstream.issuer, key, first.client_id);
      const wrong = b.sealer.seal('not-the-secret', { issuer: upstream.issuer, subject: key, provider: 'upstream-client-secret' });
      await store.upstreamClients.putIfAbsent({ ...first, client_secret_sealed: wrong.value, key_id: wrong.keyId });
      const provider = b.provider(upstream.url, { store });
      const { callbackUrl, state, codeVerifier } = await authorizeAt(provider, 'judy');
      const refused = await refusal(
        provider.completeAuthorization({ callbackUrl, expectedState: state, codeVerifier, requestedScopes: [] }),
      );
      assert.equal(refused.code, 'misconfigured', `${refused.message} ${refused.detail}`);
      assert.equal(refused.message, 'This service is not set up correctly with Tracker. Tell the operator.');
      assert.equal(await store.upstreamClients.find(upstream.issuer, key), undefined, 'the refused registration is forgotten');
      const again = await authorizeAt(provider, 'judy');
      const second = (await store.upstreamClients.find(upstream.issuer, key))!;
      assert.notEqual(second.client_id, first.client_id, 'registered anew');
      assert.equal(again.authorizationUrl.searchParams.get('client_id'), second.client_id);
      const done = await provider.completeAuthorization({ ...again, expectedState: again.state, requestedScopes: [] });
      assert.equal(done.account.id, 'judy');

      // A secret sealed under a key the broker no longer has: registered anew too, without an error.
      await store.upstreamClients.delete(upstream.issuer, key, second.client_id);
      await store.upstreamClients.putIfAbsent({ ...second, key_id: 'k-retired' });
      const registrations = upstream.asRequests.filter((r) => r.path === '/reg').length;
      await b.provider(upstream.url, { store }).prepare();
      assert.equal(upstream.asRequests.filter((r) => r.path === '/reg').length, registrations + 1);
      assert.notEqual((await store.upstreamClients.find(upstream.issuer, key))!.client_id, second.client_id);
    }));

  test('checks RFC 9207 iss on the callback: a missing or foreign iss is refused, the genuine one completes', () =>
    onBench(async (b, upstream) => {
      const provider = b.provider(upstream.url);
      const { callbackUrl, state, codeVerifier } = await authorizeAt(provider, 'frank');
      assert.equal(callbackUrl.searchParams.get('iss'), upstream.issuer);
      const complete = (url: URL) =>
        provider.completeAuthorization({ callbackUrl: url, expectedState: state, codeVerifier, requestedScopes: [] });
      const missing = new URL(callbackUrl);
      missing.searchParams.delete('iss');
      await refusal(complete(missing));
      const foreign = new URL(callbackUrl);
      foreign.searchParams.set('iss', 'http://127.0.0.1:9');
      await refusal(complete(foreign));
      assert.equal(upstream.asRequests.filter((r) => r.path === '/token').length, 0, 'a refused callback spends no code');
      const { tokens, account } = await complete(callbackUrl);
      assert.deepEqual(account, { id: 'frank', login: 'frank' });
      assert.equal(decodeJwt(tokens.accessToken).aud, upstream.url);
    }));
});

describe('auth: mcp client ID metadata documents', () => {
  const certificate = selfSignedCertificate();

  test('with an https PUBLIC_URL the broker serves its client ID metadata document and the AS signs in with it, registering nothing', () =>
    onBench(async (b, upstream) => {
      const app = express();
      const fetched: string[] = [];
      const https = createHttpsServer(certificate, app);
      await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
      const publicUrl = new URL(`https://127.0.0.1:${(https.address() as AddressInfo).port}`);
      const provider = b.provider(upstream.url, { publicUrl });
      app.use((req, _res, next) => {
        fetched.push(req.path);
        next();
      });
      app.use(clientDocumentRoutes([provider]));
      try {
        assert.equal(provider.documentUrl, `${publicUrl.origin}/oauth/clients/tracker.json`);
        const { callbackUrl, state, codeVerifier, authorizationUrl } = await authorizeAt(provider, 'grace');
        assert.equal(authorizationUrl.searchParams.get('client_id'), provider.documentUrl);
        assert.ok(fetched.includes('/oauth/clients/tracker.json'), 'the AS fetched the document from the broker');
        assert.equal(upstream.asRequests.filter((r) => r.path === '/reg').length, 0, 'no dynamic registration');
        const { tokens, account } = await provider.completeAuthorization({
          callbackUrl,
          expectedState: state,
          codeVerifier,
          requestedScopes: [],
        });
        assert.deepEqual(account, { id: 'grace', login: 'grace' });
        assert.equal(decodeJwt(tokens.accessToken).aud, upstream.url);
        assert.equal(await callUpstream(upstream.url, tokens.accessToken), 'you are grace');
        // The document itself: the fields an AS needs, nothing secret.
        const doc = provider.clientMetadataDocument()!;
        assert.deepEqual(doc, {
          client_id: provider.documentUrl,
          client_name: 'MCP Connect Broker',
          client_uri: `${publicUrl.origin}/`,
          redirect_uris: [`${publicUrl.origin}/connect/tracker/callback`],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
          application_type: 'web',
        });
        // An http PUBLIC_URL serves none (a client_id must be an https URL) and falls back to registration.
        assert.equal(b.provider(upstream.url).clientMetadataDocument(), undefined);
      } finally {
        https.closeAllConnections();
        await new Promise<void>((resolve) => https.close(() => resolve()));
      }
    }));
});

describe('auth: mcp pre-registered credentials', () => {
  test('come from <ID>_CLIENT_ID and <ID>_CLIENT_SECRET, the id upper-cased with - as _', () => {
    assert.deepEqual(preRegisteredClient({ TRACKER_TWO_CLIENT_ID: 'cid', TRACKER_TWO_CLIENT_SECRET: 'sec' }, 'tracker-two'), {
      clientId: 'cid',
      clientSecret: 'sec',
    });
    assert.deepEqual(preRegisteredClient({ TRACKER_CLIENT_ID: 'public-client' }, 'tracker'), { clientId: 'public-client' });
    assert.deepEqual(preRegisteredClient({ TRACKER_CLIENT_SECRET: 'orphan' }, 'tracker'), {}, 'a secret alone is no client');
  });
});

describe('auth: mcp accounts the upstream cannot name', () => {
  test('without OpenID Connect the account is "account at <upstream name>", and two users both connect under SHARED_ACCOUNT_POLICY=refuse', async () => {
    const w = await world({
      upstream: {
        rewriteAsMetadata: (m) => ({ ...m, scopes_supported: ['mcp', 'offline_access'] }),
      },
      env: { SHARED_ACCOUNT_POLICY: 'refuse' },
    });
    try {
      const kim = await connect(new Browser(), w, 'kim', 'kim-at-tracker');
      assert.equal(kim.status, 200, kim.html);
      // The operator's name for the upstream, not its authorization server's host (a document's words).
      assert.match(textOf(kim.html), /Connected as @account at Tracker/);
      assert.ok(!kim.html.includes(`account at ${new URL(w.upstream.issuer).host}`));
      const authorize = new URL(kim.trail.find((u) => u.startsWith(`${w.upstream.issuer}/auth?`))!);
      assert.deepEqual((authorize.searchParams.get('scope') ?? '').split(' ').sort(), ['mcp', 'offline_access'], 'no openid asked');
      const leo = await connect(new Browser(), w, 'leo', 'leo-at-tracker');
      assert.equal(leo.status, 200, 'not refused as an account linked to another user');
      const rows = connectionRows(w.stack.broker.broker.store);
      assert.deepEqual(
        rows.map((r) => [r.subject, r.account_login]),
        [
          ['kim', 'account at Tracker'],
          ['leo', 'account at Tracker'],
        ],
      );
      // Each user's token is still their own at the upstream.
      for (const [user, login] of [
        ['kim', 'kim-at-tracker'],
        ['leo', 'leo-at-tracker'],
      ] as const) {
        const usable = await serviceOf(w).usable(principal(w, user), w.provider());
        assert.equal(usable.kind, 'ok');
        if (usable.kind === 'ok')
          assert.equal(await callUpstream(w.upstream.url, usable.connection.tokens.accessToken), `you are ${login}`);
      }
    } finally {
      await w.close();
    }
  });

  test('an unverified account is neither refused as shared nor as a different account (the checks cannot apply)', async () => {
    const b = providerBench();
    try {
      const service = new ConnectionService(b.store(), b.sealer, quiet);
      const tokens = { accessToken: 'at-1', tokenType: 'Bearer', scopes: ['mcp'] };
      const anonymous = { id: 'https://as.tracker.example', login: 'account at as.tracker.example', unverified: true };
      const [hana, ivan] = [
        principalFromVerifiedClaims('https://idp.example', 'hana'),
        principalFromVerifiedClaims('https://idp.example', 'ivan'),
      ];
      const options = { refuseShared: true, refuseAccountChange: true };
      assert.equal(await service.save(hana, 'tracker', anonymous, tokens, options), 'saved');
      assert.equal(await service.save(ivan, 'tracker', anonymous, tokens, options), 'saved', 'not "already linked to another user"');
      assert.equal(
        await service.save(hana, 'tracker', { ...anonymous, id: 'other' }, tokens, options),
        'saved',
        'not "a different account"',
      );
      // A named account keeps both checks.
      const named = { id: 'acct-1', login: 'hana' };
      assert.equal(await service.save(hana, 'other', named, tokens, options), 'saved');
      assert.equal(await service.save(ivan, 'other', named, tokens, options), 'refused_shared_account');
    } finally {
      await b.close();
    }
  });
});
