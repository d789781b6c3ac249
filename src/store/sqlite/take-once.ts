import type { Statement } from 'better-sqlite3';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

/**
 * A table of one-time rows, put once and taken once by `DELETE … RETURNING`: the sign-in
 * transactions and the provider OAuth flows. Their repositories stay two (types.ts says why: a
 * flow belongs to a pending connection and is taken per provider); only the SQLite mechanics are
 * shared, with both statements prepared once.
 */
export class SqliteTakeOnce<Row extends object, Key extends unknown[]> {
  readonly #put: Statement;
  readonly #take: Statement;

  constructor(
    db: Db,
    private readonly gate: Runner,
    sql: { put: string; take: string },
  ) {
    this.#put = db.prepare(sql.put);
    this.#take = db.prepare(sql.take);
  }

  put(row: Row): Promise<void> {
    return this.gate.run(() => void this.#put.run(row));
  }

  take(...key: Key): Promise<Row | undefined> {
    return this.gate.run(() => this.#take.get(...key) as Row | undefined);
  }
}
