import { sha256Hex } from '../../crypto/index.js';
import type pg from 'pg';
import type { QueryResult, QueryResultRow } from 'pg';

/** What a repository runs its SQL on: the pool, or one client inside `withTransaction`. */
export interface Queryable {
  /** True on the client of an open transaction (where a repository must not start another). */
  readonly inTransaction: boolean;
  query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
  /** Runs several statements atomically: in a transaction of their own, or in the open one. */
  atomically<T>(fn: (q: Queryable) => Promise<T>): Promise<T>;
}

const names = new Map<string, string>();

/** A statement name derived from its text, so one name always means one text on every connection. */
function statementName(text: string): string {
  let name = names.get(text);
  if (!name) {
    name = `b_${sha256Hex(text).slice(0, 24)}`;
    names.set(text, name);
  }
  return name;
}

/**
 * Runs every statement as a named prepared statement: each connection parses and plans a query
 * once instead of on every call (about 90 µs of a find, measured against a local server).
 * Repositories only ever pass constant SQL text, so the set of names stays small.
 */
export class PreparedStatements implements Queryable {
  constructor(
    readonly target: pg.Pool | pg.PoolClient,
    readonly inTransaction: boolean,
  ) {}

  query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>> {
    return this.target.query<R>({ name: statementName(text), text, ...(values ? { values } : {}) });
  }

  atomically<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    // A client is only ever handed out inside `withTransaction`; over the pool, start one.
    return this.inTransaction ? fn(this) : withTransaction(this.target as pg.Pool, fn);
  }
}

/**
 * Runs `fn` between BEGIN and COMMIT on one client of `pool` (ROLLBACK when it throws) and always
 * gives the client back; a client whose connection broke is handed back with the error so the
 * pool discards it instead of reusing it.
 */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: Queryable) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // While checked out, a client has no pool listener: an unhandled 'error' (server gone between
  // two statements) would crash the process.
  const onError = (err: Error) => {
    broken = err;
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await fn(new PreparedStatements(client, true));
    await client.query('COMMIT');
    return result;
  } catch (err) {
    if (!broken) {
      await client.query('ROLLBACK').catch((rollbackErr: unknown) => {
        broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
      });
    }
    throw err;
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}
