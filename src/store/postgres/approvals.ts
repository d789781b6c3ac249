import {
  APPROVAL_FEED_PREFIX,
  type ApprovalDecisionRow,
  type ApprovalRepository,
  type ApprovalRequestRow,
  type ApprovalStatus,
  type DecideResult,
  type NewApprovalDecision,
  type NewApprovalRequest,
} from '../approvals.js';
import type { Owner } from '../types.js';
import { SETTLED_CHANNEL } from './pending-connections.js';
import type { Queryable } from './queryable.js';

const SETTLED = `CASE WHEN status IN ('pending', 'approved') AND expires_at <= $2 THEN 'expired' ELSE status END`;

/** Announces that a request left `pending`, on commit (src/store/approvals.ts `APPROVAL_FEED_PREFIX`). */
async function announce(q: Queryable, id: string): Promise<void> {
  await q.query(`SELECT pg_notify('${SETTLED_CHANNEL}', $1)`, [APPROVAL_FEED_PREFIX + id]);
}

export class PgApprovalRepository implements ApprovalRepository {
  constructor(private readonly q: Queryable) {}

  async openOrCreate(
    row: NewApprovalRequest,
    maxOpen: number,
    now = Date.now(),
  ): Promise<{ request: ApprovalRequestRow; created: boolean; superseded: string[] }> {
    return this.q.atomically(async (q) => {
      // One requester at a time, across every instance, until commit: READ COMMITTED alone would let
      // two concurrent calls each find nothing and each insert.
      await q.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`approval:${row.issuer}\n${row.subject}`]);
      const same = await q.query<ApprovalRequestRow>(
        `SELECT * FROM approval_requests
         WHERE issuer = $1 AND subject = $2 AND binding = $3 AND status IN ('pending', 'approved', 'denied') AND expires_at > $4
         ORDER BY created_at DESC LIMIT 1`,
        [row.issuer, row.subject, row.binding, now],
      );
      if (same.rows[0]) return { request: same.rows[0], created: false, superseded: [] };
      const superseded = await q.query<{ id: string }>(
        `WITH oldest AS (
           SELECT id FROM approval_requests WHERE issuer = $1 AND subject = $2 AND status = 'pending' AND expires_at > $3
           ORDER BY created_at DESC OFFSET $4
         ), superseded AS (
           UPDATE approval_requests SET status = 'expired', reason = 'superseded', updated_at = $3
           WHERE id IN (SELECT id FROM oldest) AND status = 'pending' RETURNING id
         )
         SELECT id, pg_notify('${SETTLED_CHANNEL}', '${APPROVAL_FEED_PREFIX}' || id) FROM superseded`,
        [row.issuer, row.subject, now, Math.max(0, maxOpen - 1)],
      );
      const request = (
        await q.query<ApprovalRequestRow>(
          `INSERT INTO approval_requests (id, binding, issuer, subject, client_name, tool, upstream, provider, account, policy_version,
             rule_id, service_id, key_id, sealed_call, status, created_at, expires_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'pending', $15, $16, $15) RETURNING *`,
          [
            row.id,
            row.binding,
            row.issuer,
            row.subject,
            row.client_name,
            row.tool,
            row.upstream,
            row.provider,
            row.account,
            row.policy_version,
            row.rule_id,
            row.service_id,
            row.key_id,
            row.sealed_call,
            now,
            row.expires_at,
          ],
        )
      ).rows[0]!;
      return { request, created: true, superseded: superseded.rows.map((r) => r.id) };
    });
  }

  async byId(id: string): Promise<ApprovalRequestRow | undefined> {
    return (await this.q.query<ApprovalRequestRow>('SELECT * FROM approval_requests WHERE id = $1', [id])).rows[0];
  }

  async decisions(id: string): Promise<ApprovalDecisionRow[]> {
    return (
      await this.q.query<ApprovalDecisionRow>('SELECT * FROM approval_decisions WHERE request_id = $1 ORDER BY at, issuer, subject', [id])
    ).rows;
  }

  async decide(id: string, decision: NewApprovalDecision, quorum: number, approvedTtlMs: number, now = Date.now()): Promise<DecideResult> {
    return this.q.atomically(async (q): Promise<DecideResult> => {
      // The row lock serializes the decisions on one request: the count below sees every earlier one.
      const request = (await q.query<ApprovalRequestRow>('SELECT * FROM approval_requests WHERE id = $1 FOR UPDATE', [id])).rows[0];
      if (!request || request.status !== 'pending' || request.expires_at <= now) return { kind: 'closed', request };
      const inserted = await q.query(
        `INSERT INTO approval_decisions (request_id, issuer, subject, name, verdict, reason, at) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (request_id, issuer, subject) DO NOTHING`,
        [id, decision.issuer, decision.subject, decision.name, decision.verdict, decision.reason, now],
      );
      if (inserted.rowCount === 0) return { kind: 'already_decided', request };
      if (decision.verdict === 'deny') {
        await q.query(`UPDATE approval_requests SET status = 'denied', reason = $2, decided_at = $3, updated_at = $3 WHERE id = $1`, [
          id,
          decision.reason,
          now,
        ]);
        await announce(q, id);
      } else {
        const count = await q.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM approval_decisions WHERE request_id = $1 AND verdict = 'approve'`,
          [id],
        );
        if (count.rows[0]!.n >= quorum) {
          await q.query(
            `UPDATE approval_requests SET status = 'approved', decided_at = $2, expires_at = $3, updated_at = $2 WHERE id = $1`,
            [id, now, now + approvedTtlMs],
          );
          await announce(q, id);
        }
      }
      return {
        kind: 'recorded',
        request: (await q.query<ApprovalRequestRow>('SELECT * FROM approval_requests WHERE id = $1', [id])).rows[0]!,
      };
    });
  }

  async take(id: string, reuse: boolean, now = Date.now()): Promise<ApprovalRequestRow | undefined> {
    const r = await this.q.query<ApprovalRequestRow>(
      `UPDATE approval_requests SET status = CASE WHEN $2 THEN 'approved' ELSE 'used' END,
         use_count = use_count + 1, used_at = $3, updated_at = $3
       WHERE id = $1 AND status = 'approved' AND expires_at > $3 RETURNING *`,
      [id, reuse, now],
    );
    return r.rows[0];
  }

  async pending(limit: number, now = Date.now()): Promise<ApprovalRequestRow[]> {
    const r = await this.q.query<ApprovalRequestRow>(
      `SELECT * FROM approval_requests WHERE status = 'pending' AND expires_at > $1 ORDER BY created_at DESC, id COLLATE "C" LIMIT $2`,
      [now, limit],
    );
    return r.rows;
  }

  async mine(owner: Owner, limit: number): Promise<ApprovalRequestRow[]> {
    const r = await this.q.query<ApprovalRequestRow>(
      `SELECT * FROM approval_requests WHERE issuer = $1 AND subject = $2 ORDER BY created_at DESC, id COLLATE "C" LIMIT $3`,
      [owner.issuer, owner.subject, limit],
    );
    return r.rows;
  }

  async settledAmong(ids: readonly string[], now = Date.now()): Promise<Array<{ id: string; status: ApprovalStatus }>> {
    const r = await this.q.query<{ id: string; status: ApprovalStatus }>(
      `SELECT id, ${SETTLED} AS status FROM approval_requests WHERE id = ANY($1::text[]) AND (status <> 'pending' OR expires_at <= $2)`,
      [ids, now],
    );
    return r.rows;
  }

  async settledSince(since: number): Promise<Array<{ id: string; status: ApprovalStatus }>> {
    const r = await this.q.query<{ id: string; status: ApprovalStatus }>(
      `SELECT id, status FROM approval_requests WHERE updated_at >= $1 AND status <> 'pending'`,
      [since],
    );
    return r.rows;
  }

  async prune(graceMs: number, now = Date.now()): Promise<number> {
    const r = await this.q.query(
      `DELETE FROM approval_requests
       WHERE (status IN ('pending', 'approved', 'denied', 'expired') AND expires_at < $1)
          OR (status IN ('used', 'expired') AND updated_at < $1)`,
      [now - graceMs],
    );
    return r.rowCount ?? 0;
  }
}
