import {
  ipKeyGenerator,
  rateLimit,
  type AugmentedRequest,
  type IncrementResponse,
  type Options,
  type RateLimitRequestHandler,
  type Store as RateLimitStore,
} from 'express-rate-limit';
import { mac } from '../crypto/index.js';
import { Lru } from '../lru.js';
import type { NextFunction, Request, Response } from 'express';
import { BrokerError } from './errors.js';
import { jsonRpcError } from './json-rpc-error.js';

/** Where the counters live: the broker's store provides it (`store.rateLimits`), shared by every instance. */
export interface CounterStore {
  readonly rateLimits: {
    hit(keyHash: string, windowMs: number, now?: number, n?: number): Promise<{ hits: number; resetAt: number }>;
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
  /** Recent keys' hashes (an HMAC per request was ~2 % of an exchange's CPU, for the same few keys), bounded under a flood of new addresses. */
  readonly #hashes = new Lru<string, string>(10_000);

  constructor(
    private readonly store: CounterStore,
    private readonly hashKey: Buffer,
    readonly prefix: string,
  ) {}

  init(options: Options): void {
    this.#windowMs = options.windowMs;
  }

  #hash(key: string): string {
    let hash = this.#hashes.get(key);
    if (hash === undefined) {
      hash = mac(this.hashKey, `${this.prefix}:${key}`);
      this.#hashes.set(key, hash);
    }
    return hash;
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

const WINDOW_MS = 60_000;

/** Seconds until `resetAt`, within (0, window]. */
const secondsUntil = (resetAt: number | undefined, windowMs: number) =>
  resetAt ? Math.min(Math.ceil(windowMs / 1000), Math.max(1, Math.ceil((resetAt - Date.now()) / 1000))) : Math.ceil(windowMs / 1000);

/** What sets one limiter apart from the others; everything else (the window, the headers, the shared counters) they have in common. */
interface LimitSpec {
  /** Hits a minute (a window); `0` disables the limiter. */
  limitPerMinute: number;
  /** The window, when it is not a minute. */
  windowMs?: number;
  /** The limit's own counters (their prefix keeps its budget apart from the others'). */
  counters: SharedCounters;
  /** Whose budget a request spends: a verified identity from `res`, undefined for none (not counted). Default: the client address. */
  key?: (res: Response, req: Request) => string | undefined;
  /** Counts only the requests this calls failed (the others are taken back). Default: every request counts. */
  failed?: (res: Response) => boolean;
  /** Answers the 429, `retryAfter` seconds from the end of the window (`Retry-After` is already set). */
  refuse: (res: Response, next: NextFunction, retryAfter: number) => void;
  /** Lets requests through, uncounted, while the counters cannot be reached. Default: the store's error is the answer. */
  openWhenStoreDown?: boolean;
}

/** One express-rate-limit middleware for `spec`: a minute's window, draft-7 `RateLimit` headers, counters shared by every instance. */
function sharedLimit(spec: LimitSpec): RateLimitRequestHandler {
  const { limitPerMinute, key, failed } = spec;
  return rateLimit({
    windowMs: spec.windowMs ?? WINDOW_MS,
    limit: limitPerMinute,
    skip: (req, res) => limitPerMinute === 0 || (key !== undefined && key(res, req) === undefined),
    ...(key ? { keyGenerator: (req: Request, res: Response) => key(res, req)! } : {}),
    ...(failed ? { skipSuccessfulRequests: true, requestWasSuccessful: (_req: Request, res: Response) => !failed(res) } : {}),
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    store: spec.counters,
    passOnStoreError: spec.openWhenStoreDown ?? false,
    handler: (req, res, next, options) => {
      const retryAfter = secondsUntil((req as AugmentedRequest).rateLimit?.resetTime?.getTime(), options.windowMs);
      res.setHeader('Retry-After', String(retryAfter));
      spec.refuse(res, next, retryAfter);
    },
  });
}

/** A 429 with `Cache-Control: no-store` and the JSON `body` for that many seconds. */
const tooManyAsJson = (body: (retryAfterSeconds: number) => object) => (res: Response, _next: NextFunction, retryAfter: number) =>
  void res.set('Cache-Control', 'no-store').status(429).json(body(retryAfter));

/**
 * Per-client-IP limits on the browser routes that start or finish a sign-in or a connection, so a
 * script cannot churn through links, states or the IdP. `name` gives each route group its own
 * budget; the counts are shared by every instance on the same database. `0` disables.
 */
export function pageRateLimit(name: string, limitPerMinute: number, store: CounterStore, hashKey: Buffer): RateLimitRequestHandler {
  return sharedLimit({
    limitPerMinute,
    counters: new SharedCounters(store, hashKey, name),
    refuse: (_res, next) =>
      next(
        new BrokerError(429, 'rate_limited', 'Too many attempts from your network in a short time. Wait a minute, then try again.', {
          heading: 'Too many requests',
        }),
      ),
  });
}

/**
 * At most `limit` tries per `windowMs` on a browser form that checks something short enough to
 * guess (an activation code), per `key`: the signed-in principal or the client address (undefined =
 * not counted here). Every try counts, right or wrong. Shared counters; `0` disables.
 */
export function attemptLimit(
  name: string,
  limit: number,
  windowMs: number,
  store: CounterStore,
  hashKey: Buffer,
  key: (res: Response, req: Request) => string | undefined,
): RateLimitRequestHandler {
  return sharedLimit({
    limitPerMinute: limit,
    windowMs,
    counters: new SharedCounters(store, hashKey, name),
    key,
    refuse: (_res, next, retryAfter) =>
      next(
        new BrokerError(
          429,
          'rate_limited',
          `Too many tries in a short time. Wait ${Math.ceil(retryAfter / 60)} minute${retryAfter > 60 ? 's' : ''}, then try again.`,
          { heading: 'Too many tries' },
        ),
      ),
  });
}

/** The /mcp limit: express-rate-limit's handler, plus the extra calls a JSON-RPC batch carries. */
export type McpRateLimit = RateLimitRequestHandler & {
  /**
   * Counts the calls of a batch beyond the first (which the handler counted) against the same
   * budget, so a batch of 100 is 100 requests. When that crosses the limit it answers the 429
   * itself and resolves true.
   */
  chargeBatch(res: Response, calls: number): Promise<boolean>;
};

const mcpTooMany = (limitPerMinute: number, retryAfter: number) =>
  `Too many requests: at most ${limitPerMinute} MCP requests a minute per user. Retry after ${retryAfter} seconds.`;

/**
 * Per-principal limit on /mcp (after bearer verification): `key` names the verified principal.
 * 429 with `Retry-After` and a JSON-RPC error body; counted in the shared store.
 */
export function mcpRateLimit(
  limitPerMinute: number,
  store: CounterStore,
  hashKey: Buffer,
  key: (res: Response) => string | undefined,
): McpRateLimit {
  const counters = new SharedCounters(store, hashKey, 'mcp');
  // The one /mcp 429, from the handler and from a batch: headers as the other limiters' 429s.
  const refuse = (res: Response, retryAfter: number) =>
    jsonRpcError(res, 429, -32000, mcpTooMany(limitPerMinute, retryAfter), {
      'Retry-After': String(retryAfter),
      'Cache-Control': 'no-store',
    });
  const handler = sharedLimit({ limitPerMinute, counters, key, refuse: (res, _next, retryAfter) => refuse(res, retryAfter) });
  const chargeBatch = async (res: Response, calls: number): Promise<boolean> => {
    const k = key(res);
    if (limitPerMinute === 0 || k === undefined || calls <= 1) return false;
    let last: IncrementResponse | undefined;
    // Bounded: past the limit further hits change nothing but the count.
    for (let i = 1; i < Math.min(calls, limitPerMinute + 1); i++) last = await counters.increment(k);
    if (!last || last.totalHits <= limitPerMinute) return false;
    refuse(res, secondsUntil(last.resetTime?.getTime(), WINDOW_MS));
    return true;
  };
  return Object.assign(handler, { chargeBatch });
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
  return sharedLimit({ limitPerMinute, counters: new SharedCounters(store, hashKey, 'service'), key, refuse: tooManyAsJson(body) });
}

/** The client address as a limit's key: express-rate-limit's own reading (an IPv6 address by its /56). */
export const clientAddress = (req: Request): string => ipKeyGenerator(req.ip ?? '');

/** A limit on failed authentications: express-rate-limit's handler, plus a way to take an arrival back. */
export type FailedAuthenticationLimit = RateLimitRequestHandler & {
  /**
   * The request authenticated: its arrival stops counting now, not when its answer ends, so a
   * request held afterwards (an exchange waiting for its user) keeps no failure slot.
   */
  authenticated(req: Request, res: Response): Promise<void>;
};

const TAKEN_BACK = 'failedAuthenticationTakenBack';

/**
 * Failed authentications at one endpoint (`name` keeps its budget apart), per `key` (default: the
 * client address). Each request counts on arrival, before its credentials are checked, so guesses
 * sent all at once are checked at most the limit's number of times; a request that authenticates,
 * or is answered anything but 401, is taken back. Shared counters; 429 with `Retry-After` and the
 * JSON `body`.
 */
export function failedAuthenticationLimit(
  name: string,
  limitPerMinute: number,
  store: CounterStore,
  hashKey: Buffer,
  body: (retryAfterSeconds: number) => object,
  key: (req: Request, res: Response) => string = clientAddress,
  options: Pick<LimitSpec, 'openWhenStoreDown'> = {},
): FailedAuthenticationLimit {
  const counters = new SharedCounters(store, hashKey, name);
  const handler = sharedLimit({
    limitPerMinute,
    counters,
    key: (res, req) => key(req, res),
    failed: (res) => res.statusCode === 401 || res.locals[TAKEN_BACK] === true,
    refuse: tooManyAsJson(body),
    ...options,
  });
  const authenticated = async (req: Request, res: Response): Promise<void> => {
    if (limitPerMinute === 0 || res.locals[TAKEN_BACK] === true) return;
    res.locals[TAKEN_BACK] = true;
    // As express-rate-limit does: an arrival in a window that has ended is no longer counted anywhere.
    const resetTime = (req as AugmentedRequest).rateLimit?.resetTime;
    if (resetTime && Date.now() >= resetTime.getTime()) return;
    await counters.decrement(key(req, res));
  };
  return Object.assign(handler, { authenticated });
}
