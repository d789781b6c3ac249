/**
 * A request failure with a message safe to show. `detail` goes to the log only. The single error
 * handler renders it as a page, JSON or a JSON-RPC error depending on the route.
 */
export class BrokerError extends Error {
  override name = 'BrokerError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly options: { heading?: string; detail?: string; action?: { href: string; label: string } } = {},
  ) {
    super(message);
  }
}
