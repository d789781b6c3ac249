import {
  OAUTH_FLOW_TTL_MS,
  type AdminRepository,
  type AuditCursor,
  type AuditExportFilter,
  type AuditRow,
  type ConnectionListFilter,
  type ConnectionListing,
  type StoreStats,
} from '../types.js';
import type { Queryable } from './queryable.js';

// Never sealed_tokens or key_id: what leaves here is printed by the operator's tools.
const LISTING =
  'seq, issuer, subject, provider, account_id, account_login, scopes, created_at, updated_at, last_used_at, status, status_reason';

export class PgAdminRepository implements AdminRepository {
  constructor(private readonly q: Queryable) {}

  async connections(filter: ConnectionListFilter, afterSeq: number, limit: number): Promise<ConnectionListing[]> {
    const r = await this.q.query<ConnectionListing>(
      `SELECT ${LISTING} FROM connections
       WHERE seq > $1 AND ($2::text IS NULL OR (issuer = $2 AND subject = $3::text))
         AND ($4::text IS NULL OR provider = $4) AND ($5::text IS NULL OR status = $5)
       ORDER BY seq LIMIT $6`,
      [afterSeq, filter.owner?.issuer ?? null, filter.owner?.subject ?? null, filter.provider ?? null, filter.status ?? null, limit],
    );
    return r.rows;
  }

  async audit(filter: AuditExportFilter, after: AuditCursor | undefined, limit: number): Promise<AuditRow[]> {
    // Without a cursor, start at `since` (or the beginning): (at, id) > (since, -1) is at >= since.
    const from = after ?? { at: filter.since ?? Number.MIN_SAFE_INTEGER, id: -1 };
    const r = await this.q.query<AuditRow>(
      `SELECT id, at, event, issuer, subject, provider, detail FROM audit_events
       WHERE (at, id) > ($1::bigint, $2::bigint) AND ($3::bigint IS NULL OR at >= $3)
         AND ($4::text IS NULL OR (issuer = $4 AND subject = $5::text))
       ORDER BY at, id LIMIT $6`,
      [from.at, from.id, filter.since ?? null, filter.owner?.issuer ?? null, filter.owner?.subject ?? null, limit],
    );
    return r.rows;
  }

  async stats(refreshFailuresSince: number, now = Date.now()): Promise<StoreStats> {
    // Three short statements on the pool, not a transaction: counts for a person, not a snapshot.
    // COLLATE "C": byte order, as SQLite sorts, whatever locale the database was created with.
    const [connections, pending, refreshFailures] = await Promise.all([
      this.q.query<StoreStats['connections'][number]>(
        'SELECT provider, status, count(*) AS n FROM connections GROUP BY provider, status ORDER BY provider COLLATE "C", status COLLATE "C"',
      ),
      this.q.query<StoreStats['pending']>(
        `SELECT
           (SELECT count(*) FROM pending_connections WHERE status = 'open' AND expires_at > $1) AS open,
           (SELECT count(*) FROM pending_connections WHERE status = 'authorizing' AND updated_at > $2) AS authorizing`,
        [now, now - OAUTH_FLOW_TTL_MS],
      ),
      this.q.query<StoreStats['refreshFailures'][number]>(
        `SELECT coalesce(provider, '') AS provider, count(*) AS n FROM audit_events WHERE event = 'refresh_failed' AND at >= $1
         GROUP BY provider ORDER BY provider COLLATE "C"`,
        [refreshFailuresSince],
      ),
    ]);
    const p = pending.rows[0]!;
    return { connections: connections.rows, pending: { open: p.open, authorizing: p.authorizing }, refreshFailures: refreshFailures.rows };
  }
}
