/** One permission a provider grants, in words a person can judge. */
export interface ProviderScope {
  name: string;
  description: string;
}

/** The upstream account a token belongs to. */
export interface ProviderAccount {
  id: string;
  login: string;
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

/** What the connect flow needs from a provider; each provider lives in its own folder. */
export interface Provider {
  readonly id: string;
  readonly displayName: string;
  /** A simulated provider (development sandbox): pages and tool results say so. */
  readonly sandbox: boolean;
  readonly scopes: ProviderScope[];
  /** Origin of the page the browser is sent to, for the CSP `form-action` of the consent page. */
  readonly authorizationOrigin: string;
  buildAuthorizationUrl(params: { redirectUri: string; state: string; codeChallenge: string }): URL;
  /** Exchanges the code from `callbackUrl`, validating `state` and PKCE. */
  exchangeCode(params: { callbackUrl: URL; expectedState: string; codeVerifier: string }): Promise<ProviderTokens>;
  fetchAccount(tokens: ProviderTokens): Promise<ProviderAccount>;
  /** Revokes the grant upstream; resolves when it is gone (or was already gone). */
  revoke(tokens: ProviderTokens): Promise<void>;
}
