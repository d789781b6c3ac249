/** RFC 6749 §5.2 and RFC 8693 §2.2.2 error codes, plus what this endpoint adds (interaction_required, access_denied). */
export type ExchangeErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'invalid_scope'
  | 'invalid_target'
  | 'unsupported_grant_type'
  | 'temporarily_unavailable'
  | 'rate_limited'
  /** The policy refused this service this user's token (PROVIDERS_FILE `policy:`), or an approver did. */
  | 'access_denied';

/**
 * A refusal of the token endpoint: `description` is safe to send (never a token or a secret);
 * `options.detail` says why for the operator's log and is never sent.
 */
export class ExchangeError extends Error {
  override name = 'ExchangeError';
  constructor(
    readonly code: ExchangeErrorCode,
    readonly description: string,
    readonly options: { status?: number; basicChallenge?: boolean; retryAfterSeconds?: number; detail?: string } = {},
  ) {
    super(description);
  }

  get status(): number {
    return this.options.status ?? (this.code === 'invalid_client' ? 401 : this.code === 'temporarily_unavailable' ? 503 : 400);
  }
}
