import type { UpstreamClientRepository, UpstreamClientRow } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqliteUpstreamClientRepository implements UpstreamClientRepository {
  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
  ) {}

  putIfAbsent(row: UpstreamClientRow): Promise<UpstreamClientRow> {
    return this.gate.run(() => {
      this.db
        .prepare(
          `INSERT INTO upstream_clients (issuer, client_key, client_id, client_secret_sealed, key_id, registered_at, metadata_json)
           VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (issuer, client_key) DO NOTHING`,
        )
        .run(row.issuer, row.client_key, row.client_id, row.client_secret_sealed, row.key_id, row.registered_at, row.metadata_json);
      return this.db
        .prepare('SELECT * FROM upstream_clients WHERE issuer = ? AND client_key = ?')
        .get(row.issuer, row.client_key) as UpstreamClientRow;
    });
  }

  find(issuer: string, clientKey: string): Promise<UpstreamClientRow | undefined> {
    return this.gate.run(
      () =>
        this.db.prepare('SELECT * FROM upstream_clients WHERE issuer = ? AND client_key = ?').get(issuer, clientKey) as
          UpstreamClientRow | undefined,
    );
  }

  delete(issuer: string, clientKey: string, clientId: string): Promise<boolean> {
    return this.gate.run(
      () =>
        this.db
          .prepare('DELETE FROM upstream_clients WHERE issuer = ? AND client_key = ? AND client_id = ?')
          .run(issuer, clientKey, clientId).changes === 1,
    );
  }
}
