import {
  AUDIT_INSERT_COLUMNS,
  auditContent,
  auditInsertValues,
  currentHead,
  lastPrunedPerStream,
  type AuditStream,
} from '../audit-chain.js';
import type {
  AuditAnchorRow,
  AuditChainCursor,
  AuditChainHead,
  AuditEvent,
  AuditRepository,
  AuditRow,
  AuditVoidRow,
  ChainedAuditRow,
  Owner,
} from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

const AUDIT_COLUMNS = 'id, at, event, issuer, subject, provider, detail';

export class SqliteAuditRepository implements AuditRepository {
  // Prepared once: every token exchange records a row, and preparing is most of an insert's cost.
  readonly #insert;

  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
    /** Where `record` runs: the write batch (one commit per turn), or the open transaction. */
    private readonly writes: Runner,
    /** This process's stream (src/store/audit-chain.ts); none: rows are written unchained. */
    private readonly stream?: AuditStream,
  ) {
    this.#insert = db.prepare(`INSERT INTO audit_events (${AUDIT_INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  }

  record(event: AuditEvent, owner: Owner | undefined, provider: string | undefined, detail?: string): Promise<void> {
    return this.writes.run(() => {
      const row = auditContent(event, owner, provider, detail);
      // SQLite writes one statement at a time: the head moves only if the row is written (a
      // transaction that rolls back puts it back, src/store/sqlite/index.ts).
      const before = this.stream?.position();
      const link = this.stream?.append(row);
      try {
        this.#insert.run(...auditInsertValues(row, link));
      } catch (err) {
        if (before) this.stream!.restore(before);
        throw err;
      }
    });
  }

  list(filter: { issuer?: string; subject?: string; event?: AuditEvent } = {}): Promise<AuditRow[]> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `SELECT ${AUDIT_COLUMNS} FROM audit_events WHERE (@issuer IS NULL OR issuer = @issuer) AND (@subject IS NULL OR subject = @subject) AND (@event IS NULL OR event = @event) ORDER BY id`,
          )
          .all({ issuer: filter.issuer ?? null, subject: filter.subject ?? null, event: filter.event ?? null }) as AuditRow[],
    );
  }

  prune(before: number, limit: number): Promise<number> {
    // Hourly, so prepared when it runs. The oldest first through audit_events_at (at, id): a batch
    // is a range scan of that index. The anchors move in the same transaction as the delete.
    return this.gate.run(() =>
      this.db.transaction(() => {
        const gone = this.db
          .prepare(
            'DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE at < ? ORDER BY at, id LIMIT ?) RETURNING stream, seq, mac, at',
          )
          .all(before, limit) as Array<{ stream: string | null; seq: number | null; mac: string | null; at: number }>;
        const anchor = this.db.prepare(
          `INSERT INTO audit_chain_anchors (stream, seq, mac, at, key_id, tag) VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, mac = excluded.mac, at = excluded.at, key_id = excluded.key_id, tag = excluded.tag
           WHERE excluded.seq > audit_chain_anchors.seq`,
        );
        for (const a of lastPrunedPerStream(gone)) {
          if (this.stream)
            anchor.run(a.stream, a.seq, a.mac, a.at, this.stream.keyId, this.stream.tag('anchor', a.stream, a.seq, a.mac, a.at));
        }
        return gone.length;
      })(),
    );
  }

  head(): Promise<AuditChainHead | undefined> {
    return this.gate.run(() => currentHead(this.stream));
  }

  chainPage(after: AuditChainCursor | undefined, limit: number): Promise<ChainedAuditRow[]> {
    const from = after ?? { stream: '', seq: -1, id: -1 };
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `SELECT ${AUDIT_COLUMNS}, stream, seq, key_id, mac FROM audit_events WHERE stream IS NOT NULL AND (stream, seq, id) > (?, ?, ?) ORDER BY stream, seq, id LIMIT ?`,
          )
          .all(from.stream, from.seq, from.id, limit) as ChainedAuditRow[],
    );
  }

  chainMarks(): Promise<{ anchors: AuditAnchorRow[]; voids: AuditVoidRow[] }> {
    return this.gate.run(() => ({
      anchors: this.db
        .prepare('SELECT stream, seq, mac, at, key_id, tag FROM audit_chain_anchors ORDER BY stream')
        .all() as AuditAnchorRow[],
      voids: this.db.prepare('SELECT stream, seq, mac, key_id, tag FROM audit_chain_voids ORDER BY stream, seq').all() as AuditVoidRow[],
    }));
  }

  unchained(): Promise<{ before: number; after: number; firstAfter: number | null }> {
    return this.gate.run(() => {
      const first = (this.db.prepare('SELECT min(id) AS id FROM audit_events WHERE stream IS NOT NULL').get() as { id: number | null }).id;
      const before = this.db
        .prepare('SELECT count(*) AS n FROM audit_events WHERE stream IS NULL AND (? IS NULL OR id < ?)')
        .get(first, first) as { n: number };
      const after =
        first === null
          ? { n: 0, id: null }
          : (this.db.prepare('SELECT count(*) AS n, min(id) AS id FROM audit_events WHERE stream IS NULL AND id > ?').get(first) as {
              n: number;
              id: number | null;
            });
      return { before: before.n, after: after.n, firstAfter: after.id };
    });
  }
}
