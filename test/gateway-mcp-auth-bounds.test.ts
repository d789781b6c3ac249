// An `auth: mcp` upstream's authorization server is whoever the upstream's metadata names: the
// broker reads its answers (metadata, token responses) only up to a bound, as it reads the
// upstream's own metadata (src/gateway/mcp-auth/bounded-fetch.ts). Real parts: a loopback
// upstream and authorization server, openid-client, a SQLite store.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Sealer } from '../src/crypto/index.js';
import { createMcpAuthProvider, discoverUpstreamAuthorization } from '../src/gateway/mcp-auth/index.js';
import { createLogger } from '../src/log.js';
import { ProviderError } from '../src/providers/provider.js';
import { openSqliteStore } from '../src/store/index.js';

const MEGABYTE = 1024 * 1024;

/** Upstream and authorization server on one loopback origin; `huge` pads the AS metadata or its token answer. */
async function world(huge: 'resource' | 'metadata' | 'token') {
  let base = '';
  const tokenRequests: string[] = [];
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', base).pathname;
    const json = (body: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (path === '/mcp') {
      res.writeHead(401, { 'www-authenticate': `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"` });
      return void res.end();
    }
    if (path === '/.well-known/oauth-protected-resource/mcp')
      return json({
        resource: `${base}/mcp`,
        authorization_servers: [base],
        ...(huge === 'resource' ? { padding: 'x'.repeat(MEGABYTE) } : {}),
      });
    if (path === '/.well-known/oauth-authorization-server')
      return json({
        issuer: base,
        authorization_endpoint: `${base}/authorize`,
        token_endpoint: `${base}/token`,
        code_challenge_methods_supported: ['S256'],
        ...(huge === 'metadata' ? { padding: 'x'.repeat(MEGABYTE) } : {}),
      });
    if (path === '/token') {
      tokenRequests.push(req.method ?? '');
      // Chunked, no Content-Length: only reading counts the size.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(`{"access_token":"at-new","token_type":"bearer","expires_in":3600,"padding":"`);
      for (let i = 0; i < 16; i++) res.write('y'.repeat(MEGABYTE / 8));
      return void res.end('"}');
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `${base}/mcp`,
    tokenRequests,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('auth: mcp authorization server answers are bounded', () => {
  test('refuses protected resource metadata of a megabyte', async () => {
    const w = await world('resource');
    try {
      await assert.rejects(
        discoverUpstreamAuthorization(new URL(w.url), { name: 'Tracker', timeoutMs: 5_000 }),
        (err: unknown) => err instanceof ProviderError && err.code === 'unavailable' && /metadata over \d+ bytes/.test(err.detail ?? ''),
      );
    } finally {
      await w.close();
    }
  });

  test('refuses authorization server metadata of a megabyte', async () => {
    const w = await world('metadata');
    try {
      await assert.rejects(
        discoverUpstreamAuthorization(new URL(w.url), { name: 'Tracker', timeoutMs: 5_000 }),
        (err: unknown) => err instanceof ProviderError && err.code === 'unavailable' && /over \d+ bytes/.test(err.detail ?? ''),
      );
    } finally {
      await w.close();
    }
  });

  test('answers a two-megabyte token response with an unavailable error, not tokens', async () => {
    const w = await world('token');
    const dir = mkdtempSync(join(tmpdir(), 'mcp-auth-bounds-'));
    const store = openSqliteStore(join(dir, 'broker.db'));
    try {
      const provider = createMcpAuthProvider({
        id: 'tracker',
        displayName: 'Tracker',
        upstreamUrl: w.url,
        publicUrl: new URL('http://127.0.0.1:9'),
        store,
        sealer: new Sealer([randomBytes(32)]),
        clientId: 'pre-registered',
        timeoutMs: 5_000,
        log: createLogger('error'),
      });
      await assert.rejects(
        provider.refresh({ accessToken: 'at-old', refreshToken: 'rt-old', tokenType: 'bearer', scopes: [] }),
        (err: unknown) => err instanceof ProviderError && err.code === 'unavailable' && /over \d+ bytes/.test(err.detail ?? ''),
      );
      assert.deepEqual(w.tokenRequests, ['POST'], 'the refresh reached the token endpoint once');
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
      await w.close();
    }
  });
});
