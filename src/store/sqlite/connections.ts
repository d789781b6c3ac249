import type { ConnectionRepository, ConnectionRow, NewConnection, Owner } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqliteConnectionRepository implements ConnectionRepository {
  // Prepared once: these run on every tool call (preparing costs more than the lookup itself).
  readonly #find;
  readonly #list;
  readonly #touch;

  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
    /** Where `touch` runs: the write batch, or the open transaction. */
    private readonly writes: Runner,
  ) {
    this.#find = db.prepare('SELECT * FROM connections WHERE issuer = ? AND subject = ? AND provider = ?');
    this.#list = db.prepare('SELECT * FROM connections WHERE issuer = ? AND subject = ? ORDER BY provider');
    this.#touch = db.prepare('UPDATE connections SET last_used_at = ? WHERE issuer = ? AND subject = ? AND provider = ?');
  }

  save(row: NewConnection): Promise<void> {
    const now = Date.now();
    return this.gate.run(() =>
      this.db.transaction(() => {
        // A connection replaced by another upstream account starts without the old one's service usage.
        this.db
          .prepare(
            `DELETE FROM connection_service_usage WHERE issuer = ? AND subject = ? AND provider = ?
             AND EXISTS (SELECT 1 FROM connections c WHERE c.issuer = ? AND c.subject = ? AND c.provider = ? AND c.account_id != ?)`,
          )
          .run(row.issuer, row.subject, row.provider, row.issuer, row.subject, row.provider, row.account_id);
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
      })(),
    );
  }

  find(owner: Owner, provider: string): Promise<ConnectionRow | undefined> {
    return this.gate.run(() => this.#find.get(owner.issuer, owner.subject, provider) as ConnectionRow | undefined);
  }

  list(owner: Owner): Promise<ConnectionRow[]> {
    return this.gate.run(() => this.#list.all(owner.issuer, owner.subject) as ConnectionRow[]);
  }

  replaceTokens(
    owner: Owner,
    provider: string,
    expected: string,
    next: { key_id: string; sealed_tokens: string; scopes: string },
  ): Promise<boolean> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `UPDATE connections SET key_id = ?, sealed_tokens = ?, scopes = ?, updated_at = ?, status = 'active', status_reason = NULL
             WHERE issuer = ? AND subject = ? AND provider = ? AND sealed_tokens = ?`,
          )
          .run(next.key_id, next.sealed_tokens, next.scopes, Date.now(), owner.issuer, owner.subject, provider, expected).changes === 1,
    );
  }

  markReauthRequired(owner: Owner, provider: string, reason: string): Promise<boolean> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `UPDATE connections SET status = 'reauth_required', status_reason = ?, updated_at = ? WHERE issuer = ? AND subject = ? AND provider = ? AND status = 'active'`,
          )
          .run(reason, Date.now(), owner.issuer, owner.subject, provider).changes === 1,
    );
  }

  othersWithAccount(owner: Owner, provider: string, accountId: string): Promise<ConnectionRow[]> {
    return this.gate.run(
      () =>
        this.db
          .prepare('SELECT * FROM connections WHERE provider = ? AND account_id = ? AND NOT (issuer = ? AND subject = ?)')
          .all(provider, accountId, owner.issuer, owner.subject) as ConnectionRow[],
    );
  }

  sealedUnderOtherKeys(keyId: string, afterSeq: number, limit: number): Promise<Array<ConnectionRow & { seq: number }>> {
    return this.gate.run(
      () =>
        this.db
          .prepare('SELECT rowid AS seq, * FROM connections WHERE key_id != ? AND rowid > ? ORDER BY rowid LIMIT ?')
          .all(keyId, afterSeq, limit) as Array<ConnectionRow & { seq: number }>,
    );
  }

  reseal(row: ConnectionRow, next: { key_id: string; sealed_tokens: string }): Promise<boolean> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            'UPDATE connections SET key_id = ?, sealed_tokens = ? WHERE issuer = ? AND subject = ? AND provider = ? AND sealed_tokens = ?',
          )
          .run(next.key_id, next.sealed_tokens, row.issuer, row.subject, row.provider, row.sealed_tokens).changes === 1,
    );
  }

  countByKey(): Promise<Array<{ key_id: string; n: number }>> {
    return this.gate.run(
      () =>
        this.db.prepare('SELECT key_id, count(*) AS n FROM connections GROUP BY key_id ORDER BY key_id').all() as Array<{
          key_id: string;
          n: number;
        }>,
    );
  }

  touch(owner: Owner, provider: string, at = Date.now()): Promise<void> {
    return this.writes.run(() => void this.#touch.run(at, owner.issuer, owner.subject, provider));
  }

  delete(owner: Owner, provider: string): Promise<boolean> {
    // The services' usage goes with the connection, in the same transaction: a later connection never inherits it.
    return this.gate.run(() =>
      this.db.transaction(() => {
        this.db
          .prepare('DELETE FROM connection_service_usage WHERE issuer = ? AND subject = ? AND provider = ?')
          .run(owner.issuer, owner.subject, provider);
        return (
          this.db
            .prepare('DELETE FROM connections WHERE issuer = ? AND subject = ? AND provider = ?')
            .run(owner.issuer, owner.subject, provider).changes === 1
        );
      })(),
    );
  }
}
