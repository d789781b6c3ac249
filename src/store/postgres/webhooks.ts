import type { NewOutboxRow, OutboxRow, WebhookOutboxRepository, WebhookStats } from '../types.js';
import type { Queryable } from './queryable.js';

export class PgWebhookOutboxRepository implements WebhookOutboxRepository {
  constructor(private readonly q: Queryable) {}

  async enqueue(rows: readonly NewOutboxRow[], now = Date.now()): Promise<void> {
    if (rows.length === 0) return;
    await this.q.query(
      `INSERT INTO webhook_outbox (id, endpoint, event_type, payload, created_at, due_at)
       SELECT id, endpoint, event_type, payload, $5, $5 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS r(id, endpoint, event_type, payload)`,
      [rows.map((r) => r.id), rows.map((r) => r.endpoint), rows.map((r) => r.event_type), rows.map((r) => r.payload), now],
    );
  }

  async claim(holder: string, endpoints: readonly string[], limit: number, leaseMs: number, now = Date.now()): Promise<OutboxRow[]> {
    // SKIP LOCKED: instances claiming at once each take other rows instead of queueing on the same ones;
    // a row another instance claimed meanwhile is re-checked against the WHERE and no longer due.
    const r = await this.q.query<OutboxRow>(
      `UPDATE webhook_outbox o SET claimed_by = $1, due_at = $2, attempts = o.attempts + 1
       FROM (SELECT id FROM webhook_outbox
             WHERE status = 'pending' AND due_at <= $3 AND endpoint = ANY($4::text[])
             ORDER BY due_at, id LIMIT $5 FOR UPDATE SKIP LOCKED) due
       WHERE o.id = due.id
       RETURNING o.*`,
      [holder, now + leaseMs, now, [...endpoints], limit],
    );
    return r.rows.sort((a, b) => a.due_at - b.due_at || (a.id < b.id ? -1 : 1));
  }

  async delivered(id: string, holder: string, now = Date.now()): Promise<boolean> {
    const r = await this.q.query(
      `UPDATE webhook_outbox SET status = 'delivered', settled_at = $1, claimed_by = NULL, last_error = NULL
       WHERE id = $2 AND claimed_by = $3 AND status = 'pending'`,
      [now, id, holder],
    );
    return r.rowCount === 1;
  }

  async undelivered(id: string, holder: string, retryAt: number | null, error: string, now = Date.now()): Promise<boolean> {
    const r = await this.q.query(
      `UPDATE webhook_outbox SET
         status = CASE WHEN $1::bigint IS NULL THEN 'failed' ELSE 'pending' END,
         due_at = COALESCE($1::bigint, due_at),
         settled_at = CASE WHEN $1::bigint IS NULL THEN $2::bigint ELSE NULL END,
         claimed_by = NULL, last_error = $3
       WHERE id = $4 AND claimed_by = $5 AND status = 'pending'`,
      [retryAt, now, error.slice(0, 200), id, holder],
    );
    return r.rowCount === 1;
  }

  async release(id: string, holder: string, now = Date.now()): Promise<boolean> {
    const r = await this.q.query(
      `UPDATE webhook_outbox SET claimed_by = NULL, due_at = $1, attempts = GREATEST(attempts - 1, 0)
       WHERE id = $2 AND claimed_by = $3 AND status = 'pending'`,
      [now, id, holder],
    );
    return r.rowCount === 1;
  }

  async byId(id: string): Promise<OutboxRow | undefined> {
    const r = await this.q.query<OutboxRow>('SELECT * FROM webhook_outbox WHERE id = $1', [id]);
    return r.rows[0];
  }

  async stats(): Promise<WebhookStats> {
    // count(*) is BIGINT, which this store's pool parses as a number.
    const endpoints = await this.q.query<WebhookStats['endpoints'][number]>(
      `SELECT endpoint,
         count(*) FILTER (WHERE status = 'pending') AS pending,
         count(*) FILTER (WHERE status = 'delivered') AS delivered,
         count(*) FILTER (WHERE status = 'failed') AS failed
       FROM webhook_outbox GROUP BY endpoint ORDER BY endpoint COLLATE "C"`,
    );
    const oldest = await this.q.query<{ at: number | null }>("SELECT min(created_at) AS at FROM webhook_outbox WHERE status = 'pending'");
    return { endpoints: endpoints.rows, oldestPendingAt: oldest.rows[0]?.at ?? null };
  }

  async prune(deliveredBefore: number, failedBefore: number): Promise<number> {
    const r = await this.q.query(
      `DELETE FROM webhook_outbox WHERE (status = 'delivered' AND settled_at < $1) OR (status = 'failed' AND settled_at < $2)`,
      [deliveredBefore, failedBefore],
    );
    return r.rowCount ?? 0;
  }
}
