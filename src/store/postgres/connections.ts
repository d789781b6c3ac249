import type { ConnectionRepository, ConnectionRow, NewConnection, Owner } from '../types.js';
import type { Queryable } from './queryable.js';

// Named rather than `*`: the table also has `seq`, which only `sealedUnderOtherKeys` hands out.
const COLUMNS =
  'issuer, subject, provider, account_id, account_login, scopes, key_id, sealed_tokens, created_at, updated_at, last_used_at, status, status_reason';

export class PgConnectionRepository implements ConnectionRepository {
  constructor(private readonly q: Queryable) {}

  async save(row: NewConnection): Promise<void> {
    // One statement (its parts see one snapshot): a connection replaced by another upstream account
    // starts without the old one's service usage.
    await this.q.query(
      `WITH cleared AS (
         DELETE FROM connection_service_usage WHERE issuer = $1 AND subject = $2 AND provider = $3
         AND EXISTS (SELECT 1 FROM connections c WHERE c.issuer = $1 AND c.subject = $2 AND c.provider = $3 AND c.account_id <> $4)
       )
       INSERT INTO connections (issuer, subject, provider, account_id, account_login, scopes, key_id, sealed_tokens, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
       ON CONFLICT (issuer, subject, provider) DO UPDATE SET
         account_id = excluded.account_id, account_login = excluded.account_login, scopes = excluded.scopes,
         key_id = excluded.key_id, sealed_tokens = excluded.sealed_tokens, updated_at = excluded.updated_at,
         status = 'active', status_reason = NULL`,
      [row.issuer, row.subject, row.provider, row.account_id, row.account_login, row.scopes, row.key_id, row.sealed_tokens, Date.now()],
    );
  }

  async find(owner: Owner, provider: string): Promise<ConnectionRow | undefined> {
    const r = await this.q.query<ConnectionRow>(`SELECT ${COLUMNS} FROM connections WHERE issuer = $1 AND subject = $2 AND provider = $3`, [
      owner.issuer,
      owner.subject,
      provider,
    ]);
    return r.rows[0];
  }

  async list(owner: Owner): Promise<ConnectionRow[]> {
    // COLLATE "C": byte order, as SQLite sorts, whatever locale the database was created with.
    const r = await this.q.query<ConnectionRow>(
      `SELECT ${COLUMNS} FROM connections WHERE issuer = $1 AND subject = $2 ORDER BY provider COLLATE "C"`,
      [owner.issuer, owner.subject],
    );
    return r.rows;
  }

  async replaceTokens(
    owner: Owner,
    provider: string,
    expected: string,
    next: { key_id: string; sealed_tokens: string; scopes: string },
  ): Promise<boolean> {
    const r = await this.q.query(
      `UPDATE connections SET key_id = $1, sealed_tokens = $2, scopes = $3, updated_at = $4, status = 'active', status_reason = NULL
       WHERE issuer = $5 AND subject = $6 AND provider = $7 AND sealed_tokens = $8`,
      [next.key_id, next.sealed_tokens, next.scopes, Date.now(), owner.issuer, owner.subject, provider, expected],
    );
    return r.rowCount === 1;
  }

  async markReauthRequired(owner: Owner, provider: string, reason: string): Promise<boolean> {
    const r = await this.q.query(
      `UPDATE connections SET status = 'reauth_required', status_reason = $1, updated_at = $2 WHERE issuer = $3 AND subject = $4 AND provider = $5 AND status = 'active'`,
      [reason, Date.now(), owner.issuer, owner.subject, provider],
    );
    return r.rowCount === 1;
  }

  async othersWithAccount(owner: Owner, provider: string, accountId: string): Promise<ConnectionRow[]> {
    // Inside a transaction, hold the upstream account until commit: under READ COMMITTED two users
    // linking the same account at once would otherwise both see "no one else" and both be saved.
    // (SQLite's BEGIN IMMEDIATE already serializes writers.)
    if (this.q.inTransaction)
      await this.q.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`connections:${provider}:${accountId}`]);
    const r = await this.q.query<ConnectionRow>(
      `SELECT ${COLUMNS} FROM connections WHERE provider = $1 AND account_id = $2 AND NOT (issuer = $3 AND subject = $4)`,
      [provider, accountId, owner.issuer, owner.subject],
    );
    return r.rows;
  }

  async sealedUnderOtherKeys(keyId: string, afterSeq: number, limit: number): Promise<Array<ConnectionRow & { seq: number }>> {
    const r = await this.q.query<ConnectionRow & { seq: number }>(
      `SELECT seq, ${COLUMNS} FROM connections WHERE key_id <> $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [keyId, afterSeq, limit],
    );
    return r.rows;
  }

  async reseal(row: ConnectionRow, next: { key_id: string; sealed_tokens: string }): Promise<boolean> {
    const r = await this.q.query(
      'UPDATE connections SET key_id = $1, sealed_tokens = $2 WHERE issuer = $3 AND subject = $4 AND provider = $5 AND sealed_tokens = $6',
      [next.key_id, next.sealed_tokens, row.issuer, row.subject, row.provider, row.sealed_tokens],
    );
    return r.rowCount === 1;
  }

  async countByKey(): Promise<Array<{ key_id: string; n: number }>> {
    // count(*) is BIGINT, which this store's pool parses as a number.
    const r = await this.q.query<{ key_id: string; n: number }>(
      'SELECT key_id, count(*) AS n FROM connections GROUP BY key_id ORDER BY key_id COLLATE "C"',
    );
    return r.rows;
  }

  async touch(owner: Owner, provider: string, at = Date.now()): Promise<void> {
    await this.q.query('UPDATE connections SET last_used_at = $1 WHERE issuer = $2 AND subject = $3 AND provider = $4', [
      at,
      owner.issuer,
      owner.subject,
      provider,
    ]);
  }

  async delete(owner: Owner, provider: string): Promise<boolean> {
    // The services' usage goes with the connection, in the same statement: a later connection never inherits it.
    const r = await this.q.query(
      `WITH usage AS (DELETE FROM connection_service_usage WHERE issuer = $1 AND subject = $2 AND provider = $3)
       DELETE FROM connections WHERE issuer = $1 AND subject = $2 AND provider = $3`,
      [owner.issuer, owner.subject, provider],
    );
    return r.rowCount === 1;
  }
}
