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
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqlitePendingConnectionRepository implements PendingConnectionRepository {
  readonly #byId;
  readonly #settled;
  readonly #settledSince;

  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
  ) {
    this.#byId = db.prepare('SELECT * FROM pending_connections WHERE id = ?');
    this.#settled = db.prepare(
      `SELECT id, status FROM pending_connections WHERE id IN (SELECT value FROM json_each(?)) AND status NOT IN ('open', 'authorizing')`,
    );
    this.#settledSince = db.prepare(
      `SELECT id, status FROM pending_connections WHERE updated_at >= ? AND status NOT IN ('open', 'authorizing')`,
    );
  }

  create(row: NewPendingConnection): Promise<void> {
    return this.gate.run(() => this.#insert(row, Date.now()));
  }

  #insert(row: NewPendingConnection, now: number): void {
    this.db
      .prepare(
        `INSERT INTO pending_connections (id, link_hash, issuer, subject, provider, client_name, scopes, purpose, service_id, activation_hash, status, created_at, expires_at, updated_at)
         VALUES (@id, @link_hash, @issuer, @subject, @provider, @client_name, @scopes, @purpose, @service_id, @activation_hash, 'open', @now, @expires_at, @now)`,
      )
      .run({ ...row, purpose: row.purpose ?? null, service_id: row.service_id ?? null, activation_hash: row.activation_hash ?? null, now });
  }

  openOrCreate(row: NewPendingConnection, maxOpen: number, now = Date.now()): Promise<{ pending: PendingConnection; cancelled: string[] }> {
    // IMMEDIATE takes the write lock before the read, so another process cannot insert in between.
    const run = this.db.transaction(() => {
      const same = this.db
        .prepare(
          `SELECT * FROM pending_connections
           WHERE issuer = ? AND subject = ? AND provider = ? AND scopes IS ? AND client_name IS ? AND purpose IS ? AND service_id IS ? AND status = 'open' AND expires_at > ?
           ORDER BY created_at DESC, rowid DESC LIMIT 1`,
        )
        .get(row.issuer, row.subject, row.provider, row.scopes, row.client_name, row.purpose ?? null, row.service_id ?? null, now) as
        PendingConnection | undefined;
      if (same) return { pending: same, cancelled: [] };
      const open = this.db
        .prepare(
          `SELECT id FROM pending_connections WHERE issuer = ? AND subject = ? AND status = 'open' AND expires_at > ? ORDER BY created_at DESC, rowid DESC`,
        )
        .all(row.issuer, row.subject, now) as Array<{ id: string }>;
      const cancelled = open.slice(Math.max(0, maxOpen - 1)).map((r) => r.id);
      const cancel = this.db.prepare(
        `UPDATE pending_connections SET status = 'cancelled', outcome_reason = 'superseded', updated_at = ? WHERE id = ? AND status = 'open'`,
      );
      for (const id of cancelled) cancel.run(now, id);
      this.#insert(row, now);
      return { pending: this.#byId.get(row.id) as PendingConnection, cancelled };
    });
    return this.gate.run(() => run.immediate());
  }

  byId(id: string): Promise<PendingConnection | undefined> {
    return this.gate.run(() => this.#byId.get(id) as PendingConnection | undefined);
  }

  byLinkHash(linkHash: string): Promise<PendingConnection | undefined> {
    return this.gate.run(
      () => this.db.prepare('SELECT * FROM pending_connections WHERE link_hash = ?').get(linkHash) as PendingConnection | undefined,
    );
  }

  byActivationHash(activationHash: string, now = Date.now()): Promise<PendingConnection[]> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `SELECT * FROM pending_connections
             WHERE activation_hash = ? AND activated_at IS NULL AND status = 'open' AND expires_at > ? LIMIT 2`,
          )
          .all(activationHash, now) as PendingConnection[],
    );
  }

  redeemActivation(id: string, activationHash: string, now = Date.now()): Promise<boolean> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `UPDATE pending_connections SET activated_at = ?
             WHERE id = ? AND activation_hash = ? AND activated_at IS NULL AND status = 'open' AND expires_at > ?`,
          )
          .run(now, id, activationHash, now).changes === 1,
    );
  }

  latestInFlight(owner: Owner, provider: string, now = Date.now()): Promise<PendingConnection | undefined> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `SELECT * FROM pending_connections WHERE issuer = ? AND subject = ? AND provider = ? AND status IN ('open', 'authorizing') AND expires_at > ?
             ORDER BY created_at DESC LIMIT 1`,
          )
          .get(owner.issuer, owner.subject, provider, now) as PendingConnection | undefined,
    );
  }

  takeUntoldFailure(owner: Owner, provider: string, since: number): Promise<PendingConnection | undefined> {
    return this.gate.run(() => {
      const newest = this.db
        .prepare(`SELECT * FROM pending_connections WHERE issuer = ? AND subject = ? AND provider = ? ORDER BY created_at DESC LIMIT 1`)
        .get(owner.issuer, owner.subject, provider) as PendingConnection | undefined;
      if (!newest || newest.status !== 'failed' || newest.updated_at < since || newest.outcome_reason?.startsWith(TOLD_PREFIX))
        return undefined;
      const told = this.db
        .prepare(`UPDATE pending_connections SET outcome_reason = ? WHERE id = ? AND outcome_reason IS ?`)
        .run(TOLD_PREFIX + (newest.outcome_reason ?? ''), newest.id, newest.outcome_reason).changes;
      return told === 1 ? newest : undefined;
    });
  }

  countInFlight(now = Date.now()): Promise<number> {
    return this.gate.run(
      () =>
        (
          this.db
            .prepare(`SELECT count(*) AS n FROM pending_connections WHERE status IN ('open', 'authorizing') AND expires_at > ?`)
            .get(now) as { n: number }
        ).n,
    );
  }

  claim(id: string, now = Date.now()): Promise<boolean> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `UPDATE pending_connections SET status = 'authorizing', updated_at = ? WHERE id = ? AND status = 'open' AND expires_at > ?`,
          )
          .run(now, id, now).changes === 1,
    );
  }

  settle(id: string, status: SettledStatus, reason?: string): Promise<boolean> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `UPDATE pending_connections SET status = ?, outcome_reason = ?, updated_at = ? WHERE id = ? AND status IN ('open', 'authorizing')`,
          )
          .run(status, reason ?? null, Date.now(), id).changes === 1,
    );
  }

  settledAmong(ids: readonly string[]): Promise<Array<{ id: string; status: SettledStatus }>> {
    if (ids.length === 0) return Promise.resolve([]);
    return this.gate.run(() => this.#settled.all(JSON.stringify(ids)) as Array<{ id: string; status: SettledStatus }>);
  }

  settledSince(since: number): Promise<Array<{ id: string; status: SettledStatus }>> {
    return this.gate.run(() => this.#settledSince.all(since) as Array<{ id: string; status: SettledStatus }>);
  }

  prune(now = Date.now()): Promise<number> {
    const cutoff = now - PENDING_PRUNE_GRACE_MS;
    return this.gate.run(() =>
      this.db.transaction(() => {
        // Their flows go with them (ON DELETE CASCADE); a claimed row stays while its flow may still come back.
        let n = this.db
          .prepare(
            `DELETE FROM pending_connections
             WHERE (status NOT IN ('open', 'authorizing') AND updated_at < @cutoff)
                OR (status = 'open' AND expires_at < @cutoff)
                OR (status = 'authorizing' AND expires_at < @cutoff AND updated_at < @flowCutoff)`,
          )
          .run({ cutoff, flowCutoff: cutoff - OAUTH_FLOW_TTL_MS }).changes;
        n += this.db.prepare('DELETE FROM oauth_flows WHERE expires_at < ?').run(now).changes;
        n += this.db.prepare('DELETE FROM login_transactions WHERE expires_at < ?').run(now).changes;
        n += this.db.prepare('DELETE FROM browser_sessions WHERE expires_at < ?').run(now).changes;
        n += this.db.prepare('DELETE FROM used_client_assertions WHERE expires_at < ?').run(now).changes;
        n += this.db.prepare('DELETE FROM rate_limit_windows WHERE window_start < ?').run(now - 86_400_000).changes;
        return n;
      })(),
    );
  }
}
