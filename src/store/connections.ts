import type { Db } from './database.js';

export interface ConnectionRow {
  issuer: string;
  subject: string;
  provider: string;
  account_id: string;
  account_login: string;
  scopes: string;
  key_id: string;
  sealed_tokens: string;
  created_at: number;
  updated_at: number;
  last_used_at: number | null;
  status: ConnectionStatus;
  status_reason: string | null;
}

export type ConnectionStatus = 'active' | 'reauth_required';

type Owner = { issuer: string; subject: string };

/** Linked provider accounts, one per (principal, provider). Tokens arrive here already sealed. */
export class ConnectionStore {
  // Prepared once: these run on every tool call (preparing costs more than the lookup itself).
  readonly #find;
  readonly #list;
  readonly #touch;

  constructor(private readonly db: Db) {
    this.#find = db.prepare('SELECT * FROM connections WHERE issuer = ? AND subject = ? AND provider = ?');
    this.#list = db.prepare('SELECT * FROM connections WHERE issuer = ? AND subject = ? ORDER BY provider');
    this.#touch = db.prepare('UPDATE connections SET last_used_at = ? WHERE issuer = ? AND subject = ? AND provider = ?');
  }

  /** Inserts or replaces the principal's connection to `provider`, keeping its creation time. */
  save(row: Omit<ConnectionRow, 'created_at' | 'updated_at' | 'last_used_at' | 'status' | 'status_reason'>): void {
    const now = Date.now();
    this.db
      .prepare(
        `INSERT INTO connections (issuer, subject, provider, account_id, account_login, scopes, key_id, sealed_tokens, created_at, updated_at)
         VALUES (@issuer, @subject, @provider, @account_id, @account_login, @scopes, @key_id, @sealed_tokens, @now, @now)
         ON CONFLICT (issuer, subject, provider) DO UPDATE SET
           account_id = excluded.account_id, account_login = excluded.account_login, scopes = excluded.scopes,
           key_id = excluded.key_id, sealed_tokens = excluded.sealed_tokens, updated_at = excluded.updated_at,
           status = 'active', status_reason = NULL`,
      )
      .run({ ...row, now });
  }

  find(owner: Owner, provider: string): ConnectionRow | undefined {
    return this.#find.get(owner.issuer, owner.subject, provider) as ConnectionRow | undefined;
  }

  list(owner: Owner): ConnectionRow[] {
    return this.#list.all(owner.issuer, owner.subject) as ConnectionRow[];
  }

  /**
   * Replaces the tokens only if they are still the ones the caller read (compare-and-swap on the
   * sealed value), so a slower writer can never overwrite a newer refresh.
   */
  replaceTokens(owner: Owner, provider: string, expected: string, next: { key_id: string; sealed_tokens: string; scopes: string }): boolean {
    return (
      this.db
        .prepare(
          `UPDATE connections SET key_id = ?, sealed_tokens = ?, scopes = ?, updated_at = ?, status = 'active', status_reason = NULL
           WHERE issuer = ? AND subject = ? AND provider = ? AND sealed_tokens = ?`,
        )
        .run(next.key_id, next.sealed_tokens, next.scopes, Date.now(), owner.issuer, owner.subject, provider, expected).changes === 1
    );
  }

  /** Marks the connection as needing the user again; the row (and its account binding) stays. */
  markReauthRequired(owner: Owner, provider: string, reason: string): boolean {
    return (
      this.db
        .prepare(`UPDATE connections SET status = 'reauth_required', status_reason = ?, updated_at = ? WHERE issuer = ? AND subject = ? AND provider = ? AND status = 'active'`)
        .run(reason, Date.now(), owner.issuer, owner.subject, provider).changes === 1
    );
  }

  /** Other principals' connections to the same upstream account. */
  othersWithAccount(owner: Owner, provider: string, accountId: string): ConnectionRow[] {
    return this.db
      .prepare('SELECT * FROM connections WHERE provider = ? AND account_id = ? AND NOT (issuer = ? AND subject = ?)')
      .all(provider, accountId, owner.issuer, owner.subject) as ConnectionRow[];
  }

  /** The next batch (by rowid, after `afterRowid`) of rows sealed under any key but `keyId`, for re-encryption. */
  sealedUnderOtherKeys(keyId: string, afterRowid: number, limit: number): Array<ConnectionRow & { rowid: number }> {
    return this.db.prepare('SELECT rowid, * FROM connections WHERE key_id != ? AND rowid > ? ORDER BY rowid LIMIT ?').all(keyId, afterRowid, limit) as Array<ConnectionRow & { rowid: number }>;
  }

  /** Re-seals one row if it is unchanged since it was read. */
  reseal(row: ConnectionRow, next: { key_id: string; sealed_tokens: string }): boolean {
    return (
      this.db
        .prepare('UPDATE connections SET key_id = ?, sealed_tokens = ? WHERE issuer = ? AND subject = ? AND provider = ? AND sealed_tokens = ?')
        .run(next.key_id, next.sealed_tokens, row.issuer, row.subject, row.provider, row.sealed_tokens).changes === 1
    );
  }

  countByKey(): Array<{ key_id: string; n: number }> {
    return this.db.prepare('SELECT key_id, count(*) AS n FROM connections GROUP BY key_id ORDER BY key_id').all() as Array<{ key_id: string; n: number }>;
  }

  touch(owner: Owner, provider: string, at = Date.now()): void {
    this.#touch.run(at, owner.issuer, owner.subject, provider);
  }

  delete(owner: Owner, provider: string): boolean {
    return this.db.prepare('DELETE FROM connections WHERE issuer = ? AND subject = ? AND provider = ?').run(owner.issuer, owner.subject, provider).changes === 1;
  }
}
