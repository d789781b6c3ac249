import type { RateLimitRepository } from '../types.js';
import type { Queryable } from './queryable.js';

export class PgRateLimitRepository implements RateLimitRepository {
  constructor(private readonly q: Queryable) {}

  async hit(keyHash: string, windowMs: number, now = Date.now()): Promise<{ hits: number; resetAt: number }> {
    // A window that has run its course starts again at this hit.
    const r = await this.q.query<{ hits: number; window_start: number }>(
      `INSERT INTO rate_limit_windows (key_hash, window_start, hits) VALUES ($1, $2, 1)
       ON CONFLICT (key_hash) DO UPDATE SET
         hits = CASE WHEN rate_limit_windows.window_start + $3 <= excluded.window_start THEN 1 ELSE rate_limit_windows.hits + 1 END,
         window_start = CASE WHEN rate_limit_windows.window_start + $3 <= excluded.window_start THEN excluded.window_start ELSE rate_limit_windows.window_start END
       RETURNING hits, window_start`,
      [keyHash, now, windowMs],
    );
    const row = r.rows[0]!;
    return { hits: row.hits, resetAt: row.window_start + windowMs };
  }

  async undo(keyHash: string): Promise<void> {
    await this.q.query('UPDATE rate_limit_windows SET hits = GREATEST(hits - 1, 0) WHERE key_hash = $1', [keyHash]);
  }

  async reset(keyHash: string): Promise<void> {
    await this.q.query('DELETE FROM rate_limit_windows WHERE key_hash = $1', [keyHash]);
  }
}
