import { openPostgresStore } from './postgres/index.js';
import { openSqliteStore } from './sqlite/index.js';
import { tracingEnabled } from '../observability/tracing.js';
import { traceStore } from './traced.js';
import type { Store } from './types.js';
import type { AuditChainKey } from './audit-chain.js';

export type * from './types.js';
export { auditChainKey, AuditStream, markTag, rowMac, streamGenesis, type AuditChainKey } from './audit-chain.js';
export type * from './approvals.js';
export { APPROVAL_FEED_PREFIX } from './approvals.js';
export { StoreUnavailableError } from './errors.js';
export { SettledWatcher, type SettledSource, type SettledWaitOutcome } from './settled-watcher.js';
export { OAUTH_FLOW_TTL_MS, PENDING_PRUNE_GRACE_MS, TOLD_PREFIX } from './types.js';
export { extendSqliteSchema, openSqliteStore, sqliteHandle, type SqliteStore } from './sqlite/index.js';
export type { Db as SqliteDb } from './sqlite/database.js';

/**
 * Where the data is (src/config/env.ts `Config['database']`), spelled out here so that src/store/
 * imports nothing of src/config/, which reads provider definitions from src/providers/, which keeps
 * its registrations in the store (test/layering.test.ts: no folder cycle).
 */
export interface DatabaseSettings {
  url: string | undefined;
  path: string;
  poolMax: number;
  statementTimeoutMs: number;
}

/**
 * Opens (and migrates) the store the configuration names: PostgreSQL when DATABASE_URL is set,
 * shared by every instance; otherwise the embedded SQLite file at DATABASE_PATH. While tracing is
 * on, every repository call runs in a span (src/store/traced.ts).
 */
export async function openStore(
  database: DatabaseSettings,
  onError?: (event: string, detail: Record<string, unknown>) => void,
  options: { auditChain?: AuditChainKey } = {},
): Promise<Store> {
  const store = await openConfiguredStore(database, onError, options.auditChain);
  return tracingEnabled() ? traceStore(store) : store;
}

async function openConfiguredStore(
  database: DatabaseSettings,
  onError: ((event: string, detail: Record<string, unknown>) => void) | undefined,
  auditChain: AuditChainKey | undefined,
): Promise<Store> {
  if (!database.url) return openSqliteStore(database.path, auditChain ? { auditChain } : {});
  try {
    return await openPostgresStore(database.url, {
      poolMax: database.poolMax,
      statementTimeoutMs: database.statementTimeoutMs,
      ...(onError ? { onError } : {}),
      ...(auditChain ? { auditChain } : {}),
    });
  } catch (err) {
    // pg's messages name the host and user, never the password.
    throw new Error(`DATABASE_URL: cannot open the PostgreSQL database (${err instanceof Error ? err.message : String(err)})`, {
      cause: err,
    });
  }
}
