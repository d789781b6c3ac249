import pg from 'pg';
import type { QueryResult, QueryResultRow } from 'pg';

/** What a repository runs its SQL on: the pool, or one client inside `withTransaction`. */
export interface Queryable {
  query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
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
    const result = await fn(client);
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

/**
 * Runs several statements atomically. Repositories over the pool get a transaction of their own;
 * over a client they are already inside `withTransaction` (the only place clients are handed out).
 */
export function atomically<T>(q: Queryable, fn: (q: Queryable) => Promise<T>): Promise<T> {
  return q instanceof pg.Pool ? withTransaction(q, fn) : fn(q);
}
