import { OAuthError, OAuthErrorCode, type AuthInfo, type OAuthTokenVerifier } from '@modelcontextprotocol/server';
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTHeaderParameters, type JWTPayload } from 'jose';
import { M } from './messages.js';
import type { OidcClient } from './oidc-client.js';
import { displayNameFrom, identityProblem, principalFromVerifiedClaims, type Principal } from './principal.js';
import { ID_TOKEN_CLAIMS, subjectOf, tokenScopes, UNTYPED, type SubjectClaim } from './token-claims.js';

/** The identity provider could not be reached to check a token (not the caller's fault). */
export class IdentityProviderUnavailable extends Error {
  override name = 'IdentityProviderUnavailable';
}

/**
 * Signature algorithms an access token may use: public-key ones only. jose then takes a key from the
 * JWKS only where its `kty` (and its `alg`, when the JWK declares one) fits the token's `alg`.
 */
export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** How far in the future an `iat` may lie (clock skew between the IdP and us). */
const MAX_IAT_SKEW_SECONDS = 60;

/** A JOSE `typ` as RFC 7515 compares media types: case-insensitive, `application/` optional. */
export function normalizeTokenType(typ: string): string {
  const lower = typ.toLowerCase();
  return lower.startsWith('application/') ? lower.slice('application/'.length) : lower;
}

/** What an operator may set beside the audience and the accepted `typ` values (each defaults to the strict reading). */
export interface AccessTokenRules {
  /**
   * The resource the broker is (RFC 9728 `resource`, RFC 8707): `AuthInfo.resource` of a token
   * accepted for the broker's own audience. The audience itself when unset; set it apart when the
   * audience is an identifier that is not the `/mcp` URL (an Entra ID application id).
   */
  resource?: string;
  /** The claim that names the principal's subject (`sub` unless configured). */
  subjectClaim?: SubjectClaim;
  /** The broker's own sign-in client id: its ID tokens name it in `aud`, so no token that does opens anything. */
  pageClientId?: string;
}

/** The verified-token cache's key: the audience list and the token, one shape for every caller. */
const rememberKey = (audiences: readonly string[], token: string) => `${JSON.stringify(audiences)}\n${token}`;

/**
 * Verifies MCP access tokens: JWTs signed by a key in the IdP's JWKS, issued by exactly that IdP,
 * for this resource, unexpired. The principal is (`iss`, the subject claim) of the verified token:
 * `sub` unless the operator chose another (`OIDC_SUBJECT_CLAIM`, {@link subjectOf}).
 *
 * Only access tokens: the `typ` header must be one of `acceptedTypes` (RFC 9068's `at+jwt` by
 * default; a token without `typ` only where they list `none`), and a token carrying a claim only ID
 * tokens carry (`nonce`, `at_hash`, …) or naming the broker's own sign-in client in `aud` is refused,
 * since an ID token for a client whose `client_id` is this resource is otherwise a validly signed JWT
 * with the right `iss`, `aud` and `sub`.
 */
export class AccessTokenVerifier implements OAuthTokenVerifier {
  #jwks: ReturnType<typeof createRemoteJWKSet> | undefined;
  /**
   * Tokens this verifier already accepted, until their `exp` (performance, see bench/README.md): a
   * client sends the same access token on every call, and verifying it again (jose checks RS256
   * through WebCrypto) cost 200–260 µs per request, the largest part of the broker's overhead over
   * a bare MCP server. Only successes are kept, keyed by the whole token, and an entry is dropped
   * at `exp` (without the 5 s leeway), so nothing passes that `jwtVerify` would refuse, except a
   * token whose signing key the IdP withdrew meanwhile — which the JWKS cache (10 min) lets through
   * anyway. Bounded: the oldest entry goes first.
   */
  readonly #verified = new Map<string, AuthInfo>();
  static readonly MAX_REMEMBERED = 10_000;

  readonly #acceptedTypes: ReadonlySet<string>;
  /** Whether a token without a `typ` header may pass: only where the operator listed `none`. */
  readonly #untyped: boolean;
  readonly #resource: string;
  readonly #subjectClaim: SubjectClaim;
  readonly #pageClientId: string | undefined;

  constructor(
    private readonly idp: OidcClient,
    private readonly audience: string,
    acceptedTypes: readonly string[] = ['at+jwt'],
    rules: AccessTokenRules = {},
  ) {
    const types = acceptedTypes.map(normalizeTokenType);
    // `none` means "no typ header", never a header that says "none".
    this.#acceptedTypes = new Set(types.filter((t) => t !== UNTYPED));
    this.#untyped = types.includes(UNTYPED);
    this.#resource = rules.resource ?? audience;
    this.#subjectClaim = rules.subjectClaim ?? 'sub';
    this.#pageClientId = rules.pageClientId;
  }

  async #keys(): Promise<ReturnType<typeof createRemoteJWKSet>> {
    if (this.#jwks) return this.#jwks;
    let uri: URL;
    try {
      uri = await this.idp.jwksUri();
    } catch (err) {
      throw new IdentityProviderUnavailable(err instanceof Error ? err.message : String(err));
    }
    this.#jwks = createRemoteJWKSet(uri, { timeoutDuration: 5000, cooldownDuration: 30_000, cacheMaxAge: 600_000 });
    return this.#jwks;
  }

  /** Fetches the IdP's JWKS now (the readiness check), discovering the IdP first if need be. */
  async reloadKeys(): Promise<void> {
    await (await this.#keys()).reload();
  }

  async verifyAccessToken(token: string): Promise<AuthInfo> {
    return this.#remembered(rememberKey([this.audience], token), token, [this.audience]);
  }

  /**
   * Verifies a token by exactly the rules of an MCP access token, except that its `aud` must be one
   * of `audiences` instead of the broker's own (the token exchange: a service's users' tokens).
   * Remembered like an MCP token (bench/README.md, the exchange phase: re-verifying cost a third of
   * the exchange's CPU), keyed by the audience list *and* the token: a token accepted for one
   * service's audiences is looked up afresh for any other list, and never answers for the broker's
   * own audience (both keys name their audience list the same way).
   */
  verifyForAudiences(token: string, audiences: readonly string[]): Promise<AuthInfo> {
    return this.#remembered(rememberKey(audiences, token), token, audiences);
  }

  /** A success kept under `key` until the token's `exp` (without the leeway), or a fresh {@link #verify}. */
  async #remembered(key: string, token: string, audiences: readonly string[]): Promise<AuthInfo> {
    const known = this.#verified.get(key);
    if (known && known.expiresAt! * 1000 > Date.now()) return { ...known };
    if (known) this.#verified.delete(key);
    const info = await this.#verify(token, audiences);
    if (this.#verified.size >= AccessTokenVerifier.MAX_REMEMBERED) this.#verified.delete(this.#verified.keys().next().value!);
    this.#verified.set(key, info);
    return { ...info };
  }

  async #verify(token: string, audiences: readonly string[]): Promise<AuthInfo> {
    const keys = await this.#keys();
    const issuer = await this.idp.issuer();
    let payload: JWTPayload;
    let header: JWTHeaderParameters;
    try {
      ({ payload, protectedHeader: header } = await jwtVerify(token, keys, {
        issuer,
        audience: [...audiences],
        requiredClaims: ['sub', 'exp'],
        clockTolerance: 5,
        algorithms: ASYMMETRIC_ALGORITHMS,
      }));
    } catch (err) {
      if (err instanceof joseErrors.JWKSTimeout || (err instanceof Error && !(err instanceof joseErrors.JOSEError))) {
        throw new IdentityProviderUnavailable(err.message);
      }
      throw new OAuthError(OAuthErrorCode.InvalidToken, describe(err));
    }
    const refusal = this.#notAnAccessToken(header, payload);
    if (refusal) throw new OAuthError(OAuthErrorCode.InvalidToken, refusal);
    const subject = subjectOf(payload, this.#subjectClaim);
    if (subject === undefined)
      throw new OAuthError(OAuthErrorCode.InvalidToken, `The access token has no ${this.#subjectClaim} claim naming its user`);
    const problem = identityProblem(issuer, subject, this.#subjectClaim);
    if (problem) throw new OAuthError(OAuthErrorCode.InvalidToken, problem);
    const principal = principalFromVerifiedClaims(issuer, subject, displayNameFrom(payload));
    const scopes = tokenScopes(payload);
    const clientId = typeof payload.client_id === 'string' ? payload.client_id : typeof payload.azp === 'string' ? payload.azp : '';
    const aud = typeof payload.aud === 'string' ? payload.aud : audiences.find((a) => payload.aud?.includes(a));
    // The broker's own audience may be an identifier that is no URL (an Entra ID application id):
    // the resource it stands for is the broker's (`/mcp`), the one the endpoint compares.
    const resource = (aud ?? audiences[0]) === this.audience ? this.#resource : (aud ?? audiences[0]!);
    // The verified claims travel beside the principal: policy conditions read them (docs/policy.md).
    const claims = Object.freeze({ ...payload });
    return { token, clientId, scopes, expiresAt: payload.exp!, ...resourceOf(resource), extra: { principal, claims } };
  }

  #notAnAccessToken(header: JWTHeaderParameters, payload: JWTPayload): string | undefined {
    const typed = typeof header.typ === 'string';
    if (typed ? !this.#acceptedTypes.has(normalizeTokenType(header.typ!)) : header.typ !== undefined || !this.#untyped) {
      const allowed = [...this.#acceptedTypes, ...(this.#untyped ? ['absent'] : [])].join(' or ');
      return `The token is not an access token (its typ header must be ${allowed})`;
    }
    // An ID token needs no typ, nonce or at_hash (one from a token endpoint often has none of them),
    // but it never says what it grants: a token without typ must carry its scopes.
    if (!typed && tokenScopes(payload).length === 0) return M.untypedWithoutScope;
    const idClaim = ID_TOKEN_CLAIMS.find((c) => payload[c] !== undefined);
    if (idClaim) return M.idTokenClaim(idClaim);
    const aud = typeof payload.aud === 'string' ? [payload.aud] : (payload.aud ?? []);
    if (this.#pageClientId !== undefined && aud.includes(this.#pageClientId)) return M.pageClientAudience;
    if (typeof payload.iat === 'number' && payload.iat > Date.now() / 1000 + MAX_IAT_SKEW_SECONDS)
      return "The access token's iat claim is in the future";
    return undefined;
  }
}

/** `AuthInfo.resource` where the resource is a URL; an identifier that is none (a service's GUID) leaves it out. */
function resourceOf(resource: string): { resource?: URL } {
  const url = URL.parse(resource);
  return url ? { resource: url } : {};
}

function describe(err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return 'The access token has expired';
  if (err instanceof joseErrors.JWTClaimValidationFailed) return `The access token's ${err.claim} claim is not valid for this resource`;
  return 'The access token is not valid';
}

/** The verified token's claims the bearer middleware attached ({} when there are none). */
export function claimsFromAuthInfo(authInfo: AuthInfo | undefined): Record<string, unknown> {
  const claims = authInfo?.extra?.claims;
  return claims && typeof claims === 'object' && !Array.isArray(claims) ? (claims as Record<string, unknown>) : {};
}

/** The principal the bearer middleware attached; absent only if the route was not protected. */
export function principalFromAuthInfo(authInfo: AuthInfo | undefined): Principal | undefined {
  const p = authInfo?.extra?.principal as Principal | undefined;
  return p && typeof p.issuer === 'string' && typeof p.subject === 'string' ? p : undefined;
}
