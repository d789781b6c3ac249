import type { AuditEvent, AuditRepository, AuditRow, Owner } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqliteAuditRepository implements AuditRepository {
  // Prepared once: every token exchange records a row, and preparing is most of an insert's cost.
  readonly #insert;

  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
  ) {
    this.#insert = db.prepare('INSERT INTO audit_events (at, event, issuer, subject, provider, detail) VALUES (?, ?, ?, ?, ?, ?)');
  }

  record(event: AuditEvent, owner: Owner | undefined, provider: string | undefined, detail?: string): Promise<void> {
    return this.gate.run(
      () =>
        void this.#insert.run(
          Date.now(),
          event,
          owner?.issuer ?? null,
          owner?.subject ?? null,
          provider ?? null,
          detail?.slice(0, 200) ?? null,
        ),
    );
  }

  list(filter: { issuer?: string; subject?: string; event?: AuditEvent } = {}): Promise<AuditRow[]> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `SELECT * FROM audit_events WHERE (@issuer IS NULL OR issuer = @issuer) AND (@subject IS NULL OR subject = @subject) AND (@event IS NULL OR event = @event) ORDER BY id`,
          )
          .all({ issuer: filter.issuer ?? null, subject: filter.subject ?? null, event: filter.event ?? null }) as AuditRow[],
    );
  }

  prune(before: number, limit: number): Promise<number> {
    // Hourly, so prepared when it runs. The oldest first through audit_events_at (at, id): a batch
    // is a range scan of that index.
    return this.gate.run(
      () =>
        this.db
          .prepare('DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE at < ? ORDER BY at, id LIMIT ?)')
          .run(before, limit).changes,
    );
  }
}
