import { AuditStream, type AuditChainKey, type ChainLink } from '../audit-chain.js';
import type { Repositories, Store } from '../types.js';
import { writeVoids } from './audit.js';
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
  /** Chains this instance's audit rows in a stream of its own (src/store/audit-chain.ts). */
  auditChain?: AuditChainKey;
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
  const stream = options.auditChain ? new AuditStream(options.auditChain) : undefined;
  const overPool = new PreparedStatements(pool, false);

  return {
    kind: 'postgres',
    ...repositoriesOver(overPool, stream ? { stream } : undefined),
    settledFeed,
    transaction: async <T>(fn: (tx: Repositories) => Promise<T>) => {
      const chained: ChainLink[] = [];
      try {
        return await withTransaction(pool, (q) => fn(repositoriesOver(q, stream ? { stream, chainedInTransaction: chained } : undefined)));
      } catch (err) {
        // Rows of this stream may already chain onto the ones rolled back: leave their places (best effort;
        // a gap left by an outage is reported by `audit verify` as a missing row, and logged here).
        if (stream && chained.length > 0)
          await writeVoids(overPool, stream, chained).catch((voidErr: unknown) =>
            onError('audit_chain_gap', {
              stream: stream.id,
              seqs: chained.map((l) => l.seq),
              message: voidErr instanceof Error ? voidErr.message : String(voidErr),
            }),
          );
        throw classify(err);
      }
    },
    ping: () => ping(probe),
    close: () => (closing ??= Promise.all([settledFeed.close(), pool.end(), probe.end()]).then(() => undefined)),
  };
}
