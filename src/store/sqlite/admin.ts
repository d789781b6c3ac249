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
import type { Db } from './database.js';
import type { Runner } from './gate.js';

// Never sealed_tokens or key_id: what leaves here is printed by the operator's tools.
const LISTING =
  'rowid AS seq, issuer, subject, provider, account_id, account_login, scopes, created_at, updated_at, last_used_at, status, status_reason';

export class SqliteAdminRepository implements AdminRepository {
  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
  ) {}

  connections(filter: ConnectionListFilter, afterSeq: number, limit: number): Promise<ConnectionListing[]> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `SELECT ${LISTING} FROM connections
             WHERE rowid > @after AND (@issuer IS NULL OR (issuer = @issuer AND subject = @subject))
               AND (@provider IS NULL OR provider = @provider) AND (@status IS NULL OR status = @status)
             ORDER BY rowid LIMIT @limit`,
          )
          .all({
            after: afterSeq,
            issuer: filter.owner?.issuer ?? null,
            subject: filter.owner?.subject ?? null,
            provider: filter.provider ?? null,
            status: filter.status ?? null,
            limit,
          }) as ConnectionListing[],
    );
  }

  audit(filter: AuditExportFilter, after: AuditCursor | undefined, limit: number): Promise<AuditRow[]> {
    // Without a cursor, start at `since` (or the beginning): (at, id) > (since, -1) is at >= since.
    const from = after ?? { at: filter.since ?? Number.MIN_SAFE_INTEGER, id: -1 };
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `SELECT id, at, event, issuer, subject, provider, detail FROM audit_events
             WHERE (at, id) > (@at, @id) AND (@since IS NULL OR at >= @since)
               AND (@issuer IS NULL OR (issuer = @issuer AND subject = @subject))
             ORDER BY at, id LIMIT @limit`,
          )
          .all({
            at: from.at,
            id: from.id,
            since: filter.since ?? null,
            issuer: filter.owner?.issuer ?? null,
            subject: filter.owner?.subject ?? null,
            limit,
          }) as AuditRow[],
    );
  }

  stats(refreshFailuresSince: number, now = Date.now()): Promise<StoreStats> {
    return this.gate.run(() => {
      const connections = this.db
        .prepare('SELECT provider, status, count(*) AS n FROM connections GROUP BY provider, status ORDER BY provider, status')
        .all() as StoreStats['connections'];
      const pending = this.db
        .prepare(
          `SELECT
             (SELECT count(*) FROM pending_connections WHERE status = 'open' AND expires_at > @now) AS open,
             (SELECT count(*) FROM pending_connections WHERE status = 'authorizing' AND updated_at > @flowCutoff) AS authorizing`,
        )
        .get({ now, flowCutoff: now - OAUTH_FLOW_TTL_MS }) as StoreStats['pending'];
      const refreshFailures = this.db
        .prepare(
          `SELECT coalesce(provider, '') AS provider, count(*) AS n FROM audit_events WHERE event = 'refresh_failed' AND at >= ?
           GROUP BY provider ORDER BY provider`,
        )
        .all(refreshFailuresSince) as StoreStats['refreshFailures'];
      return { connections, pending: { open: pending.open, authorizing: pending.authorizing }, refreshFailures };
    });
  }
}
