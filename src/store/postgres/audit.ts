import type { AuditEvent, AuditRepository, AuditRow, Owner } from '../types.js';
import type { Queryable } from './queryable.js';

export class PgAuditRepository implements AuditRepository {
  constructor(private readonly q: Queryable) {}

  async record(event: AuditEvent, owner: Owner | undefined, provider: string | undefined, detail?: string): Promise<void> {
    await this.q.query('INSERT INTO audit_events (at, event, issuer, subject, provider, detail) VALUES ($1, $2, $3, $4, $5, $6)', [
      Date.now(),
      event,
      owner?.issuer ?? null,
      owner?.subject ?? null,
      provider ?? null,
      detail?.slice(0, 200) ?? null,
    ]);
  }

  async list(filter: { issuer?: string; subject?: string; event?: AuditEvent } = {}): Promise<AuditRow[]> {
    const where: string[] = [];
    const values: string[] = [];
    for (const column of ['issuer', 'subject', 'event'] as const) {
      const value = filter[column];
      if (value === undefined) continue;
      values.push(value);
      where.push(`${column} = $${values.length}`);
    }
    const r = await this.q.query<AuditRow>(
      `SELECT * FROM audit_events ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id`,
      values,
    );
    return r.rows;
  }

  async prune(before: number, limit: number): Promise<number> {
    // The oldest first through audit_events_at (at, id): a batch is a range scan of that index.
    const r = await this.q.query(
      'DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE at < $1 ORDER BY at, id LIMIT $2)',
      [before, limit],
    );
    return r.rowCount ?? 0;
  }
}
