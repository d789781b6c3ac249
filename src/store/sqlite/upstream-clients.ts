import type { UpstreamClientCursor, UpstreamClientRepository, UpstreamClientRow } from '../types.js';
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

  deleteForClientKey(clientKey: string): Promise<number> {
    return this.gate.run(() => this.db.prepare('DELETE FROM upstream_clients WHERE client_key = ?').run(clientKey).changes);
  }

  sealedUnderOtherKeys(keyId: string, after: UpstreamClientCursor | undefined, limit: number): Promise<UpstreamClientRow[]> {
    // TEXT compares by bytes here (BINARY), the order the PostgreSQL twin asks for with COLLATE "C".
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `SELECT * FROM upstream_clients
             WHERE client_secret_sealed IS NOT NULL AND key_id IS NOT ? AND (? IS NULL OR (issuer, client_key) > (?, ?))
             ORDER BY issuer, client_key LIMIT ?`,
          )
          .all(keyId, after?.issuer ?? null, after?.issuer ?? null, after?.client_key ?? null, limit) as UpstreamClientRow[],
    );
  }

  reseal(row: UpstreamClientRow, next: { key_id: string; client_secret_sealed: string }): Promise<boolean> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            'UPDATE upstream_clients SET key_id = ?, client_secret_sealed = ? WHERE issuer = ? AND client_key = ? AND client_secret_sealed = ?',
          )
          .run(next.key_id, next.client_secret_sealed, row.issuer, row.client_key, row.client_secret_sealed).changes === 1,
    );
  }

  countByKey(): Promise<Array<{ key_id: string; n: number }>> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `SELECT coalesce(key_id, '') AS key_id, count(*) AS n FROM upstream_clients
             WHERE client_secret_sealed IS NOT NULL GROUP BY coalesce(key_id, '') ORDER BY 1`,
          )
          .all() as Array<{ key_id: string; n: number }>,
    );
  }
}
