import {
  rateLimit,
  type AugmentedRequest,
  type IncrementResponse,
  type Options,
  type RateLimitRequestHandler,
  type Store as RateLimitStore,
} from 'express-rate-limit';
import { mac } from '../crypto/index.js';
import type { Response } from 'express';
import { BrokerError } from './errors.js';
import { jsonRpcError } from './json-rpc-error.js';

/** Where the counters live: the broker's store provides it (`store.rateLimits`), shared by every instance. */
export interface CounterStore {
  readonly rateLimits: {
    hit(keyHash: string, windowMs: number): Promise<{ hits: number; resetAt: number }>;
    undo(keyHash: string): Promise<void>;
    reset(keyHash: string): Promise<void>;
  };
}

/**
 * express-rate-limit's counters kept in the broker's store, so a limit holds across every
 * instance behind the load balancer (a memory store would give a client one budget per instance).
 * Client keys (IP addresses) are stored only as a keyed hash.
 */
class SharedCounters implements RateLimitStore {
  readonly localKeys = false;
  #windowMs = 60_000;

  constructor(
    private readonly store: CounterStore,
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
export function pageRateLimit(name: string, limitPerMinute: number, store: CounterStore, hashKey: Buffer): RateLimitRequestHandler {
  return rateLimit({
    windowMs: 60_000,
    limit: limitPerMinute,
    skip: () => limitPerMinute === 0,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    store: new SharedCounters(store, hashKey, name),
    handler: (_req, res, next, options) => {
      res.setHeader('Retry-After', String(Math.ceil(options.windowMs / 1000)));
      next(
        new BrokerError(429, 'rate_limited', 'Too many attempts from your network in a short time. Wait a minute, then try again.', {
          heading: 'Too many requests',
        }),
      );
    },
  });
}

/**
 * The per-principal limit on /mcp, run after bearer verification: `key` names the verified caller
 * (an unauthenticated request never gets here). Counted in the shared store like the page limits,
 * so a client gets one budget however many instances it is spread over; answered with 429, a
 * `Retry-After` of the seconds left in the window, and a JSON-RPC error body.
 */
export function mcpRateLimit(
  limitPerMinute: number,
  store: CounterStore,
  hashKey: Buffer,
  key: (res: Response) => string | undefined,
): RateLimitRequestHandler {
  return rateLimit({
    windowMs: 60_000,
    limit: limitPerMinute,
    skip: (_req, res) => limitPerMinute === 0 || key(res) === undefined,
    keyGenerator: (_req, res) => key(res)!,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    store: new SharedCounters(store, hashKey, 'mcp'),
    handler: (req, res, _next, options) => {
      const resetAt = (req as AugmentedRequest).rateLimit?.resetTime?.getTime();
      const retryAfter = resetAt
        ? Math.min(Math.ceil(options.windowMs / 1000), Math.max(1, Math.ceil((resetAt - Date.now()) / 1000)))
        : Math.ceil(options.windowMs / 1000);
      res.setHeader('Retry-After', String(retryAfter));
      jsonRpcError(
        res,
        429,
        -32000,
        `Too many requests: at most ${limitPerMinute} MCP requests a minute per user. Retry after ${retryAfter} seconds.`,
      );
    },
  });
}

/**
 * The per-service limit on the token exchange (`POST /oauth/token`), run after client
 * authentication: `key` names the authenticated service. Shared counters like the others; 429
 * with `Retry-After` and an OAuth-style JSON error body.
 */
export function serviceRateLimit(
  limitPerMinute: number,
  store: CounterStore,
  hashKey: Buffer,
  key: (res: Response) => string | undefined,
  body: (retryAfterSeconds: number) => object,
): RateLimitRequestHandler {
  return rateLimit({
    windowMs: 60_000,
    limit: limitPerMinute,
    skip: (_req, res) => limitPerMinute === 0 || key(res) === undefined,
    keyGenerator: (_req, res) => key(res)!,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    store: new SharedCounters(store, hashKey, 'service'),
    handler: (req, res, _next, options) => {
      const resetAt = (req as AugmentedRequest).rateLimit?.resetTime?.getTime();
      const retryAfter = resetAt
        ? Math.min(Math.ceil(options.windowMs / 1000), Math.max(1, Math.ceil((resetAt - Date.now()) / 1000)))
        : Math.ceil(options.windowMs / 1000);
      res.setHeader('Retry-After', String(retryAfter));
      res.set('Cache-Control', 'no-store').status(429).json(body(retryAfter));
    },
  });
}
