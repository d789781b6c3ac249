/**
 * Every code a {@link BrokerError} may carry: the `error` field of a JSON answer, the log's `code`.
 * `provider_<code>` wraps a provider's own failure code (src/providers/provider.ts, which src/http/
 * may not import).
 */
export type BrokerErrorCode =
  // requests and pages
  | 'csrf'
  | 'not_found'
  | 'invalid_request'
  | 'rate_limited'
  | 'temporarily_unavailable'
  // sign-in
  | 'idp_unavailable'
  | 'invalid_sign_in'
  | 'sign_in_cancelled'
  | 'sign_in_failed'
  // connect links and callbacks
  | 'unknown_provider'
  | 'unknown_link'
  | 'link_declined'
  | 'link_expired'
  | 'link_used'
  | 'link_busy'
  | 'invalid_callback'
  | 'provider_unavailable'
  | 'provider_refused'
  | 'account_changed'
  | 'account_shared'
  // approval pages (src/approvals/)
  | 'unknown_approval'
  | 'approval_closed'
  | 'approval_stale'
  | `provider_${string}`;

/**
 * A request failure with a message safe to show. `detail` goes to the log only. The single error
 * handler renders it as a page, JSON or a JSON-RPC error depending on the route; pages never render
 * an error status themselves.
 */
export class BrokerError extends Error {
  override name = 'BrokerError';
  constructor(
    readonly status: number,
    readonly code: BrokerErrorCode,
    message: string,
    readonly options: { heading?: string; detail?: string; action?: { href: string; label: string } } = {},
  ) {
    super(message);
  }
}
