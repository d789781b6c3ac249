import type { Repositories, Store } from '../types.js';
import { migrate } from './migrate.js';
import { createPool, ping } from './pool.js';
import { PreparedStatements, withTransaction } from './queryable.js';
import { repositoriesOver } from './repositories.js';
import { PostgresSettledFeed } from './settled-feed.js';
import { classify } from './unavailable.js';

export { migrate, MIGRATIONS_DIR } from './migrate.js';
export { SETTLED_CHANNEL } from './pending-connections.js';

export interface PostgresStoreOptions {
  poolMax?: number;
  statementTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** Told about errors that must not crash the process (idle clients dropped, LISTEN connection lost). */
  onError?: (event: string, detail: Record<string, unknown>) => void;
}

/** Migrates the database at `url` (safe with several instances starting at once) and opens the store. */
export async function openPostgresStore(url: string, options: PostgresStoreOptions = {}): Promise<Store> {
  const poolMax = options.poolMax ?? 10;
  const statementTimeoutMs = options.statementTimeoutMs ?? 5_000;
  const connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
  const onError = options.onError ?? (() => {});

  await migrate(url, { connectTimeoutMs, onError });
  const pool = createPool(url, { poolMax, statementTimeoutMs, connectTimeoutMs, onError });
  // Readiness probes get a connection of their own: a saturated pool is load, not an outage.
  const probe = createPool(url, { poolMax: 1, statementTimeoutMs, connectTimeoutMs, onError });
  const settledFeed = new PostgresSettledFeed(url, { connectTimeoutMs, onError });
  let closing: Promise<void> | undefined;

  return {
    kind: 'postgres',
    ...repositoriesOver(new PreparedStatements(pool, false)),
    settledFeed,
    transaction: <T>(fn: (tx: Repositories) => Promise<T>) =>
      withTransaction(pool, (q) => fn(repositoriesOver(q))).catch((err: unknown) => {
        throw classify(err);
      }),
    ping: () => ping(probe),
    close: () => (closing ??= Promise.all([settledFeed.close(), pool.end(), probe.end()]).then(() => undefined)),
  };
}
