import type { NewPendingConnection, Owner, PendingConnection, PendingConnectionRepository, SettledStatus } from '../types.js';
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
    this.#settledSince = db.prepare(`SELECT id, status FROM pending_connections WHERE updated_at >= ? AND status NOT IN ('open', 'authorizing')`);
  }

  create(row: NewPendingConnection): Promise<void> {
    const now = Date.now();
    return this.gate.run(() => {
      this.db
        .prepare(
          `INSERT INTO pending_connections (id, link_hash, issuer, subject, provider, client_name, scopes, purpose, status, created_at, expires_at, updated_at)
           VALUES (@id, @link_hash, @issuer, @subject, @provider, @client_name, @scopes, @purpose, 'open', @now, @expires_at, @now)`,
        )
        .run({ ...row, purpose: row.purpose ?? null, now });
    });
  }

  byId(id: string): Promise<PendingConnection | undefined> {
    return this.gate.run(() => this.#byId.get(id) as PendingConnection | undefined);
  }

  byLinkHash(linkHash: string): Promise<PendingConnection | undefined> {
    return this.gate.run(() => this.db.prepare('SELECT * FROM pending_connections WHERE link_hash = ?').get(linkHash) as PendingConnection | undefined);
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

  claim(id: string, now = Date.now()): Promise<boolean> {
    return this.gate.run(
      () =>
        this.db.prepare(`UPDATE pending_connections SET status = 'authorizing', updated_at = ? WHERE id = ? AND status = 'open' AND expires_at > ?`).run(now, id, now).changes === 1,
    );
  }

  settle(id: string, status: SettledStatus, reason?: string): Promise<boolean> {
    return this.gate.run(
      () =>
        this.db
          .prepare(`UPDATE pending_connections SET status = ?, outcome_reason = ?, updated_at = ? WHERE id = ? AND status IN ('open', 'authorizing')`)
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
    const dayAgo = now - 86_400_000;
    return this.gate.run(() =>
      this.db.transaction(() => {
        let n = this.db.prepare('DELETE FROM pending_connections WHERE expires_at < ?').run(dayAgo).changes;
        n += this.db.prepare('DELETE FROM oauth_flows WHERE expires_at < ?').run(now).changes;
        n += this.db.prepare('DELETE FROM login_transactions WHERE expires_at < ?').run(now).changes;
        n += this.db.prepare('DELETE FROM browser_sessions WHERE expires_at < ?').run(now).changes;
        n += this.db.prepare('DELETE FROM rate_limit_windows WHERE window_start < ?').run(now - 86_400_000).changes;
        return n;
      })(),
    );
  }
}
