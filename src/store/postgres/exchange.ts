import type { ClientAssertionRepository, Owner, ServiceUsageRepository, ServiceUsageRow } from '../types.js';
import type { Queryable } from './queryable.js';

export class PgClientAssertionRepository implements ClientAssertionRepository {
  constructor(private readonly q: Queryable) {}

  async use(jtiHash: string, expiresAt: number, now = Date.now()): Promise<boolean> {
    // An expired row no longer guards anything (its assertion is refused for its exp): take its place.
    const r = await this.q.query(
      `INSERT INTO used_client_assertions (jti_hash, expires_at) VALUES ($1, $2)
       ON CONFLICT (jti_hash) DO UPDATE SET expires_at = excluded.expires_at WHERE used_client_assertions.expires_at < $3`,
      [jtiHash, expiresAt, now],
    );
    return r.rowCount === 1;
  }
}

export class PgServiceUsageRepository implements ServiceUsageRepository {
  constructor(private readonly q: Queryable) {}

  async touch(owner: Owner, provider: string, serviceId: string, at = Date.now()): Promise<void> {
    await this.q.query(
      `INSERT INTO connection_service_usage (issuer, subject, provider, service_id, last_used_at)
       SELECT issuer, subject, provider, $4::text, $5::bigint FROM connections WHERE issuer = $1 AND subject = $2 AND provider = $3
       ON CONFLICT (issuer, subject, provider, service_id) DO UPDATE SET last_used_at = GREATEST(connection_service_usage.last_used_at, excluded.last_used_at)`,
      [owner.issuer, owner.subject, provider, serviceId, at],
    );
  }

  async list(owner: Owner): Promise<ServiceUsageRow[]> {
    const r = await this.q.query<ServiceUsageRow>(
      `SELECT provider, service_id, last_used_at FROM connection_service_usage WHERE issuer = $1 AND subject = $2 ORDER BY provider, service_id`,
      [owner.issuer, owner.subject],
    );
    return r.rows;
  }
}
