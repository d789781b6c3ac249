// `auth: mcp` discovery (src/gateway/mcp-auth/discovery.ts) takes the scope names an upstream's
// 401 challenge and protected resource metadata offer only as RFC 6749 scope-tokens, bounded: they
// become the default scopes of the authorization request and are shown, raw, on the consent page,
// so a bidi override or an invisible character there would make a permission read as another.
// Real parts: a loopback upstream serving its challenge, its metadata and its AS's metadata.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { discoverUpstreamAuthorization } from '../src/gateway/mcp-auth/index.js';

/** An upstream whose 401 names `challengeScope` (if any) and whose metadata lists `supported`. */
async function upstream(challengeScope: string | undefined, supported: string[]) {
  let base = '';
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', base).pathname;
    const json = (body: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (path === '/mcp') {
      const scope = challengeScope === undefined ? '' : `, scope="${challengeScope}"`;
      res.writeHead(401, { 'www-authenticate': `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"${scope}` });
      return void res.end();
    }
    if (path === '/.well-known/oauth-protected-resource/mcp')
      return json({ resource: `${base}/mcp`, authorization_servers: [base], scopes_supported: supported });
    if (path === '/.well-known/oauth-authorization-server')
      return json({
        issuer: base,
        authorization_endpoint: `${base}/authorize`,
        token_endpoint: `${base}/token`,
        code_challenge_methods_supported: ['S256'],
      });
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    discover: () => discoverUpstreamAuthorization(new URL(`${base}/mcp`), { name: 'Tracker', timeoutMs: 3_000 }),
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('auth: mcp discovery of scope names', () => {
  test('passes scope-tokens through as they are', async () => {
    const u = await upstream('issues:read issues:write', ['issues:read', 'issues:write', 'projects']);
    try {
      const d = await u.discover();
      assert.deepEqual(d.challengeScopes, ['issues:read', 'issues:write']);
      assert.deepEqual(d.scopesSupported, ['issues:read', 'issues:write', 'projects']);
    } finally {
      await u.close();
    }
  });

  test('takes no scope list with a bidi override, an invisible character or a space in a name, nor one past the bound', async () => {
    // "read" followed by a right-to-left override: the page would show the rest of the name reversed.
    const bidi = await upstream(undefined, ['issues:read', 'read\u202Eetirw:seussi']);
    // A soft hyphen (0xAD, allowed in a header's obs-text) in the challenge; 40 metadata scopes.
    const soft = await upstream(
      'is\u00ADsues:read',
      Array.from({ length: 40 }, (_, i) => `scope${i}`),
    );
    const spaced = await upstream(undefined, ['issues read']);
    try {
      const a = await bidi.discover();
      assert.deepEqual(a.challengeScopes, []);
      assert.deepEqual(a.scopesSupported, []);
      const b = await soft.discover();
      assert.deepEqual(b.challengeScopes, []);
      assert.deepEqual(b.scopesSupported, []);
      assert.deepEqual((await spaced.discover()).scopesSupported, []);
    } finally {
      await Promise.all([bidi.close(), soft.close(), spaced.close()]);
    }
  });
});
