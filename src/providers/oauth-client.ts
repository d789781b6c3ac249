// The broker as an OAuth client, over openid-client: the one adapter both kinds of provider make
// their token calls through — a configured provider (oauth-provider.ts) and an `auth: mcp`
// upstream's authorization server (mcp-auth/provider.ts) — so that authorization URLs, the code and
// refresh grants, revocation, the reading of token responses and the errors people see cannot drift
// apart. Discovery and registration, which only `auth: mcp` does, stay in mcp-auth/.
import * as oidc from 'openid-client';
import { egressRefusalIn, ResponseTooLarge } from '../net/egress-fetch.js';
import { oauthMessages as T } from './messages.js';
import { ProviderError, type ProviderTokens } from './provider.js';
import { scopeList } from './scopes.js';

export type TokenResponse = oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers;

/** One provider's authorization server as the adapter calls it. */
export interface OAuthServer {
  config: oidc.Configuration;
  /** The provider's configured name, for the messages people see. */
  name: string;
  /** RFC 8707 `resource` named by the authorization request and every code and refresh grant. */
  resource?: string;
  /** How its token responses list scopes: RFC 6749's spaces, or commas as well (GitHub's "repo,user"). */
  scopeCommas: boolean;
  /** Of the scopes granted (or, where the response lists none, those requested), the ones the connection holds. */
  keepScopes(granted: string[], requested: string[]): string[];
  /** A refresh answered without a refresh_token leaves the one the broker has valid (the server does not rotate them). */
  keepsRefreshToken: boolean;
  /** Told when the server answers a grant with `invalid_client`: it does not know this client (any more). */
  unknownClient?(): Promise<void>;
  /** Runs each call to the server (a trace span named for `operation`); by default, just the call. */
  run?<R>(operation: string, call: () => Promise<R>): Promise<R>;
}

function run<R>(server: OAuthServer, operation: string, call: () => Promise<R>): Promise<R> {
  return server.run ? server.run(operation, call) : call();
}

/** openid-client's timeout (whole seconds, at least one) for a timeout in milliseconds. */
export function timeoutSeconds(timeoutMs: number): number {
  return Math.max(1, Math.ceil(timeoutMs / 1000));
}

/** How the client authenticates at the token endpoint. */
export type ClientAuthMethod = 'none' | 'client_secret_basic' | 'client_secret_post';

/**
 * openid-client's client authentication for `method`. `clientIdInBody` sends the client_id in the
 * form as well with client_secret_basic: the Python SDK's authorization server (FastMCP's) looks the
 * client up by the body's client_id before reading the header, and refuses a request without it.
 * RFC 6749 §2.3.1 does not forbid sending it, and servers that do not need it compare it with the header's.
 */
export function clientAuthentication(method: ClientAuthMethod, secret: string, { clientIdInBody = false } = {}): oidc.ClientAuth {
  if (method === 'none') return oidc.None();
  if (method === 'client_secret_post') return oidc.ClientSecretPost(secret);
  const basic = oidc.ClientSecretBasic(secret);
  if (!clientIdInBody) return basic;
  return (as, client, body, headers) => {
    basic(as, client, body, headers);
    body.set('client_id', client.client_id);
  };
}

/** A new PKCE (RFC 7636) verifier, kept by the broker, and its S256 challenge, sent in the authorization request. */
export async function pkcePair(): Promise<{ verifier: string; challenge: string }> {
  const verifier = oidc.randomPKCECodeVerifier();
  return { verifier, challenge: await oidc.calculatePKCECodeChallenge(verifier) };
}

/** The authorization request's URL: `params` (redirect_uri, state, PKCE, scope…) and the server's `resource`. */
export function authorizationUrl(server: OAuthServer, params: Record<string, string>): URL {
  return oidc.buildAuthorizationUrl(server.config, { ...params, ...(server.resource ? { resource: server.resource } : {}) });
}

/**
 * Exchanges the code in `callbackUrl` (openid-client checks `state`, the PKCE verifier when there is
 * one, RFC 9207 `iss` whenever the server advertises it, and the ID token when one is expected).
 */
export async function codeGrant(
  server: OAuthServer,
  params: { callbackUrl: URL; expectedState: string; codeVerifier?: string; idTokenExpected: boolean; requestedScopes: string[] },
): Promise<{ response: TokenResponse; tokens: ProviderTokens }> {
  let response: TokenResponse;
  try {
    response = await run(server, 'token', () =>
      oidc.authorizationCodeGrant(
        server.config,
        params.callbackUrl,
        {
          expectedState: params.expectedState,
          ...(params.codeVerifier !== undefined ? { pkceCodeVerifier: params.codeVerifier } : {}),
          idTokenExpected: params.idTokenExpected,
        },
        server.resource ? { resource: server.resource } : undefined,
      ),
    );
  } catch (err) {
    throw await refused(server, err, 'code');
  }
  return { response, tokens: tokensFrom(server, response, params.requestedScopes) };
}

async function refused(server: OAuthServer, err: unknown, grant: 'code' | 'refresh'): Promise<ProviderError> {
  if (server.unknownClient && oauthErrorOf(err)?.error === 'invalid_client') await server.unknownClient().catch(() => undefined);
  return grantError(err, grant, server.name);
}

/** Uses the refresh token of `tokens`; `invalid_grant` when there is none or the server no longer accepts it. */
export async function refreshGrant(server: OAuthServer, tokens: ProviderTokens): Promise<ProviderTokens> {
  const refreshToken = tokens.refreshToken;
  if (!refreshToken) throw new ProviderError('invalid_grant', T.noRefreshToken(server.name), 'no refresh token');
  let response: oidc.TokenEndpointResponse;
  try {
    response = await run(server, 'refresh', () =>
      oidc.refreshTokenGrant(server.config, refreshToken, server.resource ? { resource: server.resource } : undefined),
    );
  } catch (err) {
    throw await refused(server, err, 'refresh');
  }
  const next = tokensFrom(server, response, tokens.scopes);
  if (!next.refreshToken && server.keepsRefreshToken) next.refreshToken = refreshToken;
  return next;
}

/**
 * RFC 7009 revocation: of the whole grant (its refresh token, which revokes the grant's access
 * tokens too, §2.1), or of the access token alone — a token the broker decided not to keep must not
 * take down a grant another connection may use. A server that cannot revoke this kind of token
 * (`unsupported_token_type`, §2.2.1: a JWT access token, often) revoked nothing.
 */
export async function revokeToken(server: OAuthServer, tokens: ProviderTokens, what: 'grant' | 'token'): Promise<{ revoked: boolean }> {
  const refresh = what === 'grant' ? tokens.refreshToken : undefined;
  try {
    await run(server, 'revoke', () =>
      oidc.tokenRevocation(server.config, refresh ?? tokens.accessToken, { token_type_hint: refresh ? 'refresh_token' : 'access_token' }),
    );
    return { revoked: true };
  } catch (err) {
    if (oauthErrorOf(err)?.error === 'unsupported_token_type') return { revoked: false };
    throw new ProviderError('unavailable', T.revokeUnconfirmed(server.name), errorDetail(err));
  }
}

/**
 * A token response as the tokens the broker seals. RFC 6749 §5.1: an omitted scope means "as
 * requested"; an empty one is taken the same way (some servers send "" when the access token is for
 * another resource than the OpenID scopes).
 */
export function tokensFrom(server: OAuthServer, response: oidc.TokenEndpointResponse, requestedScopes: string[]): ProviderTokens {
  const listed = typeof response.scope === 'string' ? scopeList(response.scope, { commas: server.scopeCommas }) : [];
  return {
    accessToken: response.access_token,
    tokenType: response.token_type,
    ...(response.refresh_token ? { refreshToken: response.refresh_token } : {}),
    ...(typeof response.expires_in === 'number' && response.expires_in > 0 ? { expiresAt: Date.now() + response.expires_in * 1000 } : {}),
    scopes: server.keepScopes(listed.length ? listed : requestedScopes, requestedScopes),
  };
}

/** The OAuth error of a failed request: from the JSON body, the redirect, or (client authentication over Basic) a 401 challenge. */
export function oauthErrorOf(err: unknown): { error: string; description?: string } | undefined {
  if (err instanceof oidc.ResponseBodyError || err instanceof oidc.AuthorizationResponseError)
    return { error: err.error, ...(err.error_description ? { description: err.error_description } : {}) };
  if (err instanceof oidc.WWWAuthenticateChallengeError) {
    const params = err.cause[0]?.parameters;
    if (params?.error) return { error: params.error, ...(params.error_description ? { description: params.error_description } : {}) };
  }
  return undefined;
}

/** The codes of a client the server does not accept as it is set up (GitHub's own spellings included). */
const CLIENT_REFUSED = new Set([
  'invalid_client',
  'unauthorized_client',
  'unsupported_grant_type',
  'incorrect_client_credentials',
  'redirect_uri_mismatch',
]);
/** The codes of a code or refresh token the server no longer accepts (GitHub's own spellings included). */
const GRANT_REFUSED = new Set(['invalid_grant', 'bad_refresh_token', 'bad_verification_code']);

/** A failed code or refresh grant as the ProviderError people see: the message names the provider; the detail is for logs. */
export function grantError(err: unknown, grant: 'code' | 'refresh', name: string): ProviderError {
  if (err instanceof ProviderError) return err;
  if (egressRefusalIn(err)) return fetchFailure(err, name, grant);
  const oauth = oauthErrorOf(err);
  if (!oauth) return new ProviderError('unavailable', T.garbled(name), errorDetail(err));
  const detail = `${oauth.error}: ${oauth.description ?? ''}`;
  if (oauth.error === 'access_denied') return new ProviderError('access_denied', T.cancelled(name), detail);
  if (GRANT_REFUSED.has(oauth.error))
    return grant === 'refresh'
      ? new ProviderError('invalid_grant', T.refreshRefused(name), detail)
      : new ProviderError('bad_verification_code', T.codeRefused(name), detail);
  if (CLIENT_REFUSED.has(oauth.error)) return new ProviderError('misconfigured', T.clientRefused(name), detail);
  return new ProviderError('unavailable', T.notCompleted(name), detail);
}

/**
 * A fetch that did not happen: refused by the egress rule (`misconfigured`, the log detail says
 * why), an answer over its bound, or unreachable. The message names the provider only.
 */
export function fetchFailure(err: unknown, name: string, what: string): ProviderError {
  const refused = egressRefusalIn(err);
  if (refused) return new ProviderError('misconfigured', T.refusedAddress(name), `${what}: ${refused.message}`);
  if (err instanceof ProviderError) return err;
  if (err instanceof ResponseTooLarge) return new ProviderError('unavailable', T.garbled(name), `${what} ${err.message}`);
  return new ProviderError('unavailable', T.unreachable(name), `${what}: ${errorDetail(err)}`);
}

/** An error as a log detail, with the cause openid-client wraps ours in ("something went wrong" alone says nothing). */
export function errorDetail(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? ` (${err.cause.name}: ${err.cause.message})` : '';
  return `${err.name}: ${err.message}${cause}`;
}
