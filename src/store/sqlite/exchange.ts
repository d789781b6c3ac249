import type { ClientAssertionRepository, Owner, ServiceUsageRepository, ServiceUsageRow } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqliteClientAssertionRepository implements ClientAssertionRepository {
  readonly #use;

  constructor(
    db: Db,
    private readonly gate: Runner,
  ) {
    this.#use = db.prepare(
      `INSERT INTO used_client_assertions (jti_hash, expires_at) VALUES (?, ?)
       ON CONFLICT (jti_hash) DO UPDATE SET expires_at = excluded.expires_at WHERE used_client_assertions.expires_at < ?`,
    );
  }

  use(jtiHash: string, expiresAt: number, now = Date.now()): Promise<boolean> {
    // An expired row no longer guards anything (its assertion is refused for its exp): take its place.
    return this.gate.run(() => this.#use.run(jtiHash, expiresAt, now).changes === 1);
  }
}

export class SqliteServiceUsageRepository implements ServiceUsageRepository {
  // Prepared once: every token exchange touches its row.
  readonly #touch;

  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
    /** Where `touch` runs: the write batch, or the open transaction. */
    private readonly writes: Runner,
  ) {
    this.#touch = db.prepare(
      `INSERT INTO connection_service_usage (issuer, subject, provider, service_id, last_used_at)
       SELECT issuer, subject, provider, ?, ? FROM connections WHERE issuer = ? AND subject = ? AND provider = ?
       ON CONFLICT (issuer, subject, provider, service_id) DO UPDATE SET last_used_at = max(last_used_at, excluded.last_used_at)`,
    );
  }

  touch(owner: Owner, provider: string, serviceId: string, at = Date.now()): Promise<void> {
    return this.writes.run(() => void this.#touch.run(serviceId, at, owner.issuer, owner.subject, provider));
  }

  list(owner: Owner): Promise<ServiceUsageRow[]> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `SELECT provider, service_id, last_used_at FROM connection_service_usage WHERE issuer = ? AND subject = ? ORDER BY provider, service_id`,
          )
          .all(owner.issuer, owner.subject) as ServiceUsageRow[],
    );
  }
}
