// `auth: mcp` upstreams (issue 13): the broker discovers an upstream MCP server's own authorization
// server, becomes its client and connects each user through the usual /connect pages. Real parts:
// a 2025-11-25 sessionful MCP server (official SDK) protected by its own oidc-provider (not the
// broker's IdP), the broker in-process, the official SDK client calling the upstream with the token.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { loadConfig } from '../src/config/env.js';
import { ConnectionService } from '../src/connections/index.js';
import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import { Sealer } from '../src/crypto/index.js';
import { createMcpAuthProvider, type McpAuthProvider } from '../src/gateway/mcp-auth/index.js';
import { createLogger } from '../src/log.js';
import { sqliteHandle, type Store } from '../src/store/index.js';
import { Browser, type Page } from './support/browser.js';
import { startProtectedUpstream, type ProtectedUpstream, type UpstreamOptions } from './support/mcp-auth-upstream.js';
import { freePort, type IdpClient } from './support/idp.js';
import { signIn, startStack, type Stack } from './support/stack.js';

const quiet = createLogger('error');

interface World {
  upstream: ProtectedUpstream;
  stack: Stack;
  provider: () => McpAuthProvider;
  close(): Promise<void>;
}

/**
 * A broker whose providers include the upstream as `tracker`, then the upstream behind its own AS
 * (started second, on a port picked first, so its AS can pre-register the broker's callback; the
 * broker's start-up discovery fails meanwhile and is retried on first use).
 */
async function world(
  opts: {
    upstream?: Omit<UpstreamOptions, 'mcpPort' | 'clients'>;
    /** Clients the upstream's AS knows beforehand, given the broker's callback. */
    preRegistered?: (callback: string) => IdpClient[];
    provider?: { clientId?: string; clientSecret?: string; refreshSkewMs?: number; scopes?: string[] };
  } = {},
): Promise<World> {
  const mcpPort = await freePort();
  const upstreamUrl = `http://127.0.0.1:${mcpPort}/mcp`;
  let provider: McpAuthProvider | undefined;
  const stack = await startStack({
    brokerOptions: (publicUrl) => ({
      moreProviders: ({ store, sealer }) => [
        (provider = createMcpAuthProvider({
          id: 'tracker',
          displayName: 'Tracker',
          upstreamUrl,
          publicUrl: new URL(publicUrl),
          store,
          sealer,
          timeoutMs: 5_000,
          log: quiet,
          ...opts.provider,
        })),
      ],
    }),
  });
  let upstream: ProtectedUpstream;
  try {
    upstream = await startProtectedUpstream({
      ...opts.upstream,
      mcpPort,
      ...(opts.preRegistered ? { clients: () => opts.preRegistered!(`${stack.publicUrl}/connect/tracker/callback`) } : {}),
    });
  } catch (err) {
    await stack.close();
    throw err;
  }
  return {
    upstream,
    stack,
    provider: () => provider!,
    async close() {
      await stack.close();
      await upstream.close();
    },
  };
}

/** Signs `user` in to the broker, starts a Tracker connection from /connections and consents; returns the page after. */
async function startConnect(browser: Browser, w: World, user: string): Promise<Page> {
  await signIn(browser, w.stack, user);
  const list = await browser.open(`${w.stack.publicUrl}/connections`);
  const consent = await browser.submit(list, { match: /^\/connections\/tracker\/connect$/ });
  assert.equal(consent.status, 200, consent.html);
  assert.match(consent.html, /Connect Tracker/);
  return browser.submit(consent, { button: 'allow' });
}

/** The whole browser side: our pages, then the upstream AS's sign-in as `upstreamLogin`. */
async function connect(browser: Browser, w: World, user: string, upstreamLogin: string): Promise<Page> {
  const atUpstream = await startConnect(browser, w, user);
  assert.ok(atUpstream.url.startsWith(w.upstream.issuer), `at the upstream AS ${w.upstream.issuer}: ${atUpstream.trail.join(' -> ')}`);
  assert.match(atUpstream.html, /Development sign-in/);
  const done = await browser.submit(atUpstream, { fields: { login: upstreamLogin } });
  return { ...done, trail: [...atUpstream.trail, ...done.trail] };
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

  test('refreshes with the resource indicator, and the refreshed token still works at the upstream', async () => {
    // Every use counts as "about to expire", so usable() refreshes through the lease.
    const w = await world({ provider: { refreshSkewMs: 24 * 3600_000 } });
    try {
      await connect(new Browser(), w, 'carol', 'carol-at-tracker');
      const service = serviceOf(w);
      const before = (await service.open(principal(w, 'carol'), 'tracker'))!.tokens;
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
