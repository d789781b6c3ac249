// An `auth: mcp` upstream's authorization server is whoever the upstream's metadata names: the
// broker reads its answers (metadata, token responses) only up to a bound, as it reads the
// upstream's own metadata (src/providers/mcp-auth/bounded-fetch.ts). Real parts: a loopback
// upstream and authorization server, openid-client, a SQLite store.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { discoverUpstreamAuthorization } from '../src/providers/mcp-auth/index.js';
import { ProviderError } from '../src/providers/provider.js';
import { asMetadata, providerBench, staticUpstream } from './support/mcp-auth-bench.js';
import { LOOPBACK_EGRESS } from './support/egress.js';

const MEGABYTE = 1024 * 1024;

/** Upstream and authorization server on one loopback origin; `huge` pads the AS metadata or its token answer. */
function world(huge: 'resource' | 'metadata' | 'token') {
  return staticUpstream(
    (base) => ({
      '/.well-known/oauth-protected-resource/mcp': {
        resource: `${base}/mcp`,
        authorization_servers: [base],
        ...(huge === 'resource' ? { padding: 'x'.repeat(MEGABYTE) } : {}),
      },
      '/.well-known/oauth-authorization-server': {
        ...asMetadata(base),
        ...(huge === 'metadata' ? { padding: 'x'.repeat(MEGABYTE) } : {}),
      },
    }),
    {
      routes: {
        '/token': (_req, res) => {
          // Chunked, no Content-Length: only reading counts the size.
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write(`{"access_token":"at-new","token_type":"bearer","expires_in":3600,"padding":"`);
          for (let i = 0; i < 16; i++) res.write('y'.repeat(MEGABYTE / 8));
          res.end('"}');
        },
      },
    },
  );
}

describe('auth: mcp authorization server answers are bounded', () => {
  const metadata: Array<[string, 'resource' | 'metadata', RegExp]> = [
    ['protected resource metadata', 'resource', /metadata over \d+ bytes/],
    ['authorization server metadata', 'metadata', /over \d+ bytes/],
  ];
  for (const [what, huge, detail] of metadata)
    test(`refuses ${what} of a megabyte`, async () => {
      const w = await world(huge);
      try {
        await assert.rejects(
          discoverUpstreamAuthorization(new URL(`${w.base}/mcp`), { name: 'Tracker', timeoutMs: 5_000, egress: LOOPBACK_EGRESS }),
          (err: unknown) => err instanceof ProviderError && err.code === 'unavailable' && detail.test(err.detail ?? ''),
        );
      } finally {
        await w.close();
      }
    });

  test('answers a two-megabyte token response with an unavailable error, not tokens', async () => {
    const w = await world('token');
    const bench = providerBench();
    try {
      const provider = bench.provider(`${w.base}/mcp`, { clientId: 'pre-registered', timeoutMs: 5_000, egress: LOOPBACK_EGRESS });
      await assert.rejects(
        provider.refresh({ accessToken: 'at-old', refreshToken: 'rt-old', tokenType: 'bearer', scopes: [] }),
        (err: unknown) => err instanceof ProviderError && err.code === 'unavailable' && /over \d+ bytes/.test(err.detail ?? ''),
      );
      assert.deepEqual(
        w.hits.filter((h) => h.endsWith(' /token')),
        ['POST /token'],
        'the refresh reached the token endpoint once',
      );
    } finally {
      await bench.close();
      await w.close();
    }
  });
});
