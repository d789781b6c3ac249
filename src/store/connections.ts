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
}

type Owner = { issuer: string; subject: string };

/** Linked provider accounts, one per (principal, provider). Tokens arrive here already sealed. */
export class ConnectionStore {
  constructor(private readonly db: Db) {}

  /** Inserts or replaces the principal's connection to `provider`, keeping its creation time. */
  save(row: Omit<ConnectionRow, 'created_at' | 'updated_at' | 'last_used_at'>): void {
    const now = Date.now();
    this.db
      .prepare(
        `INSERT INTO connections (issuer, subject, provider, account_id, account_login, scopes, key_id, sealed_tokens, created_at, updated_at)
         VALUES (@issuer, @subject, @provider, @account_id, @account_login, @scopes, @key_id, @sealed_tokens, @now, @now)
         ON CONFLICT (issuer, subject, provider) DO UPDATE SET
           account_id = excluded.account_id, account_login = excluded.account_login, scopes = excluded.scopes,
           key_id = excluded.key_id, sealed_tokens = excluded.sealed_tokens, updated_at = excluded.updated_at`,
      )
      .run({ ...row, now });
  }

  find(owner: Owner, provider: string): ConnectionRow | undefined {
    return this.db
      .prepare('SELECT * FROM connections WHERE issuer = ? AND subject = ? AND provider = ?')
      .get(owner.issuer, owner.subject, provider) as ConnectionRow | undefined;
  }

  list(owner: Owner): ConnectionRow[] {
    return this.db
      .prepare('SELECT * FROM connections WHERE issuer = ? AND subject = ? ORDER BY provider')
      .all(owner.issuer, owner.subject) as ConnectionRow[];
  }

  touch(owner: Owner, provider: string, at = Date.now()): void {
    this.db.prepare('UPDATE connections SET last_used_at = ? WHERE issuer = ? AND subject = ? AND provider = ?').run(at, owner.issuer, owner.subject, provider);
  }

  delete(owner: Owner, provider: string): boolean {
    return this.db.prepare('DELETE FROM connections WHERE issuer = ? AND subject = ? AND provider = ?').run(owner.issuer, owner.subject, provider).changes === 1;
  }
}
