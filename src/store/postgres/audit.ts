import {
  AUDIT_INSERT_COLUMNS,
  auditContent,
  auditInsertValues,
  currentHead,
  lastPrunedPerStream,
  type AuditStream,
  type ChainLink,
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
import type { Queryable } from './queryable.js';

const AUDIT_COLUMNS = 'id, at, event, issuer, subject, provider, detail';

/**
 * This instance's stream, and where the rows it chains inside an open transaction are noted: if that
 * transaction rolls back, each becomes a void (other rows of the stream may already chain onto it).
 */
export interface PgAuditChain {
  stream: AuditStream;
  /** Set inside `store.transaction`: the links chained in it so far. */
  chainedInTransaction?: ChainLink[];
}

export class PgAuditRepository implements AuditRepository {
  constructor(
    private readonly q: Queryable,
    private readonly chain?: PgAuditChain,
  ) {}

  async record(event: AuditEvent, owner: Owner | undefined, provider: string | undefined, detail?: string): Promise<void> {
    const row = auditContent(event, owner, provider, detail);
    // Chained now, in this turn: the head is in memory, and concurrent records take the next places.
    const link = this.chain?.stream.append(row);
    if (link) this.chain!.chainedInTransaction?.push(link);
    try {
      await this.q.query(
        `INSERT INTO audit_events (${AUDIT_INSERT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
        auditInsertValues(row, link),
      );
    } catch (err) {
      // Outside a transaction the row is lost on its own: leave its place and MAC (best effort).
      if (link && !this.chain!.chainedInTransaction) await writeVoids(this.q, this.chain!.stream, [link]).catch(() => {});
      throw err;
    }
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
      `SELECT ${AUDIT_COLUMNS} FROM audit_events ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id`,
      values,
    );
    return r.rows;
  }

  async prune(before: number, limit: number): Promise<number> {
    // The oldest first through audit_events_at (at, id): a batch is a range scan of that index. The
    // anchors move in the same transaction; two instances pruning at once keep the higher place.
    return this.q.atomically(async (q) => {
      const gone = await q.query<{ stream: string | null; seq: number | null; mac: string | null; at: number }>(
        'DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE at < $1 ORDER BY at, id LIMIT $2) RETURNING stream, seq, mac, at',
        [before, limit],
      );
      const stream = this.chain?.stream;
      if (stream) {
        for (const a of lastPrunedPerStream(gone.rows)) {
          await q.query(
            `INSERT INTO audit_chain_anchors (stream, seq, mac, at, key_id, tag) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, mac = excluded.mac, at = excluded.at, key_id = excluded.key_id, tag = excluded.tag
             WHERE excluded.seq > audit_chain_anchors.seq`,
            [a.stream, a.seq, a.mac, a.at, stream.keyId, stream.tag('anchor', a.stream, a.seq, a.mac, a.at)],
          );
        }
      }
      return gone.rowCount ?? 0;
    });
  }

  async head(): Promise<AuditChainHead | undefined> {
    return currentHead(this.chain?.stream);
  }

  async chainPage(after: AuditChainCursor | undefined, limit: number): Promise<ChainedAuditRow[]> {
    const from = after ?? { stream: '', seq: -1, id: -1 };
    // COLLATE "C": the same byte order as SQLite's, whatever the database's collation.
    const r = await this.q.query<ChainedAuditRow>(
      `SELECT ${AUDIT_COLUMNS}, stream, seq, key_id, mac FROM audit_events
       WHERE stream IS NOT NULL AND (stream COLLATE "C", seq, id) > ($1 COLLATE "C", $2, $3)
       ORDER BY stream COLLATE "C", seq, id LIMIT $4`,
      [from.stream, from.seq, from.id, limit],
    );
    return r.rows;
  }

  async chainMarks(): Promise<{ anchors: AuditAnchorRow[]; voids: AuditVoidRow[] }> {
    const anchors = await this.q.query<AuditAnchorRow>('SELECT stream, seq, mac, at, key_id, tag FROM audit_chain_anchors');
    const voids = await this.q.query<AuditVoidRow>('SELECT stream, seq, mac, key_id, tag FROM audit_chain_voids');
    return { anchors: anchors.rows, voids: voids.rows };
  }

  async unchained(): Promise<{ before: number; after: number; firstAfter: number | null }> {
    const r = await this.q.query<{ before: number; after: number; first_after: number | null }>(
      `WITH first AS (SELECT min(id) AS id FROM audit_events WHERE stream IS NOT NULL)
       SELECT (SELECT count(*) FROM audit_events, first WHERE stream IS NULL AND (first.id IS NULL OR audit_events.id < first.id))::bigint AS before,
              (SELECT count(*) FROM audit_events, first WHERE stream IS NULL AND audit_events.id > first.id)::bigint AS after,
              (SELECT min(audit_events.id) FROM audit_events, first WHERE stream IS NULL AND audit_events.id > first.id) AS first_after`,
    );
    const row = r.rows[0]!;
    return { before: Number(row.before), after: Number(row.after), firstAfter: row.first_after === null ? null : Number(row.first_after) };
  }
}

/** Leaves the place and MAC of chained rows that were not written, so their stream verifies across the gap. */
export async function writeVoids(q: Queryable, stream: AuditStream, links: ChainLink[]): Promise<void> {
  for (const l of links) {
    await q.query('INSERT INTO audit_chain_voids (stream, seq, mac, key_id, tag) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING', [
      l.stream,
      l.seq,
      l.mac,
      stream.keyId,
      stream.tag('void', l.stream, l.seq, l.mac),
    ]);
  }
}
