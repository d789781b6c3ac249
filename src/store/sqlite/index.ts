import { AuditStream, type AuditChainKey } from '../audit-chain.js';
import type { Repositories, Store } from '../types.js';
import { SqliteAdminRepository } from './admin.js';
import { SqliteApprovalRepository } from './approvals.js';
import { SqliteAuditRepository } from './audit.js';
import { SqliteConnectionRepository } from './connections.js';
import { migrate, openDatabase, type Db } from './database.js';
import { SqliteClientAssertionRepository, SqliteServiceUsageRepository } from './exchange.js';
import { insideTransaction, TransactionGate, type Runner } from './gate.js';
import { SqliteLoginTransactionRepository } from './login-transactions.js';
import { SqliteOAuthFlowRepository } from './oauth-flows.js';
import { SqlitePendingConnectionRepository } from './pending-connections.js';
import { SqliteRateLimitRepository } from './rate-limits.js';
import { SqliteRefreshLeaseRepository } from './refresh-leases.js';
import { SqliteSessionRepository } from './sessions.js';
import { SqliteUpstreamClientRepository } from './upstream-clients.js';
import { SqliteUpstreamToolsRepository } from './upstream-tools.js';
import { SqliteWebhookOutboxRepository } from './webhooks.js';
import { WriteBatch } from './write-batch.js';

export interface SqliteStore extends Store {
  readonly kind: 'sqlite';
  /** The raw handle, for tests and the bench (development mode's tables go through {@link extendSqliteSchema}). */
  readonly db: Db;
}

/** `writes` runs the hot path's writes: the write batch outside a transaction, at once inside one. */
function repositories(db: Db, runner: Runner, stream: AuditStream | undefined, writes: Runner): Repositories {
  return {
    sessions: new SqliteSessionRepository(db, runner),
    loginTransactions: new SqliteLoginTransactionRepository(db, runner),
    pending: new SqlitePendingConnectionRepository(db, runner),
    oauthFlows: new SqliteOAuthFlowRepository(db, runner),
    connections: new SqliteConnectionRepository(db, runner, writes),
    leases: new SqliteRefreshLeaseRepository(db, runner),
    audit: new SqliteAuditRepository(db, runner, writes, stream),
    rateLimits: new SqliteRateLimitRepository(db, writes),
    clientAssertions: new SqliteClientAssertionRepository(db, writes),
    serviceUsage: new SqliteServiceUsageRepository(db, runner, writes),
    admin: new SqliteAdminRepository(db, runner),
    upstreamClients: new SqliteUpstreamClientRepository(db, runner),
    upstreamTools: new SqliteUpstreamToolsRepository(db, runner),
    webhooks: new SqliteWebhookOutboxRepository(db, runner),
    approvals: new SqliteApprovalRepository(db, runner),
  };
}

/**
 * The embedded store: one SQLite file, shared by the processes of one machine. With `auditChain`,
 * this process's audit rows are chained in a stream of its own (src/store/audit-chain.ts).
 */
export function openSqliteStore(path: string, options: { auditChain?: AuditChainKey } = {}): SqliteStore {
  const db = openDatabase(path);
  const gate = new TransactionGate();
  const stream = options.auditChain ? new AuditStream(options.auditChain) : undefined;
  const inTx = repositories(db, insideTransaction, stream, insideTransaction);
  const batch = new WriteBatch(db, gate, stream);
  return {
    kind: 'sqlite',
    db,
    ...repositories(db, gate, stream, batch),
    transaction: (fn) =>
      gate.exclusive(async () => {
        await insideTransaction.run(() => db.exec('BEGIN IMMEDIATE'));
        // Nothing else writes while the transaction is open: a rollback puts the stream's head back.
        const position = stream?.position();
        try {
          const result = await fn(inTx);
          db.exec('COMMIT');
          return result;
        } catch (err) {
          if (db.inTransaction) db.exec('ROLLBACK');
          if (position) stream!.restore(position);
          throw err;
        }
      }),
    ping: () => gate.run(() => void db.prepare('SELECT 1').get()),
    close: async () => {
      // What the requests queued is written before the file closes.
      if (db.open) await batch.flush();
      if (db.open) db.close();
    },
  };
}

/** The SQLite handle behind a store. */
export function sqliteHandle(store: Store): Db {
  if (store.kind !== 'sqlite' || !('db' in store)) throw new Error('this needs the SQLite store');
  return (store as SqliteStore).db;
}

/**
 * Applies another component's migrations (`dir/*.sql`) to the store's SQLite file and returns the
 * handle its own statements run on: how development mode (src/dev/store/) keeps its tables in the
 * broker's file while a production database never holds them. They are recorded in
 * `schema_migrations` beside the broker's, so their names must not collide with the broker's.
 */
export function extendSqliteSchema(store: Store, dir: string): Db {
  const db = sqliteHandle(store);
  migrate(db, dir);
  return db;
}
