/** One permission a provider grants, in words a person can judge. */
export interface ProviderScope {
  name: string;
  description: string;
  /** Can delete things or take away access for good: flagged (a marker and words) on the consent page. */
  destructive?: boolean;
}

/** The upstream account a token belongs to. */
export interface ProviderAccount {
  id: string;
  login: string;
  /**
   * The provider could not say which account this is (an `auth: mcp` upstream without OpenID
   * Connect): the shared-account and different-account checks cannot apply to it.
   */
  unverified?: boolean;
}

/** Tokens as they are sealed in the store. Never rendered, logged or returned to a client. */
export interface ProviderTokens {
  accessToken: string;
  tokenType: string;
  refreshToken?: string;
  /** Epoch milliseconds. */
  expiresAt?: number;
  scopes: string[];
}

export type ProviderErrorCode =
  | 'access_denied' // the user said no at the provider
  | 'bad_verification_code' // code expired, reused or PKCE mismatch
  | 'unavailable' // provider down, timing out or answering garbage
  | 'unauthorized' // the stored token was rejected
  | 'rate_limited'
  | 'forbidden'
  | 'not_found'
  | 'invalid_request'
  | 'invalid_grant' // a refresh token the provider no longer accepts (used, expired, revoked)
  | 'misconfigured'; // our client credentials or redirect URI are wrong

/** A provider failure, with a message safe to show a person; `detail` is for logs only. */
export class ProviderError extends Error {
  override name = 'ProviderError';
  constructor(
    readonly code: ProviderErrorCode,
    message: string,
    readonly detail?: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/**
 * What a provider says of an access token it is asked about: `refused` (it answered 401),
 * `accepted`, or `unknown` (no way to ask, or no clear answer).
 */
export type TokenVerdict = 'refused' | 'accepted' | 'unknown';

/** What the connect flow and the tools need from a provider. */
export interface Provider {
  readonly id: string;
  readonly displayName: string;
  /** A simulated provider (development sandbox): pages and tool results say so. */
  readonly sandbox: boolean;
  /** Every scope it may be asked for, described for people. */
  readonly scopes: ProviderScope[];
  /** What a plain connect asks for. */
  readonly defaultScopes: string[];
  /** False for providers whose tokens carry no scopes (GitHub Apps): scope checks are skipped. */
  readonly scopesApply: boolean;
  /** Origin of the page the browser is sent to, for the CSP `form-action` of the consent page. */
  readonly authorizationOrigin: string;
  /** Discovers the provider if needed (so pages can name its authorization origin in their CSP). */
  prepare(): Promise<void>;
  /** Told when a browser came back to the callback from the provider, whatever it answered (the client it knows works). */
  authorizationReturned?(): void;
  /** Refresh this long before a token expires. */
  readonly refreshSkewMs: number;
  /** How long to wait before one retry of a fresh token the provider refused with 401; 0 = no retry. */
  readonly freshTokenRetryMs: number;
  /** The scopes in `required` that `granted` does not cover (taking broader scopes into account). */
  missingScopes(granted: string[], required: string[]): string[];
  /** `scopes` without those a broader scope in the list already grants (`public_repo` beside `repo`). */
  withoutImplied(scopes: string[]): string[];
  /** What to send in the authorization request when adding `asked` to an existing grant of `granted`. */
  scopesToRequest(asked: string[], granted: string[]): string[];
  buildAuthorizationUrl(params: { redirectUri: string; state: string; codeChallenge: string; scopes: string[] }): Promise<URL>;
  /** Exchanges the code from `callbackUrl` (validating `state` and PKCE) and reads the account it belongs to. */
  completeAuthorization(params: {
    callbackUrl: URL;
    expectedState: string;
    codeVerifier: string;
    requestedScopes: string[];
  }): Promise<{ tokens: ProviderTokens; account: ProviderAccount }>;
  /** Uses the refresh token; `invalid_grant` when the provider no longer accepts it. */
  refresh(tokens: ProviderTokens): Promise<ProviderTokens>;
  /**
   * Revokes upstream: the whole grant (disconnect), or only this token (a token we decided not to
   * keep, which must not take the user's other connections down with it).
   */
  revoke(tokens: ProviderTokens, what?: 'grant' | 'token'): Promise<{ revoked: boolean }>;
  /**
   * Asks the provider itself whether it accepts `accessToken` (its user API or userinfo), for when
   * a third party refused it; absent where there is no way to ask. Never throws.
   */
  checkAccessToken?(accessToken: string): Promise<TokenVerdict>;
}
