import pg from 'pg';
import type { CustomTypesConfig } from 'pg';

export const APPLICATION_NAME = 'mcp-connect-broker';

export type ErrorReporter = (event: string, detail: Record<string, unknown>) => void;

export interface PoolOptions {
  poolMax: number;
  statementTimeoutMs: number;
  connectTimeoutMs: number;
  onError: ErrorReporter;
}

const INT8_OID = 20;

/**
 * BIGINT (epoch ms, BIGSERIAL ids, COUNT(*)) as JS numbers, for this pool's clients only: pg's
 * global type registry is shared with anything else in the process that uses pg.
 */
export const int8AsNumber: CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format)) as CustomTypesConfig['getTypeParser'],
};

/** Reduces a pg error to fields that are safe to log (never the connection string). */
export function describeError(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: String(err) };
  const code = (err as { code?: unknown }).code;
  return { message: err.message, ...(typeof code === 'string' ? { errorCode: code } : {}) };
}

export function createPool(url: string, options: PoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolMax,
    connectionTimeoutMillis: options.connectTimeoutMs,
    idleTimeoutMillis: 30_000,
    statement_timeout: options.statementTimeoutMs,
    // The client-side guard for when the server cannot even answer with a timeout error.
    query_timeout: options.statementTimeoutMs + 1_000,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    application_name: APPLICATION_NAME,
    types: int8AsNumber,
  });
  // Idle clients error when the server restarts or drops them; without a listener that error
  // would be thrown from the EventEmitter and end the process. The pool discards such clients
  // by itself and opens new ones on the next query.
  pool.on('error', (err) => options.onError('postgres_idle_client_error', describeError(err)));
  return pool;
}

/**
 * Whether the server answers and takes writes (a standby, or a demoted primary after a failover,
 * answers but refuses every write), rejecting after `timeoutMs` even while a connection attempt is
 * still hanging. Give it a pool of its own: a busy main pool must not look like a dead database.
 */
export async function ping(pool: pg.Pool, timeoutMs = 2_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const query = pool.query<{ recovery: boolean }>('SELECT pg_is_in_recovery() AS recovery').then((r) => {
    if (r.rows[0]?.recovery) throw new Error('the database is read-only (in recovery)');
  });
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`postgres did not answer within ${timeoutMs} ms`)), timeoutMs);
  });
  // The loser of the race must not surface later as an unhandled rejection.
  query.catch(() => {});
  try {
    await Promise.race([query, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
