import type { Owner, RefreshLeaseRepository } from '../types.js';
import type { Queryable } from './queryable.js';

export class PgRefreshLeaseRepository implements RefreshLeaseRepository {
  constructor(private readonly q: Queryable) {}

  async acquire(owner: Owner, provider: string, holder: string, ttlMs: number, now = Date.now()): Promise<boolean> {
    // A concurrent acquirer blocked on the same key re-checks the WHERE against the winner's
    // committed row, so of two racing acquires only one sees a changed row.
    const r = await this.q.query(
      `INSERT INTO refresh_leases (issuer, subject, provider, holder, expires_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (issuer, subject, provider) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
       WHERE refresh_leases.expires_at <= $6`,
      [owner.issuer, owner.subject, provider, holder, now + ttlMs, now],
    );
    return r.rowCount === 1;
  }

  async renew(owner: Owner, provider: string, holder: string, ttlMs: number, now = Date.now()): Promise<boolean> {
    const r = await this.q.query(
      'UPDATE refresh_leases SET expires_at = $1 WHERE issuer = $2 AND subject = $3 AND provider = $4 AND holder = $5 AND expires_at > $6',
      [now + ttlMs, owner.issuer, owner.subject, provider, holder, now],
    );
    return r.rowCount === 1;
  }

  async release(owner: Owner, provider: string, holder: string): Promise<void> {
    await this.q.query('DELETE FROM refresh_leases WHERE issuer = $1 AND subject = $2 AND provider = $3 AND holder = $4', [
      owner.issuer,
      owner.subject,
      provider,
      holder,
    ]);
  }
}
