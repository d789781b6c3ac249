import type { Db } from './database.js';

type Owner = { issuer: string; subject: string };

/**
 * Short leases that make a token refresh single-flight across processes: only the holder of an
 * unexpired lease for a connection calls the provider; everyone else waits for the new tokens.
 */
export class RefreshLeaseStore {
  constructor(private readonly db: Db) {}

  /** Takes the lease if it is free or expired; true when `holder` now holds it. */
  acquire(owner: Owner, provider: string, holder: string, ttlMs: number, now = Date.now()): boolean {
    const r = this.db
      .prepare(
        `INSERT INTO refresh_leases (issuer, subject, provider, holder, expires_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (issuer, subject, provider) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
         WHERE refresh_leases.expires_at <= ?`,
      )
      .run(owner.issuer, owner.subject, provider, holder, now + ttlMs, now);
    return r.changes === 1;
  }

  release(owner: Owner, provider: string, holder: string): void {
    this.db.prepare('DELETE FROM refresh_leases WHERE issuer = ? AND subject = ? AND provider = ? AND holder = ?').run(owner.issuer, owner.subject, provider, holder);
  }
}
