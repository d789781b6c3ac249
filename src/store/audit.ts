import type { Db } from './database.js';

export type AuditEvent = 'connection_created' | 'connection_refreshed' | 'refresh_failed' | 'reauth_required' | 'connection_revoked' | 'binding_refused' | 'keys_rotated';

export interface AuditRow {
  id: number;
  at: number;
  event: AuditEvent;
  issuer: string | null;
  subject: string | null;
  provider: string | null;
  detail: string | null;
}

/** An append-only record of what happened to connections. `detail` is a code or a count, never a secret. */
export class AuditStore {
  constructor(private readonly db: Db) {}

  record(event: AuditEvent, owner: { issuer: string; subject: string } | undefined, provider: string | undefined, detail?: string): void {
    this.db
      .prepare('INSERT INTO audit_events (at, event, issuer, subject, provider, detail) VALUES (?, ?, ?, ?, ?, ?)')
      .run(Date.now(), event, owner?.issuer ?? null, owner?.subject ?? null, provider ?? null, detail?.slice(0, 200) ?? null);
  }

  list(filter: { issuer?: string; subject?: string; event?: AuditEvent } = {}): AuditRow[] {
    return this.db
      .prepare(
        `SELECT * FROM audit_events WHERE (@issuer IS NULL OR issuer = @issuer) AND (@subject IS NULL OR subject = @subject) AND (@event IS NULL OR event = @event) ORDER BY id`,
      )
      .all({ issuer: filter.issuer ?? null, subject: filter.subject ?? null, event: filter.event ?? null }) as AuditRow[];
  }
}
