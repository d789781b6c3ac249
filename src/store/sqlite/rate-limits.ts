import type { RateLimitRepository } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqliteRateLimitRepository implements RateLimitRepository {
  readonly #hit;

  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
  ) {
    // A window that has run its course starts again at this hit.
    this.#hit = db.prepare(
      `INSERT INTO rate_limit_windows (key_hash, window_start, hits) VALUES (@key, @now, 1)
       ON CONFLICT (key_hash) DO UPDATE SET
         hits = CASE WHEN rate_limit_windows.window_start + @window <= excluded.window_start THEN 1 ELSE rate_limit_windows.hits + 1 END,
         window_start = CASE WHEN rate_limit_windows.window_start + @window <= excluded.window_start THEN excluded.window_start ELSE rate_limit_windows.window_start END
       RETURNING hits, window_start`,
    );
  }

  hit(keyHash: string, windowMs: number, now = Date.now()): Promise<{ hits: number; resetAt: number }> {
    return this.gate.run(() => {
      const row = this.#hit.get({ key: keyHash, now, window: windowMs }) as { hits: number; window_start: number };
      return { hits: row.hits, resetAt: row.window_start + windowMs };
    });
  }

  undo(keyHash: string): Promise<void> {
    return this.gate.run(
      () => void this.db.prepare('UPDATE rate_limit_windows SET hits = max(hits - 1, 0) WHERE key_hash = ?').run(keyHash),
    );
  }

  reset(keyHash: string): Promise<void> {
    return this.gate.run(() => void this.db.prepare('DELETE FROM rate_limit_windows WHERE key_hash = ?').run(keyHash));
  }
}
