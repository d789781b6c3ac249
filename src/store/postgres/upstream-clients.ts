import type { UpstreamClientCursor, UpstreamClientRepository, UpstreamClientRow } from '../types.js';
import type { Queryable } from './queryable.js';

export class PgUpstreamClientRepository implements UpstreamClientRepository {
  constructor(private readonly q: Queryable) {}

  async putIfAbsent(r: UpstreamClientRow): Promise<UpstreamClientRow> {
    // The loser of a race waits on the winner's row lock, then does nothing; the SELECT sees the winner.
    await this.q.query(
      `INSERT INTO upstream_clients (issuer, client_key, client_id, client_secret_sealed, key_id, registered_at, metadata_json)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (issuer, client_key) DO NOTHING`,
      [r.issuer, r.client_key, r.client_id, r.client_secret_sealed, r.key_id, r.registered_at, r.metadata_json],
    );
    return (await this.find(r.issuer, r.client_key))!;
  }

  async find(issuer: string, clientKey: string): Promise<UpstreamClientRow | undefined> {
    // BIGINT arrives as a number (this store's pool parses it so).
    const r = await this.q.query<UpstreamClientRow>('SELECT * FROM upstream_clients WHERE issuer = $1 AND client_key = $2', [
      issuer,
      clientKey,
    ]);
    return r.rows[0];
  }

  async delete(issuer: string, clientKey: string, clientId: string): Promise<boolean> {
    const r = await this.q.query('DELETE FROM upstream_clients WHERE issuer = $1 AND client_key = $2 AND client_id = $3', [
      issuer,
      clientKey,
      clientId,
    ]);
    return r.rowCount === 1;
  }

  async deleteForClientKey(clientKey: string): Promise<number> {
    const r = await this.q.query('DELETE FROM upstream_clients WHERE client_key = $1', [clientKey]);
    return r.rowCount ?? 0;
  }

  async sealedUnderOtherKeys(keyId: string, after: UpstreamClientCursor | undefined, limit: number): Promise<UpstreamClientRow[]> {
    // Byte order (COLLATE "C"), as SQLite's: a database's language collation must not reorder the
    // keyset, or a page could skip a row. The table is a row per upstream and callback: no index needed.
    const r = await this.q.query<UpstreamClientRow>(
      `SELECT * FROM upstream_clients
       WHERE client_secret_sealed IS NOT NULL AND key_id IS DISTINCT FROM $1
         AND ($2::text IS NULL OR (issuer COLLATE "C", client_key COLLATE "C") > ($2 COLLATE "C", $3::text COLLATE "C"))
       ORDER BY issuer COLLATE "C", client_key COLLATE "C" LIMIT $4`,
      [keyId, after?.issuer ?? null, after?.client_key ?? null, limit],
    );
    return r.rows;
  }

  async reseal(row: UpstreamClientRow, next: { key_id: string; client_secret_sealed: string }): Promise<boolean> {
    const r = await this.q.query(
      'UPDATE upstream_clients SET key_id = $1, client_secret_sealed = $2 WHERE issuer = $3 AND client_key = $4 AND client_secret_sealed = $5',
      [next.key_id, next.client_secret_sealed, row.issuer, row.client_key, row.client_secret_sealed],
    );
    return r.rowCount === 1;
  }

  async countByKey(): Promise<Array<{ key_id: string; n: number }>> {
    // count(*) is BIGINT, which this store's pool parses as a number.
    const r = await this.q.query<{ key_id: string; n: number }>(
      `SELECT coalesce(key_id, '') AS key_id, count(*) AS n FROM upstream_clients
       WHERE client_secret_sealed IS NOT NULL GROUP BY coalesce(key_id, '') ORDER BY coalesce(key_id, '') COLLATE "C"`,
    );
    return r.rows;
  }
}
