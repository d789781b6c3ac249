// `auth: mcp` discovery (src/providers/mcp-auth/discovery.ts) takes the scope names an upstream's
// 401 challenge and protected resource metadata offer only as RFC 6749 scope-tokens, bounded: they
// become the default scopes of the authorization request and are shown, raw, on the consent page,
// so a bidi override or an invisible character there would make a permission read as another.
// Real parts: a loopback upstream serving its challenge, its metadata and its AS's metadata.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { discoverUpstreamAuthorization } from '../src/providers/mcp-auth/index.js';
import { asMetadata, metadataChallenge, staticUpstream } from './support/mcp-auth-bench.js';
import { LOOPBACK_EGRESS } from './support/egress.js';

/** An upstream whose 401 names `challengeScope` (if any) and whose metadata lists `supported`. */
async function upstream(challengeScope: string | undefined, supported: string[]) {
  const served = await staticUpstream(
    (base) => ({
      '/.well-known/oauth-protected-resource/mcp': { resource: `${base}/mcp`, authorization_servers: [base], scopes_supported: supported },
      '/.well-known/oauth-authorization-server': asMetadata(base),
    }),
    { challenge: (base) => metadataChallenge(base) + (challengeScope === undefined ? '' : `, scope="${challengeScope}"`) },
  );
  return {
    discover: () =>
      discoverUpstreamAuthorization(new URL(`${served.base}/mcp`), { name: 'Tracker', timeoutMs: 3_000, egress: LOOPBACK_EGRESS }),
    close: served.close,
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
