// `revoke(tokens, 'token')` of an `auth: mcp` provider forgets only that token (the Provider
// contract, src/providers/provider.ts): it is what the connect flow calls for a token it refuses to
// keep (the same upstream account already linked to another user, or another account than the
// linked one), and revoking the refresh token there would take the upstream's grant — the one
// another connection works with — down with it (RFC 7009 §2.1; oidc-provider does exactly that).
// Real parts: the test upstream behind its own oidc-provider, openid-client, a SQLite store.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { Sealer } from '../src/crypto/index.js';
import { createMcpAuthProvider, type McpAuthProvider } from '../src/gateway/mcp-auth/index.js';
import { createLogger } from '../src/log.js';
import { openSqliteStore } from '../src/store/index.js';
import { Browser, formSubmission } from './support/browser.js';
import { startProtectedUpstream } from './support/mcp-auth-upstream.js';

/** One authorization at the upstream's AS in `browser` (signing in as `login` when it asks), completed. */
async function connect(provider: McpAuthProvider, browser: Browser, login: string) {
  const state = oidc.randomState();
  const codeVerifier = oidc.randomPKCECodeVerifier();
  const url = await provider.buildAuthorizationUrl({
    redirectUri: provider.redirectUri,
    state,
    codeChallenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
    scopes: [],
  });
  let current = url.href;
  let res = await browser.request(current);
  for (let hops = 0; hops < 20; hops++) {
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel();
      current = new URL(res.headers.get('location')!, current).href;
      if (current.startsWith(provider.redirectUri))
        return provider.completeAuthorization({ callbackUrl: new URL(current), expectedState: state, codeVerifier, requestedScopes: [] });
      res = await browser.request(current);
      continue;
    }
    const page = await browser.open(current);
    const { action, body } = formSubmission(page, { fields: { login } });
    res = await browser.request(action, { method: 'POST', body });
    current = action;
  }
  assert.fail('no callback');
}

describe('auth: mcp revocation of a token the broker does not keep', () => {
  test("revoke(tokens, 'token') leaves the grant, and the connection made with it, working", async () => {
    const upstream = await startProtectedUpstream();
    const dir = mkdtempSync(join(tmpdir(), 'mcp-auth-revoke-'));
    const store = openSqliteStore(join(dir, 'broker.db'));
    try {
      const provider = createMcpAuthProvider({
        id: 'tracker',
        displayName: 'Tracker',
        upstreamUrl: upstream.url,
        publicUrl: new URL('http://127.0.0.1:9'),
        store,
        sealer: new Sealer([randomBytes(32)]),
        timeoutMs: 5_000,
        log: createLogger('error'),
      });
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
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
      await upstream.close();
    }
  });
});
