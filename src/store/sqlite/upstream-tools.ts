import type { UpstreamToolsRepository, UpstreamToolsRow } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqliteUpstreamToolsRepository implements UpstreamToolsRepository {
  readonly #put;

  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
  ) {
    this.#put = db.prepare(
      `INSERT INTO upstream_tools (upstream, definitions_json, seen_at) VALUES (?, ?, ?)
       ON CONFLICT (upstream) DO UPDATE SET definitions_json = excluded.definitions_json, seen_at = excluded.seen_at
       WHERE upstream_tools.definitions_json <> excluded.definitions_json`,
    );
  }

  get(upstream: string): Promise<UpstreamToolsRow | undefined> {
    return this.gate.run(
      () => this.db.prepare('SELECT * FROM upstream_tools WHERE upstream = ?').get(upstream) as UpstreamToolsRow | undefined,
    );
  }

  all(): Promise<UpstreamToolsRow[]> {
    return this.gate.run(() => this.db.prepare('SELECT * FROM upstream_tools ORDER BY upstream').all() as UpstreamToolsRow[]);
  }

  put(upstream: string, definitionsJson: string, at = Date.now()): Promise<boolean> {
    return this.gate.run(() => this.#put.run(upstream, definitionsJson, at).changes === 1);
  }
}
