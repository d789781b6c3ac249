import pg from 'pg';
import type { SettledFeed } from '../types.js';
import { SETTLED_CHANNEL } from './pending-connections.js';
import { APPLICATION_NAME, describeError, type ErrorReporter } from './pool.js';

const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 5_000;
/** A LISTEN connection can die without a word (a half-open socket): ask it something this often. */
const HEARTBEAT_MS = 15_000;
const HEARTBEAT_TIMEOUT_MS = 5_000;
const CLOSE_TIMEOUT_MS = 1_000;

interface Subscriber {
  onSettled: (pendingId: string) => void;
  onLive: (live: boolean) => void;
}

/**
 * LISTEN on a connection of its own (a pooled one would be handed to other queries and lose its
 * LISTEN when recycled). Connects on the first subscribe and, whenever that connection is lost,
 * reconnects with backoff until `close()`.
 */
export class PostgresSettledFeed implements SettledFeed {
  readonly #url: string;
  readonly #connectTimeoutMs: number;
  readonly #onError: ErrorReporter;
  readonly #subscribers = new Set<Subscriber>();
  #client: pg.Client | undefined;
  #live = false;
  #started = false;
  #closed = false;
  #retryMs = FIRST_RETRY_MS;
  #retryTimer: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;

  constructor(url: string, options: { connectTimeoutMs: number; onError: ErrorReporter }) {
    this.#url = url;
    this.#connectTimeoutMs = options.connectTimeoutMs;
    this.#onError = options.onError;
  }

  get live(): boolean {
    return this.#live;
  }

  subscribe(onSettled: (pendingId: string) => void, onLive: (live: boolean) => void): () => void {
    const subscriber = { onSettled, onLive };
    this.#subscribers.add(subscriber);
    if (!this.#started && !this.#closed) {
      this.#started = true;
      this.#connect().catch((err: unknown) => this.#onError('postgres_listen_connect_failed', describeError(err)));
    }
    return () => {
      this.#subscribers.delete(subscriber);
    };
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    clearInterval(this.#heartbeat);
    this.#live = false;
    const client = this.#client;
    this.#client = undefined;
    if (client) await endWithin(client, CLOSE_TIMEOUT_MS);
  }

  async #connect(): Promise<void> {
    if (this.#closed) return;
    const client = new pg.Client({
      connectionString: this.#url,
      connectionTimeoutMillis: this.#connectTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      application_name: APPLICATION_NAME,
    });
    // Kept from the start so that `close()` also ends a connection still being opened.
    this.#client = client;
    let lost = false;
    // 'error' and 'end' both come for one loss (and a failed connect also rejects): act once.
    const onLost = (err?: unknown) => {
      if (lost) return;
      lost = true;
      if (this.#client === client) this.#client = undefined;
      clearInterval(this.#heartbeat);
      endWithin(client, CLOSE_TIMEOUT_MS).catch(() => undefined);
      if (this.#closed) return;
      this.#onError('postgres_listen_connection_lost', err === undefined ? { message: 'connection ended' } : describeError(err));
      this.#setLive(false);
      this.#retryTimer = setTimeout(
        () => this.#connect().catch((err: unknown) => this.#onError('postgres_listen_connect_failed', describeError(err))),
        this.#retryMs,
      );
      this.#retryMs = Math.min(this.#retryMs * 2, MAX_RETRY_MS);
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (msg) => {
      if (msg.channel !== SETTLED_CHANNEL || !msg.payload) return;
      for (const s of this.#subscribers) this.#call(() => s.onSettled(msg.payload!));
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${SETTLED_CHANNEL}`);
    } catch (err) {
      onLost(err);
      return;
    }
    if (lost || this.#closed) return;
    this.#retryMs = FIRST_RETRY_MS;
    clearInterval(this.#heartbeat);
    this.#heartbeat = setInterval(() => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`LISTEN connection did not answer within ${HEARTBEAT_TIMEOUT_MS} ms`)),
          HEARTBEAT_TIMEOUT_MS,
        );
      });
      Promise.race([client.query('SELECT 1'), timeout])
        .catch((err: unknown) => onLost(err))
        .finally(() => clearTimeout(timer));
    }, HEARTBEAT_MS);
    this.#heartbeat.unref();
    this.#setLive(true);
  }

  #setLive(live: boolean): void {
    if (this.#live === live) return;
    this.#live = live;
    for (const s of this.#subscribers) this.#call(() => s.onLive(live));
  }

  /** A throwing subscriber must neither starve the others nor take the connection down. */
  #call(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.#onError('settled_feed_subscriber_threw', describeError(err));
    }
  }
}

/**
 * Ends the connection politely, or — when the peer does not answer within `ms` (a blackholed
 * network) — drops the socket, so that shutdown never waits on TCP's own timeouts.
 */
async function endWithin(client: pg.Client, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const ended = client.end().catch(() => {});
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  if ((await Promise.race([ended, timedOut])) === 'timeout') {
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  }
  clearTimeout(timer);
}
