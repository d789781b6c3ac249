import { AuditStore } from './audit.js';
import { ConnectionStore } from './connections.js';
import { openDatabase, type Db } from './database.js';
import { LoginTransactionStore } from './login-transactions.js';
import { OAuthFlowStore } from './oauth-flows.js';
import { PendingConnectionStore } from './pending-connections.js';
import { RefreshLeaseStore } from './refresh-leases.js';
import { SessionStore } from './sessions.js';

export type { AuditEvent, AuditRow } from './audit.js';
export type { ConnectionRow, ConnectionStatus } from './connections.js';
export type { LoginTransaction } from './login-transactions.js';
export type { OAuthFlow } from './oauth-flows.js';
export type { PendingConnection, PendingStatus } from './pending-connections.js';
export type { SessionRow } from './sessions.js';
export { openDatabase, migrate, type Db } from './database.js';

/** Every repository over one database handle. */
export interface Store {
  db: Db;
  sessions: SessionStore;
  loginTransactions: LoginTransactionStore;
  pending: PendingConnectionStore;
  oauthFlows: OAuthFlowStore;
  connections: ConnectionStore;
  leases: RefreshLeaseStore;
  audit: AuditStore;
  /** Runs `fn` in one SQLite transaction: all of its writes land, or none do. */
  transaction<T>(fn: () => T): T;
  close(): void;
}

export function openStore(path: string): Store {
  const db = openDatabase(path);
  return {
    db,
    sessions: new SessionStore(db),
    loginTransactions: new LoginTransactionStore(db),
    pending: new PendingConnectionStore(db),
    oauthFlows: new OAuthFlowStore(db),
    connections: new ConnectionStore(db),
    leases: new RefreshLeaseStore(db),
    audit: new AuditStore(db),
    transaction: (fn) => db.transaction(fn).immediate(),
    close: () => db.close(),
  };
}
