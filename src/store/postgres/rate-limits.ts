import type { RateLimitRepository } from '../types.js';
import type { Queryable } from './queryable.js';

// Adds each key's hits of a batch; a window that has run its course starts again with them. Keys
// come sorted, so two instances' batches lock their rows in one order (no deadlock between them).
const HIT = `INSERT INTO rate_limit_windows (key_hash, window_start, hits)
  SELECT key_hash, $2::bigint, hits FROM unnest($1::text[], $3::int[]) AS b(key_hash, hits)
  ON CONFLICT (key_hash) DO UPDATE SET
    hits = CASE WHEN rate_limit_windows.window_start + $4 <= excluded.window_start THEN excluded.hits ELSE rate_limit_windows.hits + excluded.hits END,
    window_start = CASE WHEN rate_limit_windows.window_start + $4 <= excluded.window_start THEN excluded.window_start ELSE rate_limit_windows.window_start END
  RETURNING key_hash, hits, window_start`;

const UNDO = `UPDATE rate_limit_windows w SET hits = GREATEST(w.hits - b.n, 0)
  FROM unnest($1::text[], $2::int[]) AS b(key_hash, n) WHERE w.key_hash = b.key_hash`;

interface Waiter<T> {
  resolve: (value: T) => void;
  reject: (err: unknown) => void;
}

/**
 * The hits of one window length waiting for the next statement: per key, its callers in order. They
 * count at the batch's first hit's time (they arrived within one turn).
 */
interface HitBatch {
  now: number;
  keys: Map<string, Array<Waiter<{ hits: number; resetAt: number }> & { n: number }>>;
}

/**
 * Over the pool, the hits (and undos) of one event-loop turn are one statement per window length,
 * sent after the turn: each key's hits are added at once and every caller gets its own place among
 * them (the count just after its hit), so the count stays exact across instances at one round trip
 * per turn instead of one per request. Inside a transaction a hit is its own statement, at once.
 */
export class PgRateLimitRepository implements RateLimitRepository {
  #hits = new Map<number, HitBatch>();
  #undos = new Map<string, Array<Waiter<void>>>();
  #scheduled = false;

  constructor(private readonly q: Queryable) {}

  hit(keyHash: string, windowMs: number, now = Date.now(), n = 1): Promise<{ hits: number; resetAt: number }> {
    return new Promise((resolve, reject) => {
      let batch = this.#hits.get(windowMs);
      if (!batch) this.#hits.set(windowMs, (batch = { now, keys: new Map() }));
      const waiters = batch.keys.get(keyHash) ?? [];
      waiters.push({ resolve, reject, n });
      batch.keys.set(keyHash, waiters);
      this.#schedule();
    });
  }

  undo(keyHash: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const waiters = this.#undos.get(keyHash) ?? [];
      waiters.push({ resolve, reject });
      this.#undos.set(keyHash, waiters);
      this.#schedule();
    });
  }

  async reset(keyHash: string): Promise<void> {
    await this.q.query('DELETE FROM rate_limit_windows WHERE key_hash = $1', [keyHash]);
  }

  #schedule(): void {
    // #send settles every caller with its statement's outcome: nothing is left to report here.
    if (this.q.inTransaction) return void this.#send().catch(() => {});
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#send().catch(() => {});
    });
  }

  /** Sends what is waiting: one statement per window length, one for the undos; settles every caller. */
  async #send(): Promise<void> {
    const hits = this.#hits;
    const undos = this.#undos;
    this.#hits = new Map();
    this.#undos = new Map();
    const sent: Array<Promise<void>> = [];
    for (const [windowMs, batch] of hits) sent.push(this.#sendHits(windowMs, batch));
    if (undos.size > 0) {
      const keys = [...undos.keys()].sort();
      sent.push(
        this.q.query(UNDO, [keys, keys.map((k) => undos.get(k)!.length)]).then(
          () => undos.forEach((ws) => ws.forEach((w) => w.resolve())),
          (err: unknown) => undos.forEach((ws) => ws.forEach((w) => w.reject(err))),
        ),
      );
    }
    await Promise.all(sent);
  }

  async #sendHits(windowMs: number, batch: HitBatch): Promise<void> {
    const keys = [...batch.keys.keys()].sort();
    try {
      const r = await this.q.query<{ key_hash: string; hits: number; window_start: string | number }>(HIT, [
        keys,
        batch.now,
        keys.map((k) => batch.keys.get(k)!.reduce((sum, w) => sum + w.n, 0)),
        windowMs,
      ]);
      for (const row of r.rows) {
        const waiters = batch.keys.get(row.key_hash)!;
        batch.keys.delete(row.key_hash);
        const resetAt = Number(row.window_start) + windowMs;
        // The key's hits of this batch are the last of its count, in the callers' order.
        let before = row.hits - waiters.reduce((sum, w) => sum + w.n, 0);
        for (const w of waiters) w.resolve({ hits: (before += w.n), resetAt });
      }
      if (batch.keys.size > 0) throw new Error('the rate-limit counters did not answer for every key');
    } catch (err) {
      batch.keys.forEach((ws) => ws.forEach((w) => w.reject(err)));
    }
  }
}
