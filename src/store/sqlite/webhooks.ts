import type { NewOutboxRow, OutboxRow, WebhookOutboxRepository, WebhookStats } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqliteWebhookOutboxRepository implements WebhookOutboxRepository {
  // Prepared once: every instance claims every 2 s, and every event is enqueued, claimed and settled.
  readonly #insert;
  readonly #claim;
  readonly #delivered;
  readonly #undelivered;
  readonly #release;

  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
  ) {
    this.#insert = db.prepare(
      `INSERT INTO webhook_outbox (id, endpoint, event_type, payload, created_at, due_at) VALUES (@id, @endpoint, @event_type, @payload, @now, @now)`,
    );
    this.#claim = db.prepare(
      `UPDATE webhook_outbox SET claimed_by = ?, due_at = ?, attempts = attempts + 1
             WHERE id IN (
               SELECT id FROM webhook_outbox
               WHERE status = 'pending' AND due_at <= ? AND endpoint IN (SELECT value FROM json_each(?))
               ORDER BY due_at, id LIMIT ?)
             RETURNING *`,
    );
    this.#delivered = db.prepare(
      `UPDATE webhook_outbox SET status = 'delivered', settled_at = ?, claimed_by = NULL, last_error = NULL
             WHERE id = ? AND claimed_by = ? AND status = 'pending'`,
    );
    this.#undelivered = db.prepare(
      `UPDATE webhook_outbox SET
               status = CASE WHEN @retryAt IS NULL THEN 'failed' ELSE 'pending' END,
               due_at = COALESCE(@retryAt, due_at),
               settled_at = CASE WHEN @retryAt IS NULL THEN @now ELSE NULL END,
               claimed_by = NULL, last_error = @error
             WHERE id = @id AND claimed_by = @holder AND status = 'pending'`,
    );
    this.#release = db.prepare(
      `UPDATE webhook_outbox SET claimed_by = NULL, due_at = ?, attempts = max(attempts - 1, 0)
             WHERE id = ? AND claimed_by = ? AND status = 'pending'`,
    );
  }

  enqueue(rows: readonly NewOutboxRow[], now = Date.now()): Promise<void> {
    return this.gate.run(() => {
      for (const row of rows) this.#insert.run({ ...row, now });
    });
  }

  claim(holder: string, endpoints: readonly string[], limit: number, leaseMs: number, now = Date.now()): Promise<OutboxRow[]> {
    // One statement: SQLite runs it under the database's write lock, so two processes never claim one row.
    // RETURNING gives the rows in no set order: oldest due first, as the PostgreSQL store answers.
    return this.gate.run(() =>
      (this.#claim.all(holder, now + leaseMs, now, JSON.stringify(endpoints), limit) as OutboxRow[]).sort(
        (a, b) => a.due_at - b.due_at || (a.id < b.id ? -1 : 1),
      ),
    );
  }

  delivered(id: string, holder: string, now = Date.now()): Promise<boolean> {
    return this.gate.run(() => this.#delivered.run(now, id, holder).changes === 1);
  }

  undelivered(id: string, holder: string, retryAt: number | null, error: string, now = Date.now()): Promise<boolean> {
    return this.gate.run(() => this.#undelivered.run({ id, holder, retryAt, error: error.slice(0, 200), now }).changes === 1);
  }

  release(id: string, holder: string, now = Date.now()): Promise<boolean> {
    return this.gate.run(() => this.#release.run(now, id, holder).changes === 1);
  }

  byId(id: string): Promise<OutboxRow | undefined> {
    return this.gate.run(() => this.db.prepare('SELECT * FROM webhook_outbox WHERE id = ?').get(id) as OutboxRow | undefined);
  }

  stats(): Promise<WebhookStats> {
    return this.gate.run(() => {
      const endpoints = this.db
        .prepare(
          `SELECT endpoint,
             count(*) FILTER (WHERE status = 'pending') AS pending,
             count(*) FILTER (WHERE status = 'delivered') AS delivered,
             count(*) FILTER (WHERE status = 'failed') AS failed
           FROM webhook_outbox GROUP BY endpoint ORDER BY endpoint`,
        )
        .all() as WebhookStats['endpoints'];
      const oldest = this.db.prepare("SELECT min(created_at) AS at FROM webhook_outbox WHERE status = 'pending'").get() as {
        at: number | null;
      };
      return { endpoints, oldestPendingAt: oldest.at };
    });
  }

  prune(deliveredBefore: number, failedBefore: number): Promise<number> {
    return this.gate.run(
      () =>
        this.db
          .prepare(`DELETE FROM webhook_outbox WHERE (status = 'delivered' AND settled_at < ?) OR (status = 'failed' AND settled_at < ?)`)
          .run(deliveredBefore, failedBefore).changes,
    );
  }
}
