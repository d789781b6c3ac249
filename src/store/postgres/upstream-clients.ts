import type { UpstreamClientRepository, UpstreamClientRow } from '../types.js';
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
}
