import type { Owner, RefreshLeaseRepository } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqliteRefreshLeaseRepository implements RefreshLeaseRepository {
  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
  ) {}

  acquire(owner: Owner, provider: string, holder: string, ttlMs: number, now = Date.now()): Promise<boolean> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `INSERT INTO refresh_leases (issuer, subject, provider, holder, expires_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (issuer, subject, provider) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
             WHERE refresh_leases.expires_at <= ?`,
          )
          .run(owner.issuer, owner.subject, provider, holder, now + ttlMs, now).changes === 1,
    );
  }

  renew(owner: Owner, provider: string, holder: string, ttlMs: number, now = Date.now()): Promise<boolean> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            'UPDATE refresh_leases SET expires_at = ? WHERE issuer = ? AND subject = ? AND provider = ? AND holder = ? AND expires_at > ?',
          )
          .run(now + ttlMs, owner.issuer, owner.subject, provider, holder, now).changes === 1,
    );
  }

  release(owner: Owner, provider: string, holder: string): Promise<void> {
    return this.gate.run(
      () =>
        void this.db
          .prepare('DELETE FROM refresh_leases WHERE issuer = ? AND subject = ? AND provider = ? AND holder = ?')
          .run(owner.issuer, owner.subject, provider, holder),
    );
  }
}
