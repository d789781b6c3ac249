import { metrics } from '../observability/metrics.js';

/**
 * The database cannot be reached or is not answering in time (server down or restarting, network
 * gone, pool exhausted, statement timeout). Callers answer "try again shortly" — HTTP 503 on pages,
 * a tool error in MCP — instead of a 500; `/readyz` reports the same condition to the load balancer.
 */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';

  constructor(cause: unknown) {
    super('the database cannot be reached right now', { cause });
    metrics.storeError();
  }
}
