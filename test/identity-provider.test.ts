// The development / test identity provider (src/dev/identity-provider.ts) is a real OpenID
// Provider: discovery, authorization code + PKCE + nonce via its own sign-in page, dynamic
// registration of public clients, and RS256 JWT access tokens whose aud is the MCP resource.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as oidc from 'openid-client';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { createIdentityProvider } from '../src/dev/identity-provider.js';
import { freePort, startIdp } from './support/idp.js';
import type { StartedIdp } from './support/idp.js';
import { selfSignedCertificate, serveClientMetadata } from './support/tls.js';
import { unescapeHtml } from './support/authorize-form.js';

const CLIENT_ID = 'broker';
const CLIENT_SECRET = 'broker-secret-0123456789abcdef0123456789abcdef';

/** Minimal cookie jar: ignores Path (the provider scopes cookies to distinct paths anyway). */
class CookieJar {
  #cookies = new Map<string, string>();
  store(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair = '', ...attributes] = line.split(';');
      const eq = pair.indexOf('=');
      if (eq <= 0) continue;
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const expired =
        value === '' ||
        attributes.some((a) => {
          const [k = '', v = ''] = a.split('=').map((s) => s.trim());
          if (k.toLowerCase() === 'max-age') return Number(v) <= 0;
          if (k.toLowerCase() === 'expires') return Date.parse(v) <= Date.now();
          return false;
        });
      if (expired) this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
  }
  header(): string {
    return [...this.#cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

/** One browser step without following redirects: GET, or POST of `form`, with the jar's cookies; the jar keeps what the answer sets. */
async function browserStep(jar: CookieJar, url: string, form: URLSearchParams | undefined): Promise<Response> {
  const res = await fetch(url, {
    method: form ? 'POST' : 'GET',
    redirect: 'manual',
    headers: { cookie: jar.header(), ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
    ...(form ? { body: form.toString() } : {}),
  });
  jar.store(res);
  return res;
}

interface DriveOptions {
  login?: string;
  tryEmptyLoginFirst?: boolean;
  abort?: boolean;
}

/** Follows redirects by hand like a browser, signs in on the login page, stops at redirectUri. */
async function driveBrowser(start: URL, redirectUri: string, opts: DriveOptions = {}): Promise<URL> {
  const jar = new CookieJar();
  let url = start.href;
  let form: URLSearchParams | undefined;
  let triedEmpty = !opts.tryEmptyLoginFirst;
  for (let step = 0; step < 20; step++) {
    const res = await browserStep(jar, url, form);
    const wasEmptyAttempt = form?.get('login')?.trim() === '';
    form = undefined;
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel();
      const location = new URL(res.headers.get('location') ?? '', url).href;
      if (location.startsWith(redirectUri)) return new URL(location);
      url = location;
      continue;
    }
    const html = await res.text();
    if (wasEmptyAttempt) {
      assert.equal(res.status, 400, html);
      assert.match(html, /role="alert">Enter a user name\.</);
    } else {
      assert.equal(res.status, 200, `unexpected ${res.status} at ${url}: ${html}`);
    }
    assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'none'/);
    assert.match(html, /<title>Development sign-in · Development identity provider<\/title>/);
    assert.match(
      html,
      /Any user name is accepted here, with no password\. This sign-in is for trying the service on your own machine: never use it in production\./,
    );
    assert.match(html, /<label for="login">User name<\/label>/);
    assert.match(html, /<input id="login" name="login" type="text"[^>]* autofocus required/);
    assert.match(html, /<button type="submit" class="button primary">Sign in<\/button>/);
    assert.doesNotMatch(html, /<script|style=/i);
    if (opts.abort) {
      const abort = /<a class="button secondary" href="([^"]+\/abort)">/.exec(html);
      assert.ok(abort, 'cancel link');
      url = new URL(unescapeHtml(abort[1] ?? ''), url).href;
      continue;
    }
    const action = /<form method="post" action="([^"]+)" class="sign-in">/.exec(html);
    assert.ok(action, 'login form');
    url = new URL(unescapeHtml(action[1] ?? ''), url).href;
    form = new URLSearchParams({ login: triedEmpty ? (opts.login ?? 'alice') : '   ' });
    triedEmpty = true;
  }
  throw new Error('too many redirects');
}

interface FlowResult {
  tokens: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers;
  config: oidc.Configuration;
}

async function codeFlow(
  config: oidc.Configuration,
  redirectUri: string,
  opts: {
    scope: string;
    resource?: string;
    idToken: boolean;
    drive?: DriveOptions;
  },
): Promise<FlowResult> {
  const verifier = oidc.randomPKCECodeVerifier();
  const nonce = opts.idToken ? oidc.randomNonce() : undefined;
  const state = oidc.randomState();
  const authUrl = oidc.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: opts.scope,
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    ...(nonce ? { nonce } : {}),
    ...(opts.resource ? { resource: opts.resource } : {}),
  });
  const callback = await driveBrowser(authUrl, redirectUri, opts.drive);
  const tokens = await oidc.authorizationCodeGrant(
    config,
    callback,
    {
      pkceCodeVerifier: verifier,
      expectedState: state,
      ...(nonce ? { expectedNonce: nonce } : {}),
      idTokenExpected: opts.idToken,
    },
    opts.resource ? { resource: opts.resource } : undefined,
  );
  return { tokens, config };
}

describe('development identity provider', () => {
  let idp: StartedIdp;
  let resource: string;
  let redirectUri: string;
  let meta: Record<string, unknown>;
  let jwks: ReturnType<typeof createRemoteJWKSet>;
  let confidential: oidc.Configuration;

  before(async () => {
    const [rsPort, rpPort] = [await freePort(), await freePort()];
    resource = `http://127.0.0.1:${rsPort}/mcp`;
    redirectUri = `http://127.0.0.1:${rpPort}/auth/callback`;
    idp = await startIdp({
      resource,
      clients: [
        {
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          redirect_uris: [redirectUri],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
    });
    const res = await fetch(`${idp.issuer}/.well-known/openid-configuration`);
    assert.equal(res.status, 200);
    meta = (await res.json()) as Record<string, unknown>;
    jwks = createRemoteJWKSet(new URL(String(meta.jwks_uri)));
    confidential = await oidc.discovery(new URL(idp.issuer), CLIENT_ID, CLIENT_SECRET, oidc.ClientSecretBasic(CLIENT_SECRET), {
      execute: [oidc.allowInsecureRequests],
    });
  });

  after(async () => {
    await idp?.close();
  });

  test('discovery document advertises jwks_uri, registration and S256 PKCE', async () => {
    assert.equal(meta.issuer, idp.issuer);
    assert.equal(meta.jwks_uri, `${idp.issuer}/jwks`);
    assert.equal(meta.registration_endpoint, `${idp.issuer}/reg`);
    assert.deepEqual(meta.code_challenge_methods_supported, ['S256']);
    assert.ok((meta.scopes_supported as string[]).includes('mcp'));
    assert.equal(meta.client_id_metadata_document_supported, true);
    assert.ok(meta.revocation_endpoint && meta.introspection_endpoint);
    const as = await fetch(`${idp.issuer}/.well-known/oauth-authorization-server`);
    assert.equal(as.status, 200);
    assert.equal(((await as.json()) as { issuer: string }).issuer, idp.issuer);
  });

  test('confidential client: code + PKCE + nonce yields an ID token for the typed user name', async () => {
    const { tokens } = await codeFlow(confidential, redirectUri, {
      scope: 'openid profile email',
      idToken: true,
      drive: { tryEmptyLoginFirst: true },
    });
    const claims = tokens.claims();
    assert.ok(claims);
    assert.equal(claims.sub, 'alice');
    assert.equal(claims.iss, idp.issuer);
    assert.equal(claims.aud, CLIENT_ID);
    // conformIdTokenClaims: false puts the profile/email claims into the ID token itself.
    assert.equal(claims.preferred_username, 'alice');
    assert.equal(claims.name, 'alice');
    assert.equal(claims.email, 'alice@example.test');
  });

  test('resource indicator: the access token is an RS256 at+jwt with aud = resource', async () => {
    const { tokens } = await codeFlow(confidential, redirectUri, {
      scope: 'openid profile mcp',
      resource,
      idToken: true,
      drive: { login: 'alice' },
    });
    assert.equal(tokens.claims()?.sub, 'alice');
    const header = decodeProtectedHeader(tokens.access_token);
    assert.equal(header.alg, 'RS256');
    assert.equal(header.typ, 'at+jwt');
    const { payload } = await jwtVerify(tokens.access_token, jwks, {
      issuer: idp.issuer,
      audience: resource,
      typ: 'at+jwt',
      algorithms: ['RS256'],
    });
    assert.equal(payload.sub, 'alice');
    assert.equal(payload.client_id, CLIENT_ID);
    assert.equal(payload.scope, 'mcp');
    assert.equal(typeof payload.jti, 'string');
  });

  test('public client registered dynamically gets a JWT for the resource (no openid scope)', async () => {
    const publicRedirect = `http://127.0.0.1:${await freePort()}/callback`;
    const reg = await fetch(String(meta.registration_endpoint), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'Test MCP client',
        redirect_uris: [publicRedirect],
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
      }),
    });
    const body = (await reg.json()) as { client_id: string; client_secret?: string };
    assert.equal(reg.status, 201, JSON.stringify(body));
    assert.equal(body.client_secret, undefined);
    const config = await oidc.discovery(new URL(idp.issuer), body.client_id, undefined, oidc.None(), {
      execute: [oidc.allowInsecureRequests],
    });
    const { tokens } = await codeFlow(config, publicRedirect, { scope: 'mcp', resource, idToken: false, drive: { login: 'carol' } });
    const { payload } = await jwtVerify(tokens.access_token, jwks, { issuer: idp.issuer, audience: resource });
    assert.equal(payload.sub, 'carol');
    assert.equal(payload.client_id, body.client_id);
    assert.equal(payload.scope, 'mcp');
  });

  /** The confidential client's `openid` authorization URL with a fresh PKCE challenge, plus `extra` parameters. */
  async function openidAuthorizeUrl(extra: Record<string, string>): Promise<URL> {
    return oidc.buildAuthorizationUrl(confidential, {
      redirect_uri: redirectUri,
      scope: 'openid',
      ...extra,
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
    });
  }

  test('cancelling the sign-in returns access_denied to the client', async () => {
    const authUrl = await openidAuthorizeUrl({ state: 'xyz' });
    const callback = await driveBrowser(authUrl, redirectUri, { abort: true });
    assert.equal(callback.searchParams.get('error'), 'access_denied');
    assert.equal(callback.searchParams.get('state'), 'xyz');
  });

  test('a resource the IdP does not know is rejected (invalid_target)', async () => {
    const authUrl = await openidAuthorizeUrl({ resource: 'https://elsewhere.example/api' });
    const res = await fetch(authUrl, { redirect: 'manual' });
    const location = new URL(res.headers.get('location') ?? '', authUrl);
    assert.equal(location.searchParams.get('error'), 'invalid_target');
  });

  test("mintAccessToken produces tokens that verify like the provider's own", async () => {
    const token = await idp.mintAccessToken({ sub: 'bob' });
    const { payload, protectedHeader } = await jwtVerify(token, jwks, {
      issuer: idp.issuer,
      audience: resource,
      typ: 'at+jwt',
      algorithms: ['RS256'],
    });
    assert.equal(protectedHeader.kid, decodeProtectedHeader((await confidentialToken()).access_token).kid);
    assert.equal(payload.sub, 'bob');
    assert.equal(payload.scope, 'mcp');
    assert.equal(payload.client_id, CLIENT_ID);
    assert.equal((payload.exp ?? 0) - (payload.iat ?? 0), 300);
    assert.equal(typeof payload.jti, 'string');

    const expired = await idp.mintAccessToken({ sub: 'bob', expiresInSeconds: -60 });
    await assert.rejects(jwtVerify(expired, jwks, { issuer: idp.issuer, audience: resource }), { code: 'ERR_JWT_EXPIRED' });
    const other = await idp.mintAccessToken({ sub: 'bob', aud: 'http://127.0.0.1:1/other' });
    await assert.rejects(jwtVerify(other, jwks, { issuer: idp.issuer, audience: resource }), { code: 'ERR_JWT_CLAIM_VALIDATION_FAILED' });
  });

  async function confidentialToken() {
    return (await codeFlow(confidential, redirectUri, { scope: 'openid', resource, idToken: true })).tokens;
  }
});

describe('development identity provider with an issuer path', () => {
  test('serves discovery (both layouts), interactions and tokens under /idp', async () => {
    let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
    const server = createServer((req, res) => handler?.(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const issuer = `http://127.0.0.1:${port}/idp`;
      const resource = `http://127.0.0.1:${port}/mcp`;
      const redirectUri = `http://127.0.0.1:${port}/auth/callback`;
      const idp = await createIdentityProvider({
        issuer,
        resource,
        clients: [{ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, redirect_uris: [redirectUri] }],
      });
      handler = idp.callback();

      const rfc8414 = await fetch(`http://127.0.0.1:${port}/.well-known/oauth-authorization-server/idp`);
      assert.equal(rfc8414.status, 200);
      const asMeta = (await rfc8414.json()) as Record<string, string>;
      assert.equal(asMeta.issuer, issuer);
      assert.equal(asMeta.authorization_endpoint, `${issuer}/auth`);
      assert.equal(asMeta.jwks_uri, `${issuer}/jwks`);
      assert.equal((await fetch(`http://127.0.0.1:${port}/auth`)).status, 404);

      const config = await oidc.discovery(new URL(issuer), CLIENT_ID, CLIENT_SECRET, oidc.ClientSecretBasic(CLIENT_SECRET), {
        execute: [oidc.allowInsecureRequests],
      });
      const { tokens } = await codeFlow(config, redirectUri, { scope: 'openid mcp', resource, idToken: true, drive: { login: 'dave' } });
      assert.equal(tokens.claims()?.sub, 'dave');
      const { payload } = await jwtVerify(tokens.access_token, createRemoteJWKSet(new URL(asMeta.jwks_uri ?? '')), {
        issuer,
        audience: resource,
        typ: 'at+jwt',
      });
      assert.equal(payload.sub, 'dave');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

/** An IdP with `options` on its own loopback port (the issuer is only known once it listens). */
async function rawIdp(
  options: Omit<Parameters<typeof createIdentityProvider>[0], 'issuer'>,
): Promise<{ issuer: string; close(): Promise<void> }> {
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const server = createServer((req, res) => handler?.(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  handler = (await createIdentityProvider({ ...options, issuer })).callback();
  return {
    issuer,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Registers a public client dynamically; returns its client_id. */
async function register(issuer: string, metadata: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${issuer}/reg`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code'],
      response_types: ['code'],
      ...metadata,
    }),
  });
  const body = (await res.json()) as { client_id: string };
  assert.equal(res.status, 201, JSON.stringify(body));
  return body.client_id;
}

function authorizationUrl(issuer: string, clientId: string, redirectUri: string, resource: string): string {
  const url = new URL(`${issuer}/auth`);
  url.search = new URLSearchParams({
    client_id: clientId,
    redirect_uri: redirectUri,
    response_type: 'code',
    scope: 'mcp',
    resource,
    state: 'st',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    code_challenge_method: 'S256',
  }).toString();
  return url.href;
}

/** Follows redirects with cookies until a page (returned) or a redirect to `stopAt` (returned as its URL). */
async function browse(
  jar: CookieJar,
  url: string,
  stopAt: string,
  form?: URLSearchParams,
): Promise<{ url: string; status: number; html: string } | URL> {
  let body = form;
  for (let hop = 0; hop < 15; hop++) {
    const res = await browserStep(jar, url, body);
    body = undefined;
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      await res.body?.cancel();
      const next = new URL(location, url);
      if (next.href.startsWith(stopAt)) return next;
      url = next.href;
      continue;
    }
    return { url, status: res.status, html: await res.text() };
  }
  throw new Error('too many redirects');
}

const formAction = (html: string) => unescapeHtml(/<form method="post" action="([^"]+)"/.exec(html)?.[1] ?? '');

describe('development identity provider: who gets tokens without asking', () => {
  let idp: Awaited<ReturnType<typeof rawIdp>>;
  const resource = 'http://127.0.0.1:9/mcp';

  before(async () => {
    idp = await rawIdp({
      resource,
      clients: [{ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, redirect_uris: ['http://127.0.0.1:9/auth/callback'] }],
    });
  });
  after(() => idp.close());

  async function signInFor(clientId: string, redirectUri: string, user: string) {
    const jar = new CookieJar();
    const login = await browse(jar, authorizationUrl(idp.issuer, clientId, redirectUri, resource), redirectUri);
    assert.ok(!(login instanceof URL), 'a sign-in page first');
    assert.match(login.html, /Development sign-in/);
    const after = await browse(jar, new URL(formAction(login.html), login.url).href, redirectUri, new URLSearchParams({ login: user }));
    return { jar, after };
  }

  test('a client with a non-loopback redirect URI gets a consent page, and no code without Allow', async () => {
    const redirectUri = 'https://evil.example/callback';
    const clientId = await register(idp.issuer, { client_name: 'Totally \u202Egenuine\u202C Helper', redirect_uris: [redirectUri] });
    const { jar, after } = await signInFor(clientId, redirectUri, 'victor');
    assert.ok(!(after instanceof URL), `no redirect to the client before consent: ${String(after instanceof URL ? after.href : '')}`);
    assert.equal(after.status, 200);
    assert.match(after.html, /<h1>Allow Totally genuine Helper to act as you\?<\/h1>/, 'its client_name, bidi controls stripped');
    assert.doesNotMatch(after.html, /\u202E/);
    assert.match(after.html, /You are signed in as <strong>victor<\/strong>/);
    assert.match(after.html, /<code>https:\/\/evil\.example<\/code>/, 'where the tokens would go');
    assert.match(after.html, /<code class="muted small">mcp<\/code>/);
    assert.match(after.html, new RegExp(`<li><code>${resource.replace(/[.:/]/g, '\\$&')}</code></li>`), 'the resource');
    assert.match(after.html, /<link rel="stylesheet" href="\/static\/style.css">/);
    assert.match(after.html, /name="decision" value="allow"/);
    const confirm = new URL(formAction(after.html), after.url).href;

    const getConfirm = await fetch(confirm, { headers: { cookie: jar.header() }, redirect: 'manual' });
    assert.equal(getConfirm.status, 405, 'consent is only given by a POST');
    await getConfirm.body?.cancel();

    const denied = await browse(jar, confirm, redirectUri, new URLSearchParams({ decision: 'deny' }));
    assert.ok(denied instanceof URL, 'Deny returns to the client');
    assert.equal(denied.searchParams.get('error'), 'access_denied');
    assert.equal(denied.searchParams.get('code'), null);

    const again = await browse(jar, authorizationUrl(idp.issuer, clientId, redirectUri, resource), redirectUri);
    assert.ok(!(again instanceof URL), 'still asks: a denial grants nothing');
    assert.match(again.html, /Allow Totally genuine Helper to act as you\?/);
    const allowed = await browse(
      jar,
      new URL(formAction(again.html), again.url).href,
      redirectUri,
      new URLSearchParams({ decision: 'allow' }),
    );
    assert.ok(allowed instanceof URL, 'Allow returns to the client');
    assert.ok(allowed.searchParams.get('code'), 'with a code');
  });

  test("a client whose redirect URIs are all loopback is not asked (as the broker's own client is not)", async () => {
    const redirectUri = 'http://localhost:9/callback';
    const clientId = await register(idp.issuer, {
      client_name: 'Local assistant',
      redirect_uris: [redirectUri, 'http://[::1]:9/callback'],
    });
    const { after } = await signInFor(clientId, redirectUri, 'wendy');
    assert.ok(after instanceof URL && after.searchParams.get('code'), 'a code right after sign-in');
  });

  test('answers CORS only for loopback origins', async () => {
    const preflight = (origin: string) =>
      fetch(`${idp.issuer}/token`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
      });
    const evil = await preflight('https://evil.example');
    assert.equal(evil.headers.get('access-control-allow-origin'), null, 'no CORS for a web page elsewhere');
    const local = `http://127.0.0.1:${await freePort()}`;
    const loopback = await preflight(local);
    assert.equal(loopback.status, 204);
    assert.equal(loopback.headers.get('access-control-allow-origin'), local);

    const clientId = await register(idp.issuer, { redirect_uris: ['http://127.0.0.1:9/cb'] });
    const token = (origin: string) =>
      fetch(`${idp.issuer}/token`, {
        method: 'POST',
        headers: { origin, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code: 'nope',
          client_id: clientId,
          redirect_uri: 'http://127.0.0.1:9/cb',
          code_verifier: 'x'.repeat(43),
        }),
      });
    assert.equal((await token('https://evil.example')).headers.get('access-control-allow-origin'), null);
    assert.equal((await token(local)).headers.get('access-control-allow-origin'), local);
  });

  test('answers no POST from a non-loopback origin with Access-Control-*, whatever the request and however it fails', async () => {
    const clientId = await register(idp.issuer, { redirect_uris: ['http://127.0.0.1:9/cb'] });
    const post = (path: string, form: Record<string, string>, extra: Record<string, string> = {}) =>
      fetch(`${idp.issuer}${path}`, {
        method: 'POST',
        headers: { origin: 'https://evil.example', 'content-type': 'application/x-www-form-urlencoded', ...extra },
        body: new URLSearchParams(form),
      });
    const code = { grant_type: 'authorization_code', code: 'nope', redirect_uri: 'http://127.0.0.1:9/cb', code_verifier: 'x'.repeat(43) };
    const cases: Array<[string, Response]> = [
      ['no client at all', await post('/token', code)],
      ['an unknown client_id', await post('/token', { ...code, client_id: 'no-such-client' })],
      ['no grant_type', await post('/token', { client_id: clientId })],
      [
        'a wrong client secret',
        await post('/token', code, { authorization: `Basic ${Buffer.from(`${CLIENT_ID}:wrong`).toString('base64')}` }),
      ],
      ['an unknown token at revocation', await post('/token/revocation', { token: 'nope', client_id: clientId })],
      ['an empty body at introspection', await post('/token/introspection', {})],
    ];
    for (const [label, res] of cases) {
      await res.body?.cancel();
      const cors: string[] = [];
      res.headers.forEach((value, name) => void (name.startsWith('access-control-') && cors.push(`${name}: ${value}`)));
      assert.deepEqual(cors, [], `${label} (${res.status})`);
    }
  });

  test("the sign-in page uses the broker's stylesheet and names the client by its client_name, not its client_id", async () => {
    const redirectUri = 'http://127.0.0.1:9/callback';
    const clientId = await register(idp.issuer, { client_name: 'Claude <Desktop>\u2067', redirect_uris: [redirectUri] });
    const page = await browse(new CookieJar(), authorizationUrl(idp.issuer, clientId, redirectUri, resource), redirectUri);
    assert.ok(!(page instanceof URL));
    assert.match(page.html, /<link rel="stylesheet" href="\/static\/style.css">/);
    assert.match(
      page.html,
      /<strong>Claude &lt;Desktop&gt;<\/strong> <span class="muted small">\(the name it gives itself\)<\/span> asks you to sign in\./,
    );
    assert.ok(!page.html.includes(clientId), 'the random client_id is not shown');
    assert.doesNotMatch(page.html, /\u2067/);
    const css = await fetch(new URL('/static/style.css', idp.issuer));
    assert.equal(css.status, 200);
    assert.match(css.headers.get('content-type') ?? '', /^text\/css/);
    assert.match(await css.text(), /\.button\.primary/);
  });
});

describe('development identity provider: client ID metadata documents offline', () => {
  const certificate = selfSignedCertificate();
  const resource = 'http://127.0.0.1:9/mcp';
  const redirectUri = 'http://127.0.0.1:9/callback';

  test('a loopback https metadata URL works when loopbackMetadataDocuments is on (dev mode), and only then', async () => {
    const documents = await serveClientMetadata(certificate, 'Metadata document assistant', redirectUri);
    const clientId = documents.clientId;
    const dev = await rawIdp({ resource, clients: [], loopbackMetadataDocuments: true });
    const plain = await rawIdp({ resource, clients: [] });
    try {
      const jar = new CookieJar();
      const login = await browse(jar, authorizationUrl(dev.issuer, clientId, redirectUri, resource), redirectUri);
      assert.ok(!(login instanceof URL));
      assert.equal(login.status, 200, login.html);
      assert.match(login.html, /<strong>Metadata document assistant<\/strong>/);
      const done = await browse(jar, new URL(formAction(login.html), login.url).href, redirectUri, new URLSearchParams({ login: 'xena' }));
      assert.ok(done instanceof URL && done.searchParams.get('code'), 'a code for the metadata-document client');

      const refused = await browse(new CookieJar(), authorizationUrl(plain.issuer, clientId, redirectUri, resource), redirectUri);
      assert.ok(!(refused instanceof URL));
      assert.equal(refused.status, 400, 'without the dev-mode switch oidc-provider refuses to fetch from loopback');
    } finally {
      await dev.close();
      await plain.close();
      await documents.close();
    }
  });
});
