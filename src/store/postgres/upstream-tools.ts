import type { UpstreamToolsRepository, UpstreamToolsRow } from '../types.js';
import type { Queryable } from './queryable.js';

export class PgUpstreamToolsRepository implements UpstreamToolsRepository {
  constructor(private readonly q: Queryable) {}

  async get(upstream: string): Promise<UpstreamToolsRow | undefined> {
    const r = await this.q.query<UpstreamToolsRow>('SELECT * FROM upstream_tools WHERE upstream = $1', [upstream]);
    return r.rows[0];
  }

  async all(): Promise<UpstreamToolsRow[]> {
    const r = await this.q.query<UpstreamToolsRow>('SELECT * FROM upstream_tools ORDER BY upstream');
    return r.rows;
  }

  async put(upstream: string, definitionsJson: string, at = Date.now()): Promise<boolean> {
    const r = await this.q.query(
      `INSERT INTO upstream_tools (upstream, definitions_json, seen_at) VALUES ($1, $2, $3)
       ON CONFLICT (upstream) DO UPDATE SET definitions_json = excluded.definitions_json, seen_at = excluded.seen_at
       WHERE upstream_tools.definitions_json <> excluded.definitions_json`,
      [upstream, definitionsJson, at],
    );
    return r.rowCount === 1;
  }
}
