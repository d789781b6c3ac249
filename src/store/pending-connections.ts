import type { Db } from './database.js';

export type PendingStatus = 'open' | 'authorizing' | 'completed' | 'cancelled' | 'denied' | 'failed';

export interface PendingConnection {
  id: string;
  link_hash: string;
  issuer: string;
  subject: string;
  provider: string;
  client_name: string | null;
  /** Space-separated scopes to ask for; null = the provider's defaults. */
  scopes: string | null;
  status: PendingStatus;
  outcome_reason: string | null;
  created_at: number;
  expires_at: number;
  updated_at: number;
}

/** Connections asked for and not yet settled, plus the event log that wakes held tool calls. */
export class PendingConnectionStore {
  constructor(private readonly db: Db) {}

  create(row: Omit<PendingConnection, 'status' | 'created_at' | 'updated_at' | 'outcome_reason'>): void {
    const now = Date.now();
    this.db
      .prepare(
        `INSERT INTO pending_connections (id, link_hash, issuer, subject, provider, client_name, scopes, status, created_at, expires_at, updated_at)
         VALUES (@id, @link_hash, @issuer, @subject, @provider, @client_name, @scopes, 'open', @now, @expires_at, @now)`,
      )
      .run({ ...row, now });
  }

  byId(id: string): PendingConnection | undefined {
    return this.db.prepare('SELECT * FROM pending_connections WHERE id = ?').get(id) as PendingConnection | undefined;
  }

  byLinkHash(linkHash: string): PendingConnection | undefined {
    return this.db.prepare('SELECT * FROM pending_connections WHERE link_hash = ?').get(linkHash) as PendingConnection | undefined;
  }

  /** The newest unexpired, unsettled pending connection of `owner` for `provider`. */
  latestInFlight(owner: { issuer: string; subject: string }, provider: string, now = Date.now()): PendingConnection | undefined {
    return this.db
      .prepare(
        `SELECT * FROM pending_connections WHERE issuer = ? AND subject = ? AND provider = ? AND status IN ('open', 'authorizing') AND expires_at > ?
         ORDER BY created_at DESC LIMIT 1`,
      )
      .get(owner.issuer, owner.subject, provider, now) as PendingConnection | undefined;
  }

  /**
   * Moves an open, unexpired link to `authorizing`, exactly once: of two concurrent claims only
   * one sees a changed row. This is what makes a connect link single-use.
   */
  claim(id: string, now = Date.now()): boolean {
    const r = this.db
      .prepare(`UPDATE pending_connections SET status = 'authorizing', updated_at = ? WHERE id = ? AND status = 'open' AND expires_at > ?`)
      .run(now, id, now);
    return r.changes === 1;
  }

  /** Settles a pending connection and records an event for every process's waiters. */
  settle(id: string, status: Exclude<PendingStatus, 'open' | 'authorizing'>, reason?: string): void {
    this.db.transaction(() => {
      const r = this.db
        .prepare(`UPDATE pending_connections SET status = ?, outcome_reason = ?, updated_at = ? WHERE id = ? AND status IN ('open', 'authorizing')`)
        .run(status, reason ?? null, Date.now(), id);
      if (r.changes === 1) this.db.prepare('INSERT INTO pending_events (pending_id, created_at) VALUES (?, ?)').run(id, Date.now());
    })();
  }

  latestEventSeq(): number {
    return (this.db.prepare('SELECT coalesce(max(seq), 0) AS seq FROM pending_events').get() as { seq: number }).seq;
  }

  eventsAfter(seq: number): Array<{ seq: number; pending_id: string }> {
    return this.db.prepare('SELECT seq, pending_id FROM pending_events WHERE seq > ? ORDER BY seq').all(seq) as Array<{ seq: number; pending_id: string }>;
  }

  /** Removes expired rows and old events; returns how many rows went. */
  prune(now = Date.now()): number {
    const dayAgo = now - 86_400_000;
    return this.db.transaction(() => {
      let n = this.db.prepare('DELETE FROM pending_connections WHERE expires_at < ?').run(dayAgo).changes;
      n += this.db.prepare('DELETE FROM pending_events WHERE created_at < ?').run(now - 3_600_000).changes;
      n += this.db.prepare('DELETE FROM oauth_flows WHERE expires_at < ?').run(now).changes;
      n += this.db.prepare('DELETE FROM login_transactions WHERE expires_at < ?').run(now).changes;
      n += this.db.prepare('DELETE FROM browser_sessions WHERE expires_at < ?').run(now).changes;
      return n;
    })();
  }
}
