import type { ConfiguredWebhook } from '../config/webhooks.js';
import { randomId } from '../crypto/index.js';
import type { Logger } from '../log.js';
import type { OutboxRow, Store } from '../store/index.js';
import { webhookSignature } from './signature.js';
import { backgroundFailure } from '../observability/process-guards.js';
import { EgressRefused, egressFetch, ResponseTooLarge, type EgressFetch } from '../net/egress-fetch.js';
import { EgressRule } from '../net/egress-rule.js';

export interface DeliveryOptions {
  /** How often the outbox is looked at besides the nudges after a local commit. */
  pollMs?: number;
  /** How long a claim lasts: a row whose sender died is sent again by any instance once it lapses. */
  leaseMs?: number;
  /** How long one attempt may take (connect, send, answer), well inside the lease. */
  attemptTimeoutMs?: number;
  /** Attempts in flight at once, per instance. */
  concurrency?: number;
  /** The wait before the first retry; each next one doubles, up to `maxRetryMs`. */
  firstRetryMs?: number;
  maxRetryMs?: number;
  /** From the event's creation: how long it is retried before it is marked `failed`. */
  giveUpAfterMs?: number;
  /** How long settled rows are kept (delivered, failed) before they are deleted. */
  keepDeliveredMs?: number;
  keepFailedMs?: number;
  /** Where receivers may be (the broker's EGRESS_ALLOW); by default public https addresses only. */
  egress?: EgressRule;
}

const DEFAULTS: Required<DeliveryOptions> = {
  pollMs: 2_000,
  leaseMs: 30_000,
  attemptTimeoutMs: 10_000,
  concurrency: 4,
  firstRetryMs: 10_000,
  maxRetryMs: 3_600_000,
  giveUpAfterMs: 24 * 3_600_000,
  keepDeliveredMs: 24 * 3_600_000,
  keepFailedMs: 30 * 24 * 3_600_000,
  egress: new EgressRule(),
};

/** The most of a receiver's answer read before it is dropped: only its status matters. */
const MAX_RECEIVER_ANSWER_BYTES = 64 * 1024;

const PRUNE_EVERY_MS = 10 * 60_000;

/** When the next attempt of `row` (its `attempts` so far included) should start, or null: give up. */
export function nextAttemptAt(row: Pick<OutboxRow, 'attempts' | 'created_at'>, now: number, options: DeliveryOptions = {}): number | null {
  const o = { ...DEFAULTS, ...options };
  const deadline = row.created_at + o.giveUpAfterMs;
  if (now >= deadline) return null;
  const delay = Math.min(o.firstRetryMs * 2 ** Math.max(0, row.attempts - 1), o.maxRetryMs);
  // The last try falls on the deadline itself, so an event is tried for the whole window.
  return Math.min(now + delay, deadline);
}

/** Why an attempt failed, as a short code fit for a log line and the outbox (never a body or a URL). */
function failureOf(err: unknown): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return 'timeout';
  if (err instanceof EgressRefused) return `egress_refused_${err.reason}`;
  // A long answer is still an answer: the attempt failed on it only because its status was never read.
  if (err instanceof ResponseTooLarge) return 'answer_too_large';
  const cause = err instanceof Error ? (err.cause as { code?: unknown } | undefined) : undefined;
  return typeof cause?.code === 'string' ? cause.code : 'network_error';
}

/**
 * Sends the outbox: claims due rows of the endpoints this instance knows (a lease per row, so two
 * instances never send one event at once), signs each attempt (Standard Webhooks), settles it on
 * a 2xx and otherwise schedules the retry, until the give-up window has passed. Redirects are not
 * followed. Timers are unref'd; `close` stops them, cuts the attempts in flight and waits until
 * their rows are released, each with its attempt uncounted and due at once (the next instance
 * sends it without waiting out a backoff the receiver never earned).
 */
export class WebhookDelivery {
  readonly #options: Required<DeliveryOptions>;
  readonly #endpoints: ReadonlyMap<string, ConfiguredWebhook>;
  readonly #holder = randomId();
  readonly #inflight = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  #pruneTimer: NodeJS.Timeout | undefined;
  #looking: Promise<void> | undefined;
  #lookAgain = false;
  #closed = false;
  /** Cuts the attempts in flight at `close`: their rows are released for a retry instead of holding shutdown. */
  readonly #closing = new AbortController();
  readonly #send: EgressFetch;

  constructor(
    private readonly store: Store,
    endpoints: readonly ConfiguredWebhook[],
    private readonly log: Logger,
    options: DeliveryOptions = {},
  ) {
    this.#options = { ...DEFAULTS, ...options };
    // An attempt must end (or be cut) before its claim lapses, or a second instance could send it meanwhile.
    if (this.#options.attemptTimeoutMs >= this.#options.leaseMs) throw new RangeError('the webhook lease must outlast an attempt');
    this.#endpoints = new Map(endpoints.map((e) => [e.id, e]));
    this.#send = egressFetch(this.#options.egress, { maxBytes: MAX_RECEIVER_ANSWER_BYTES, timeoutMs: this.#options.attemptTimeoutMs });
  }

  /** Starts polling (and delivers whatever an earlier run left). Does nothing without endpoints. */
  start(): void {
    if (this.#endpoints.size === 0 || this.#closed || this.#timer) return;
    this.#timer = setInterval(() => this.nudge(), this.#options.pollMs);
    this.#timer.unref();
    this.#pruneTimer = setInterval(() => this.#prune().catch(backgroundFailure('webhook_prune')), PRUNE_EVERY_MS);
    this.#pruneTimer.unref();
    this.nudge();
  }

  /**
   * Looks at the outbox now (after a local commit wrote rows), or right after the look in progress.
   * Before `start` (a command-line tool writing events), it leaves them to the running brokers.
   */
  nudge(): void {
    if (this.#closed || !this.#timer) return;
    if (this.#looking) {
      this.#lookAgain = true;
      return;
    }
    this.#looking = this.#look().finally(() => {
      this.#looking = undefined;
      if (this.#lookAgain) {
        this.#lookAgain = false;
        this.nudge();
      }
    });
  }

  /** Attempts in flight on this instance. */
  get inflight(): number {
    return this.#inflight.size;
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    clearInterval(this.#pruneTimer);
    this.#closing.abort();
    await this.#looking;
    await Promise.allSettled([...this.#inflight]);
  }

  /** Claims as many due rows as there are free slots, and starts an attempt for each. */
  async #look(): Promise<void> {
    const free = this.#options.concurrency - this.#inflight.size;
    if (free <= 0) return;
    let rows: OutboxRow[];
    try {
      rows = await this.store.webhooks.claim(this.#holder, [...this.#endpoints.keys()], free, this.#options.leaseMs);
    } catch (err) {
      this.log.warn('webhook_claim_failed', { message: err instanceof Error ? err.message : String(err) });
      return;
    }
    for (const row of rows) {
      const attempt = this.#attempt(row).finally(() => {
        this.#inflight.delete(attempt);
        // A slot came free: there may be more waiting.
        this.nudge();
      });
      this.#inflight.add(attempt);
    }
  }

  async #attempt(row: OutboxRow): Promise<void> {
    const endpoint = this.#endpoints.get(row.endpoint)!;
    let failure: string | undefined;
    let cutByShutdown = false;
    try {
      const timestamp = Math.floor(Date.now() / 1000);
      // Under the egress rule: https to a public address unless the operator allowed the receiver's host or network.
      const res = await this.#send(endpoint.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'mcp-connect-broker-webhooks',
          'webhook-id': row.id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': webhookSignature(endpoint.secret, row.id, timestamp, row.payload),
        },
        body: row.payload,
        // A receiver's redirect is a failed attempt (never followed): the signed event never goes where the operator did not send it.
        signal: AbortSignal.any([AbortSignal.timeout(this.#options.attemptTimeoutMs), this.#closing.signal]),
      });
      if (res.status < 200 || res.status > 299) failure = `http_${res.status}`;
    } catch (err) {
      cutByShutdown = this.#closing.signal.aborted;
      failure = failureOf(err);
    }
    // Our own shutdown says nothing about the receiver: no attempt counted, no backoff, due at once elsewhere.
    await (cutByShutdown ? this.#release(row) : this.#settle(row, failure)).catch((err: unknown) =>
      // The claim lapses by itself: the row is sent again (receivers deduplicate on webhook-id).
      this.log.warn('webhook_settle_failed', {
        endpoint: row.endpoint,
        id: row.id,
        message: err instanceof Error ? err.message : String(err),
      }),
    );
  }

  async #settle(row: OutboxRow, failure: string | undefined): Promise<void> {
    const now = Date.now();
    if (failure === undefined) {
      await this.store.webhooks.delivered(row.id, this.#holder, now);
      this.log.info('webhook_delivered', { endpoint: row.endpoint, id: row.id, type: row.event_type, attempts: row.attempts });
      return;
    }
    const retryAt = nextAttemptAt(row, now, this.#options);
    await this.store.webhooks.undelivered(row.id, this.#holder, retryAt, failure, now);
    const fields = { endpoint: row.endpoint, id: row.id, type: row.event_type, attempts: row.attempts, error: failure };
    if (retryAt === null) this.log.error('webhook_failed', fields);
    else this.log.warn('webhook_attempt_failed', { ...fields, retryInMs: retryAt - now });
  }

  async #release(row: OutboxRow): Promise<void> {
    await this.store.webhooks.release(row.id, this.#holder);
    this.log.info('webhook_attempt_released', { endpoint: row.endpoint, id: row.id, type: row.event_type });
  }

  async #prune(): Promise<void> {
    const now = Date.now();
    await this.store.webhooks
      .prune(now - this.#options.keepDeliveredMs, now - this.#options.keepFailedMs)
      .catch((err: unknown) => this.log.warn('webhook_prune_failed', { message: err instanceof Error ? err.message : String(err) }));
  }
}
