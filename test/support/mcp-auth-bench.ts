// Parts for the suites that drive an `auth: mcp` provider (src/providers/mcp-auth/) on its own: the
// provider over a SQLite store of its own, loopback servers (http or https) that answer with just
// the metadata a test needs and record every request, and the sign-in at an upstream's
// authorization server up to the callback the provider would receive.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as oidc from 'openid-client';
import { Sealer } from '../../src/crypto/index.js';
import { createMcpAuthProvider, type McpAuthProvider, type McpAuthProviderOptions } from '../../src/providers/mcp-auth/index.js';
import { createLogger } from '../../src/log.js';
import { ProviderError } from '../../src/providers/provider.js';
import { openSqliteStore, type Store } from '../../src/store/index.js';
import { Browser, formSubmission, type Page } from './browser.js';
import type { ProtectedUpstream, UpstreamOptions } from './mcp-auth-upstream.js';
import { startProtectedUpstream } from './mcp-auth-upstream.js';
import { LOOPBACK_EGRESS } from './egress.js';

const quiet = createLogger('error');

/** A provider `tracker` (or several, sharing or not one database) over SQLite stores in a folder of its own. */
export interface ProviderBench {
  sealer: Sealer;
  /** Opens another store on the one database file (another instance of the broker). */
  store(): Store;
  /** The provider for `upstreamUrl` over the first store (opened if need be), `extra` on top of the defaults. */
  provider(upstreamUrl: string, extra?: Partial<McpAuthProviderOptions>): McpAuthProvider;
  close(): Promise<void>;
}

export function providerBench(): ProviderBench {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-auth-'));
  const stores: Store[] = [];
  const sealer = new Sealer([randomBytes(32)]);
  const bench: ProviderBench = {
    sealer,
    store() {
      const s = openSqliteStore(join(dir, 'broker.db'));
      stores.push(s);
      return s;
    },
    provider(upstreamUrl, extra = {}) {
      return createMcpAuthProvider({
        id: 'tracker',
        displayName: 'Tracker',
        upstreamUrl,
        publicUrl: new URL('http://127.0.0.1:9'),
        store: stores[0] ?? bench.store(),
        sealer,
        timeoutMs: 3_000,
        egress: LOOPBACK_EGRESS,
        log: quiet,
        ...extra,
      });
    },
    async close() {
      await Promise.all(stores.map((s) => s.close()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return bench;
}

/** Runs `fn` with a bench and a protected upstream (`options`), closing both after, whatever happens. */
export async function onBench(
  fn: (bench: ProviderBench, upstream: ProtectedUpstream) => Promise<void>,
  options?: UpstreamOptions,
): Promise<void> {
  const bench = providerBench();
  try {
    const upstream = await startProtectedUpstream(options);
    try {
      await fn(bench, upstream);
    } finally {
      await upstream.close();
    }
  } finally {
    await bench.close();
  }
}

/** The ProviderError `p` fails with (any other outcome fails the test). */
export async function refusal(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ProviderError, `a ProviderError, not ${String(err)}`);
    return err;
  }
  assert.fail('expected a refusal, and it succeeded');
}

export interface Served {
  /** scheme://127.0.0.1:port */
  base: string;
  /** `METHOD /path` of every request, in order. */
  hits: string[];
  close(): Promise<void>;
}

export type Handler = (base: string, req: IncomingMessage, res: ServerResponse) => void;

/** `handler` on 127.0.0.1 at a free port, over https with `certificate`, else plain http. */
export async function serve(handler: Handler, certificate?: { key: Buffer; cert: Buffer }): Promise<Served> {
  const hits: string[] = [];
  let base = '';
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    hits.push(`${req.method} ${new URL(req.url ?? '/', base).pathname}`);
    handler(base, req, res);
  };
  const server = certificate ? createHttpsServer(certificate, listener) : createHttpServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `${certificate ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    hits,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export function json(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** The 401 challenge of an upstream at `base` whose protected resource metadata is at the path-inserted well-known URL. */
export const metadataChallenge = (base: string) => `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`;

/** Authorization server metadata for `issuer` whose endpoints are under `endpoints`. */
export const asMetadata = (issuer: string, endpoints = issuer) => ({
  issuer,
  authorization_endpoint: `${endpoints}/authorize`,
  token_endpoint: `${endpoints}/token`,
  code_challenge_methods_supported: ['S256'],
});

export interface StaticUpstreamOptions {
  /** The WWW-Authenticate of the 401 at /mcp (default {@link metadataChallenge}). */
  challenge?: (base: string) => string;
  /** Answers of their own for some paths (a token endpoint, say). */
  routes?: Record<string, (req: IncomingMessage, res: ServerResponse) => void>;
  /** Serve https with this certificate. */
  certificate?: { key: Buffer; cert: Buffer };
}

/**
 * An upstream on loopback whose /mcp answers 401 with a challenge and whose other paths serve the
 * JSON documents `documents(base)` names (read at each request), else 404.
 */
export function staticUpstream(documents: (base: string) => Record<string, unknown>, options: StaticUpstreamOptions = {}): Promise<Served> {
  return serve((base, req, res) => {
    const path = new URL(req.url ?? '/', base).pathname;
    if (path === '/mcp') {
      res.writeHead(401, { 'www-authenticate': (options.challenge ?? metadataChallenge)(base) });
      return void res.end();
    }
    const route = options.routes?.[path];
    if (route) return route(req, res);
    const doc = documents(base)[path];
    if (doc === undefined) return void res.writeHead(404).end();
    json(res, doc);
  }, options.certificate);
}

export interface Authorized {
  callbackUrl: URL;
  state: string;
  codeVerifier: string;
  authorizationUrl: URL;
}

/**
 * Drives the upstream AS for an authorization URL the provider builds: signs in as `login` on each
 * page it shows (each must be a 200), follows its redirects, and stops at the callback (not opened).
 * One `browser` for several authorizations keeps one session at the AS.
 */
export async function authorizeAt(provider: McpAuthProvider, login: string, browser = new Browser()): Promise<Authorized> {
  const state = oidc.randomState();
  const codeVerifier = oidc.randomPKCECodeVerifier();
  const authorizationUrl = await provider.buildAuthorizationUrl({
    redirectUri: provider.redirectUri,
    state,
    codeChallenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
    scopes: [],
  });
  let current = authorizationUrl.href;
  let res = await browser.request(current);
  for (let hops = 0; hops < 20; hops++) {
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel();
      current = new URL(res.headers.get('location')!, current).href;
      if (current.startsWith(provider.redirectUri)) return { callbackUrl: new URL(current), state, codeVerifier, authorizationUrl };
      res = await browser.request(current);
      continue;
    }
    const page: Page = { url: current, status: res.status, headers: res.headers, html: await res.text(), trail: [current] };
    assert.equal(page.status, 200, page.html);
    const { action, body } = formSubmission(page, { fields: { login } });
    res = await browser.request(action, { method: 'POST', body });
    current = action;
  }
  assert.fail(`no callback: ${res.status} ${await res.text()}`);
}
