// The example service's own sign-in check: the user's access token must be a JWT from the
// operator's IdP (OIDC_ISSUER), for this service's audience, unexpired, typ at+jwt. The helper
// relies on this verification for the token's `iss` and `sub`, which it finds in `extra`.
import { OAuthError, OAuthErrorCode, type AuthInfo, type OAuthTokenVerifier } from '@modelcontextprotocol/server';
import { createRemoteJWKSet, jwtVerify } from 'jose';

export function idpTokenVerifier(issuer: string, audience: string): OAuthTokenVerifier {
  let jwks: ReturnType<typeof createRemoteJWKSet> | undefined;
  const keys = async () => {
    if (jwks) return jwks;
    const res = await fetch(new URL(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`), { redirect: 'error' });
    const doc = (await res.json()) as { jwks_uri?: unknown; issuer?: unknown };
    if (!res.ok || typeof doc.jwks_uri !== 'string' || doc.issuer !== issuer)
      throw new Error('the identity provider could not be discovered');
    jwks = createRemoteJWKSet(new URL(doc.jwks_uri));
    return jwks;
  };
  return {
    async verifyAccessToken(token: string): Promise<AuthInfo> {
      const jwkSet = await keys();
      try {
        const { payload } = await jwtVerify(token, jwkSet, {
          issuer,
          audience,
          typ: 'at+jwt',
          requiredClaims: ['sub', 'exp'],
          clockTolerance: 5,
          algorithms: ['RS256', 'PS256', 'ES256', 'EdDSA'],
        });
        return {
          token,
          clientId: typeof payload.client_id === 'string' ? payload.client_id : '',
          scopes: typeof payload.scope === 'string' ? payload.scope.split(' ').filter(Boolean) : [],
          expiresAt: payload.exp!,
          resource: new URL(audience),
          extra: { iss: payload.iss, sub: payload.sub },
        };
      } catch {
        throw new OAuthError(OAuthErrorCode.InvalidToken, 'The access token is not valid for this service');
      }
    },
  };
}
