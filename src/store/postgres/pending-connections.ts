import {
  OAUTH_FLOW_TTL_MS,
  PENDING_PRUNE_GRACE_MS,
  TOLD_PREFIX,
  type NewPendingConnection,
  type Owner,
  type PendingConnection,
  type PendingConnectionRepository,
  type SettledStatus,
} from '../types.js';
import type { Queryable } from './queryable.js';

/** The NOTIFY channel a settlement is announced on; the payload is the pending connection's id. */
export const SETTLED_CHANNEL = 'broker_pending_settled';

const DAY_MS = 86_400_000;

const INSERT = `INSERT INTO pending_connections (id, link_hash, issuer, subject, provider, client_name, scopes, purpose, service_id, activation_hash, status, created_at, expires_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $10, $11, $12, 'open', $8, $9, $8)`;

function insertValues(row: NewPendingConnection, now: number): unknown[] {
  return [
    row.id,
    row.link_hash,
    row.issuer,
    row.subject,
    row.provider,
    row.client_name,
    row.scopes,
    now,
    row.expires_at,
    row.purpose ?? null,
    row.service_id ?? null,
    row.activation_hash ?? null,
  ];
}

export class PgPendingConnectionRepository implements PendingConnectionRepository {
  constructor(private readonly q: Queryable) {}

  async create(row: NewPendingConnection): Promise<void> {
    await this.q.query(INSERT, insertValues(row, Date.now()));
  }

  async openOrCreate(
    row: NewPendingConnection,
    maxOpen: number,
    now = Date.now(),
  ): Promise<{ pending: PendingConnection; cancelled: string[] }> {
    return this.q.atomically(async (q) => {
      // One owner at a time, across every instance, until commit: READ COMMITTED alone would let two
      // concurrent calls each find nothing and each insert.
      await q.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`pending:${row.issuer}\n${row.subject}`]);
      const same = await q.query<PendingConnection>(
        `SELECT * FROM pending_connections
         WHERE issuer = $1 AND subject = $2 AND provider = $3 AND scopes IS NOT DISTINCT FROM $4 AND client_name IS NOT DISTINCT FROM $5
           AND purpose IS NOT DISTINCT FROM $7 AND service_id IS NOT DISTINCT FROM $8 AND status = 'open' AND expires_at > $6
         ORDER BY created_at DESC LIMIT 1`,
        [row.issuer, row.subject, row.provider, row.scopes, row.client_name, now, row.purpose ?? null, row.service_id ?? null],
      );
      if (same.rows[0]) return { pending: same.rows[0], cancelled: [] };
      const cancelled = await q.query<{ id: string }>(
        `WITH oldest AS (
           SELECT id FROM pending_connections WHERE issuer = $1 AND subject = $2 AND status = 'open' AND expires_at > $3
           ORDER BY created_at DESC OFFSET $4
         ), cancelled AS (
           UPDATE pending_connections SET status = 'cancelled', outcome_reason = 'superseded', updated_at = $3
           WHERE id IN (SELECT id FROM oldest) AND status = 'open' RETURNING id
         )
         SELECT id, pg_notify('${SETTLED_CHANNEL}', id) FROM cancelled`,
        [row.issuer, row.subject, now, Math.max(0, maxOpen - 1)],
      );
      const pending = (await q.query<PendingConnection>(`${INSERT} RETURNING *`, insertValues(row, now))).rows[0]!;
      return { pending, cancelled: cancelled.rows.map((r) => r.id) };
    });
  }

  async byId(id: string): Promise<PendingConnection | undefined> {
    return (await this.q.query<PendingConnection>('SELECT * FROM pending_connections WHERE id = $1', [id])).rows[0];
  }

  async byLinkHash(linkHash: string): Promise<PendingConnection | undefined> {
    return (await this.q.query<PendingConnection>('SELECT * FROM pending_connections WHERE link_hash = $1', [linkHash])).rows[0];
  }

  async byActivationHash(activationHash: string, now = Date.now()): Promise<PendingConnection[]> {
    const r = await this.q.query<PendingConnection>(
      `SELECT * FROM pending_connections
       WHERE activation_hash = $1 AND activated_at IS NULL AND status = 'open' AND expires_at > $2 LIMIT 2`,
      [activationHash, now],
    );
    return r.rows;
  }

  async redeemActivation(id: string, activationHash: string, now = Date.now()): Promise<boolean> {
    const r = await this.q.query(
      `UPDATE pending_connections SET activated_at = $3
       WHERE id = $1 AND activation_hash = $2 AND activated_at IS NULL AND status = 'open' AND expires_at > $3`,
      [id, activationHash, now],
    );
    return r.rowCount === 1;
  }

  async latestInFlight(owner: Owner, provider: string, now = Date.now()): Promise<PendingConnection | undefined> {
    const r = await this.q.query<PendingConnection>(
      `SELECT * FROM pending_connections
       WHERE issuer = $1 AND subject = $2 AND provider = $3 AND status IN ('open', 'authorizing') AND expires_at > $4
       ORDER BY created_at DESC LIMIT 1`,
      [owner.issuer, owner.subject, provider, now],
    );
    return r.rows[0];
  }

  async takeUntoldFailure(owner: Owner, provider: string, since: number): Promise<PendingConnection | undefined> {
    // The row as it was before the mark (`old`), so the caller reads the reason itself.
    const r = await this.q.query<PendingConnection>(
      `WITH newest AS (
         SELECT * FROM pending_connections WHERE issuer = $1 AND subject = $2 AND provider = $3
         ORDER BY created_at DESC LIMIT 1 FOR UPDATE
       ), told AS (
         UPDATE pending_connections p SET outcome_reason = $5 || COALESCE(p.outcome_reason, '')
         FROM newest WHERE p.id = newest.id AND newest.status = 'failed' AND newest.updated_at >= $4
           AND (newest.outcome_reason IS NULL OR newest.outcome_reason NOT LIKE $5 || '%')
         RETURNING p.id
       )
       SELECT newest.* FROM newest JOIN told ON told.id = newest.id`,
      [owner.issuer, owner.subject, provider, since, TOLD_PREFIX],
    );
    return r.rows[0];
  }

  async countInFlight(now = Date.now()): Promise<number> {
    const r = await this.q.query<{ n: string }>(
      `SELECT count(*) AS n FROM pending_connections WHERE status IN ('open', 'authorizing') AND expires_at > $1`,
      [now],
    );
    return Number(r.rows[0]!.n);
  }

  async claim(id: string, now = Date.now()): Promise<boolean> {
    const r = await this.q.query(
      `UPDATE pending_connections SET status = 'authorizing', updated_at = $1 WHERE id = $2 AND status = 'open' AND expires_at > $1`,
      [now, id],
    );
    return r.rowCount === 1;
  }

  async settle(id: string, status: SettledStatus, reason?: string): Promise<boolean> {
    // One statement, so one transaction: the NOTIFY goes out on commit, and only if a row changed.
    const r = await this.q.query(
      `WITH settled AS (
         UPDATE pending_connections SET status = $2, outcome_reason = $3, updated_at = $4
         WHERE id = $1 AND status IN ('open', 'authorizing') RETURNING id
       )
       SELECT pg_notify('${SETTLED_CHANNEL}', id) FROM settled`,
      [id, status, reason ?? null, Date.now()],
    );
    return r.rowCount === 1;
  }

  async settledAmong(ids: readonly string[]): Promise<Array<{ id: string; status: SettledStatus }>> {
    if (ids.length === 0) return [];
    const r = await this.q.query<{ id: string; status: SettledStatus }>(
      `SELECT id, status FROM pending_connections WHERE id = ANY($1::text[]) AND status NOT IN ('open', 'authorizing')`,
      [[...ids]],
    );
    return r.rows;
  }

  async settledSince(since: number): Promise<Array<{ id: string; status: SettledStatus }>> {
    const r = await this.q.query<{ id: string; status: SettledStatus }>(
      `SELECT id, status FROM pending_connections WHERE updated_at >= $1 AND status NOT IN ('open', 'authorizing')`,
      [since],
    );
    return r.rows;
  }

  async prune(now = Date.now()): Promise<number> {
    return this.q.atomically(async (q) => {
      let n = 0;
      const cutoff = now - PENDING_PRUNE_GRACE_MS;
      // Their flows go with them (ON DELETE CASCADE); a claimed row stays while its flow may still come back.
      n +=
        (
          await q.query(
            `DELETE FROM pending_connections
           WHERE (status NOT IN ('open', 'authorizing') AND updated_at < $1)
              OR (status = 'open' AND expires_at < $1)
              OR (status = 'authorizing' AND expires_at < $1 AND updated_at < $2)`,
            [cutoff, cutoff - OAUTH_FLOW_TTL_MS],
          )
        ).rowCount ?? 0;
      n += (await q.query('DELETE FROM oauth_flows WHERE expires_at < $1', [now])).rowCount ?? 0;
      n += (await q.query('DELETE FROM login_transactions WHERE expires_at < $1', [now])).rowCount ?? 0;
      n += (await q.query('DELETE FROM browser_sessions WHERE expires_at < $1', [now])).rowCount ?? 0;
      n += (await q.query('DELETE FROM used_client_assertions WHERE expires_at < $1', [now])).rowCount ?? 0;
      n += (await q.query('DELETE FROM rate_limit_windows WHERE window_start < $1', [now - DAY_MS])).rowCount ?? 0;
      return n;
    });
  }
}
