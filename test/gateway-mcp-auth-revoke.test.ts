// `revoke(tokens, 'token')` of an `auth: mcp` provider forgets only that token (the Provider
// contract, src/providers/provider.ts): it is what the connect flow calls for a token it refuses to
// keep (the same upstream account already linked to another user, or another account than the
// linked one), and revoking the refresh token there would take the upstream's grant — the one
// another connection works with — down with it (RFC 7009 §2.1; oidc-provider does exactly that).
// Real parts: the test upstream behind its own oidc-provider, openid-client, a SQLite store.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { McpAuthProvider } from '../src/providers/mcp-auth/index.js';
import { Browser } from './support/browser.js';
import { authorizeAt, onBench } from './support/mcp-auth-bench.js';

/** One authorization at the upstream's AS in `browser` (signing in as `login` when it asks), completed. */
async function connect(provider: McpAuthProvider, browser: Browser, login: string) {
  const { callbackUrl, state, codeVerifier } = await authorizeAt(provider, login, browser);
  return provider.completeAuthorization({ callbackUrl, expectedState: state, codeVerifier, requestedScopes: [] });
}

describe('auth: mcp revocation of a token the broker does not keep', () => {
  test("revoke(tokens, 'token') leaves the grant, and the connection made with it, working", () =>
    onBench(async (bench, upstream) => {
      const provider = bench.provider(upstream.url, { timeoutMs: 5_000 });
      // One browser, one session at the AS: both authorizations land on the same grant there.
      const browser = new Browser();
      const kept = await connect(provider, browser, 'grace');
      const refused = await connect(provider, browser, 'grace');
      assert.equal(kept.account.id, refused.account.id);
      assert.ok(kept.tokens.refreshToken && refused.tokens.refreshToken, 'both came with a refresh token');

      // The test AS issues JWT access tokens, which it cannot revoke: it says so (unsupported_token_type), and nothing is revoked.
      assert.deepEqual(await provider.revoke(refused.tokens, 'token'), { revoked: false });
      const revocations = upstream.asRequests.filter((r) => r.path.endsWith('/revoke') || r.path.endsWith('/token/revocation'));
      assert.equal(revocations.length, 1, 'one revocation request');
      assert.notEqual(revocations[0]!.body.get('token'), refused.tokens.refreshToken, 'not the refresh token');

      const refreshed = await provider.refresh(kept.tokens);
      assert.ok(refreshed.accessToken, 'the kept connection still refreshes');

      // A disconnect ('grant', the default) still revokes the refresh token, and with it the grant.
      await provider.revoke(refreshed);
      await assert.rejects(provider.refresh(refreshed));
    }));
});
