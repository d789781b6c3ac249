import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { decodeProtectedHeader, decodeJwt, SignJWT } from 'jose';
import { useStack } from './support/suite.js';
import { assertAccepted, assertRefused, idTokenFromIdp, resourceNamedClient } from './support/token-checks.js';

describe('only access tokens are access tokens', () => {
  const stack = useStack({ idpClients: resourceNamedClient });
  let kid: string;
  before(async () => {
    kid = decodeProtectedHeader(await stack.token('kid-probe')).kid!;
  });

  it('refuses with 401 invalid_token an ID token the IdP issued to a client whose client_id is this resource, with or without a nonce', async () => {
    for (const nonce of [undefined, randomBytes(16).toString('base64url')]) {
      const idToken = await idTokenFromIdp(stack, 'at-ivy', nonce);
      const claims = decodeJwt(idToken);
      // What made it pass before: signed by the IdP's key, our issuer, our audience, a subject, unexpired.
      assert.equal(claims.iss, stack.idp.issuer);
      assert.equal(claims.aud, stack.mcpUrl);
      assert.equal(claims.sub, 'at-ivy');
      assert.equal(decodeProtectedHeader(idToken).kid, kid);
      await assertRefused(stack, idToken, nonce ? 'an ID token with a nonce' : 'an ID token without a nonce');
    }
    await assertAccepted(stack, await stack.token('at-ivy'), 'an access token from the same IdP');
  });

  it('accepts typ at+jwt in any case and as application/at+jwt, and refuses typ JWT or no typ by default', async () => {
    for (const typ of ['at+jwt', 'AT+JWT', 'application/at+jwt', 'Application/AT+JWT']) {
      await assertAccepted(stack, await stack.idp.mintAccessToken({ sub: 'at-typ', typ }), `typ ${typ}`);
    }
    for (const typ of ['JWT', 'jwt', 'application/jwt', 'at+jwt2', '']) {
      await assertRefused(stack, await stack.idp.mintAccessToken({ sub: 'at-typ', typ }), `typ ${JSON.stringify(typ)}`);
    }
  });

  it('refuses an access token that carries a nonce claim', async () => {
    await assertRefused(stack, await stack.idp.mintAccessToken({ sub: 'at-nonce', nonce: 'n-0S6_WzA2Mj' }), 'a nonce');
    await assertRefused(stack, await stack.idp.mintAccessToken({ sub: 'at-nonce', nonce: '' }), 'an empty nonce');
  });

  it('refuses symmetric and unsigned tokens (HS256 under the IdP kid, alg none)', async () => {
    const now = Math.floor(Date.now() / 1000);
    const claims = {
      client_id: 'connect-broker',
      scope: 'mcp',
      iss: stack.idp.issuer,
      sub: 'at-alg',
      aud: stack.mcpUrl,
      iat: now,
      exp: now + 300,
    };
    const hs256 = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256', kid, typ: 'at+jwt' })
      .sign(new TextEncoder().encode('a shared secret that anyone might guess'));
    await assertRefused(stack, hs256, 'HS256');
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt' })).toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;
    await assertRefused(stack, none, 'alg none');
  });

  it('refuses an iat more than a minute in the future and accepts one within the minute', async () => {
    const now = Math.floor(Date.now() / 1000);
    await assertRefused(
      stack,
      await stack.idp.mintAccessToken({ sub: 'at-iat', issuedAt: now + 120, expiresInSeconds: 600 }),
      'iat two minutes ahead',
    );
    await assertRefused(
      stack,
      await stack.idp.mintAccessToken({ sub: 'at-iat', issuedAt: now + 3600, expiresInSeconds: 7200 }),
      'iat an hour ahead',
    );
    await assertAccepted(stack, await stack.idp.mintAccessToken({ sub: 'at-iat', issuedAt: now + 30 }), 'iat 30 s ahead (clock skew)');
  });
});

describe('MCP_ACCESS_TOKEN_TYPES for identity providers that only emit typ JWT', () => {
  const stack = useStack({ env: { MCP_ACCESS_TOKEN_TYPES: 'JWT' }, idpClients: resourceNamedClient });

  it('accepts typ JWT once listed, and then refuses the types not listed, nonces and ID tokens all the same', async () => {
    await assertAccepted(stack, await stack.idp.mintAccessToken({ sub: 'at-jwt', typ: 'JWT' }), 'typ JWT');
    await assertAccepted(stack, await stack.idp.mintAccessToken({ sub: 'at-jwt', typ: 'application/jwt' }), 'typ application/jwt');
    await assertRefused(stack, await stack.idp.mintAccessToken({ sub: 'at-jwt', typ: 'at+jwt' }), 'typ at+jwt, not listed');
    await assertRefused(stack, await stack.idp.mintAccessToken({ sub: 'at-jwt', typ: 'JWT', nonce: 'n-1' }), 'typ JWT with a nonce');
    await assertRefused(stack, await idTokenFromIdp(stack, 'at-jwt', 'n-2'), 'an ID token');
  });
});
