import type {
  ApprovalDecisionRow,
  ApprovalRepository,
  ApprovalRequestRow,
  ApprovalStatus,
  DecideResult,
  NewApprovalDecision,
  NewApprovalRequest,
} from '../approvals.js';
import type { Owner } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

const SETTLED = `CASE WHEN status IN ('pending', 'approved') AND expires_at <= @now THEN 'expired' ELSE status END`;

export class SqliteApprovalRepository implements ApprovalRepository {
  readonly #byId;
  readonly #take;

  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
  ) {
    this.#byId = db.prepare('SELECT * FROM approval_requests WHERE id = ?');
    this.#take = db.prepare(
      `UPDATE approval_requests SET status = CASE WHEN @reuse = 1 THEN 'approved' ELSE 'used' END,
         use_count = use_count + 1, used_at = @now, updated_at = @now
       WHERE id = @id AND status = 'approved' AND expires_at > @now RETURNING *`,
    );
  }

  openOrCreate(
    row: NewApprovalRequest,
    maxOpen: number,
    now = Date.now(),
  ): Promise<{ request: ApprovalRequestRow; created: boolean; superseded: string[] }> {
    // IMMEDIATE takes the write lock before the read, so another process cannot insert in between.
    const run = this.db.transaction(() => {
      const same = this.db
        .prepare(
          `SELECT * FROM approval_requests
           WHERE issuer = ? AND subject = ? AND binding = ? AND status IN ('pending', 'approved', 'denied') AND expires_at > ?
           ORDER BY created_at DESC, rowid DESC LIMIT 1`,
        )
        .get(row.issuer, row.subject, row.binding, now) as ApprovalRequestRow | undefined;
      if (same) return { request: same, created: false, superseded: [] };
      const open = this.db
        .prepare(
          `SELECT id FROM approval_requests WHERE issuer = ? AND subject = ? AND status = 'pending' AND expires_at > ?
           ORDER BY created_at DESC, rowid DESC`,
        )
        .all(row.issuer, row.subject, now) as Array<{ id: string }>;
      const superseded = open.slice(Math.max(0, maxOpen - 1)).map((r) => r.id);
      const supersede = this.db.prepare(
        `UPDATE approval_requests SET status = 'expired', reason = 'superseded', updated_at = ? WHERE id = ? AND status = 'pending'`,
      );
      for (const id of superseded) supersede.run(now, id);
      this.db
        .prepare(
          `INSERT INTO approval_requests (id, binding, issuer, subject, client_name, tool, upstream, provider, account, policy_version,
             rule_id, service_id, key_id, sealed_call, status, created_at, expires_at, updated_at)
           VALUES (@id, @binding, @issuer, @subject, @client_name, @tool, @upstream, @provider, @account, @policy_version,
             @rule_id, @service_id, @key_id, @sealed_call, 'pending', @now, @expires_at, @now)`,
        )
        .run({ ...row, now });
      return { request: this.#byId.get(row.id) as ApprovalRequestRow, created: true, superseded };
    });
    return this.gate.run(() => run.immediate());
  }

  byId(id: string): Promise<ApprovalRequestRow | undefined> {
    return this.gate.run(() => this.#byId.get(id) as ApprovalRequestRow | undefined);
  }

  decisions(id: string): Promise<ApprovalDecisionRow[]> {
    return this.gate.run(
      () =>
        this.db
          .prepare('SELECT * FROM approval_decisions WHERE request_id = ? ORDER BY at, issuer, subject')
          .all(id) as ApprovalDecisionRow[],
    );
  }

  decide(id: string, decision: NewApprovalDecision, quorum: number, approvedTtlMs: number, now = Date.now()): Promise<DecideResult> {
    const run = this.db.transaction((): DecideResult => {
      const request = this.#byId.get(id) as ApprovalRequestRow | undefined;
      if (!request || request.status !== 'pending' || request.expires_at <= now) return { kind: 'closed', request };
      const inserted = this.db
        .prepare(
          `INSERT INTO approval_decisions (request_id, issuer, subject, name, verdict, reason, at) VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (request_id, issuer, subject) DO NOTHING`,
        )
        .run(id, decision.issuer, decision.subject, decision.name, decision.verdict, decision.reason, now);
      if (inserted.changes === 0) return { kind: 'already_decided', request };
      if (decision.verdict === 'deny') {
        this.db
          .prepare(`UPDATE approval_requests SET status = 'denied', reason = ?, decided_at = ?, updated_at = ? WHERE id = ?`)
          .run(decision.reason, now, now, id);
      } else {
        const { n } = this.db
          .prepare(`SELECT count(*) AS n FROM approval_decisions WHERE request_id = ? AND verdict = 'approve'`)
          .get(id) as { n: number };
        if (n >= quorum) {
          this.db
            .prepare(`UPDATE approval_requests SET status = 'approved', decided_at = ?, expires_at = ?, updated_at = ? WHERE id = ?`)
            .run(now, now + approvedTtlMs, now, id);
        }
      }
      return { kind: 'recorded', request: this.#byId.get(id) as ApprovalRequestRow };
    });
    return this.gate.run(() => run.immediate());
  }

  take(id: string, reuse: boolean, now = Date.now()): Promise<ApprovalRequestRow | undefined> {
    return this.gate.run(() => this.#take.get({ id, reuse: reuse ? 1 : 0, now }) as ApprovalRequestRow | undefined);
  }

  pending(limit: number, now = Date.now()): Promise<ApprovalRequestRow[]> {
    return this.gate.run(
      () =>
        this.db
          .prepare(`SELECT * FROM approval_requests WHERE status = 'pending' AND expires_at > ? ORDER BY created_at DESC, id LIMIT ?`)
          .all(now, limit) as ApprovalRequestRow[],
    );
  }

  mine(owner: Owner, limit: number): Promise<ApprovalRequestRow[]> {
    return this.gate.run(
      () =>
        this.db
          .prepare(`SELECT * FROM approval_requests WHERE issuer = ? AND subject = ? ORDER BY created_at DESC, id LIMIT ?`)
          .all(owner.issuer, owner.subject, limit) as ApprovalRequestRow[],
    );
  }

  settledAmong(ids: readonly string[], now = Date.now()): Promise<Array<{ id: string; status: ApprovalStatus }>> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `SELECT id, ${SETTLED} AS status FROM approval_requests
             WHERE id IN (SELECT value FROM json_each(@ids)) AND (status <> 'pending' OR expires_at <= @now)`,
          )
          .all({ ids: JSON.stringify(ids), now }) as Array<{ id: string; status: ApprovalStatus }>,
    );
  }

  settledSince(since: number): Promise<Array<{ id: string; status: ApprovalStatus }>> {
    return this.gate.run(
      () =>
        this.db.prepare(`SELECT id, status FROM approval_requests WHERE updated_at >= ? AND status <> 'pending'`).all(since) as Array<{
          id: string;
          status: ApprovalStatus;
        }>,
    );
  }

  prune(graceMs: number, now = Date.now()): Promise<number> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `DELETE FROM approval_requests
             WHERE (status IN ('pending', 'approved', 'denied', 'expired') AND expires_at < @before)
                OR (status IN ('used', 'expired') AND updated_at < @before)`,
          )
          .run({ before: now - graceMs }).changes,
    );
  }
}
