import type { RateLimitRepository } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqliteRateLimitRepository implements RateLimitRepository {
  readonly #hit;
  readonly #undo;
  /**
   * Hits of one key (and window) waiting for the same batch: one statement adds them all, and each
   * caller gets its own place among them (the count just after its hits). Undos alike.
   */
  readonly #hits = new Map<string, { n: number; done: Promise<{ hits: number; windowStart: number; n: number }> }>();
  readonly #undos = new Map<string, { n: number; done: Promise<void> }>();

  constructor(
    private readonly db: Db,
    /** The write batch (src/store/sqlite/write-batch.ts), or the open transaction. */
    private readonly gate: Runner,
  ) {
    // A window that has run its course starts again with these hits.
    this.#hit = db.prepare(
      `INSERT INTO rate_limit_windows (key_hash, window_start, hits) VALUES (@key, @now, @n)
       ON CONFLICT (key_hash) DO UPDATE SET
         hits = CASE WHEN rate_limit_windows.window_start + @window <= excluded.window_start THEN excluded.hits ELSE rate_limit_windows.hits + excluded.hits END,
         window_start = CASE WHEN rate_limit_windows.window_start + @window <= excluded.window_start THEN excluded.window_start ELSE rate_limit_windows.window_start END
       RETURNING hits, window_start`,
    );
    this.#undo = db.prepare('UPDATE rate_limit_windows SET hits = max(hits - ?, 0) WHERE key_hash = ?');
  }

  async hit(keyHash: string, windowMs: number, now = Date.now(), n = 1): Promise<{ hits: number; resetAt: number }> {
    const id = `${windowMs}:${keyHash}`;
    let group = this.#hits.get(id);
    // The hits of this call come after those already in the group: `before` of them.
    let before = 0;
    if (group) {
      before = group.n;
      group.n += n;
    } else {
      // Counted before it is queued: inside a transaction the statement runs at once.
      const g = { n, done: undefined as unknown as Promise<{ hits: number; windowStart: number; n: number }> };
      this.#hits.set(id, g);
      // Runs when its batch does: the group closes then, with every hit that joined it.
      g.done = this.gate.run(() => {
        this.#hits.delete(id);
        const row = this.#hit.get({ key: keyHash, now, window: windowMs, n: g.n }) as { hits: number; window_start: number };
        return { hits: row.hits, windowStart: row.window_start, n: g.n };
      });
      group = g;
    }
    const { hits, windowStart, n: total } = await group.done;
    return { hits: hits - total + before + n, resetAt: windowStart + windowMs };
  }

  undo(keyHash: string): Promise<void> {
    const group = this.#undos.get(keyHash);
    if (group) {
      group.n++;
      return group.done;
    }
    const g = { n: 1, done: undefined as unknown as Promise<void> };
    this.#undos.set(keyHash, g);
    g.done = this.gate.run(() => {
      this.#undos.delete(keyHash);
      this.#undo.run(g.n, keyHash);
    });
    return g.done;
  }

  reset(keyHash: string): Promise<void> {
    return this.gate.run(() => void this.db.prepare('DELETE FROM rate_limit_windows WHERE key_hash = ?').run(keyHash));
  }
}
