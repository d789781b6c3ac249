import { rateLimit, type IncrementResponse, type Options, type RateLimitRequestHandler, type Store as RateLimitStore } from 'express-rate-limit';
import { mac } from '../crypto/index.js';
import type { Store } from '../store/index.js';
import { renderMessage, type PageContext } from './render.js';

/**
 * express-rate-limit's counters kept in the broker's store, so a limit holds across every
 * instance behind the load balancer (a memory store would give a client one budget per instance).
 * Client keys (IP addresses) are stored only as a keyed hash.
 */
class SharedCounters implements RateLimitStore {
  readonly localKeys = false;
  #windowMs = 60_000;

  constructor(
    private readonly store: Store,
    private readonly hashKey: Buffer,
    readonly prefix: string,
  ) {}

  init(options: Options): void {
    this.#windowMs = options.windowMs;
  }

  #hash(key: string): string {
    return mac(this.hashKey, `${this.prefix}:${key}`);
  }

  async increment(key: string): Promise<IncrementResponse> {
    const { hits, resetAt } = await this.store.rateLimits.hit(this.#hash(key), this.#windowMs);
    return { totalHits: hits, resetTime: new Date(resetAt) };
  }

  decrement(key: string): Promise<void> {
    return this.store.rateLimits.undo(this.#hash(key));
  }

  resetKey(key: string): Promise<void> {
    return this.store.rateLimits.reset(this.#hash(key));
  }
}

/**
 * Per-client-IP limits on the browser routes that start or finish a sign-in or a connection, so a
 * script cannot churn through links, states or the IdP. `name` gives each route group its own
 * budget; the counts are shared by every instance on the same database. `0` disables.
 */
export function pageRateLimit(name: string, limitPerMinute: number, page: PageContext, store: Store, hashKey: Buffer): RateLimitRequestHandler {
  return rateLimit({
    windowMs: 60_000,
    limit: limitPerMinute,
    skip: () => limitPerMinute === 0,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    store: new SharedCounters(store, hashKey, name),
    handler: (_req, res, _next, options) => {
      res.setHeader('Retry-After', String(Math.ceil(options.windowMs / 1000)));
      renderMessage(res, page, 429, 'Too many requests', 'Too many attempts from your network in a short time. Wait a minute, then try again.');
    },
  });
}
