import type { Repositories } from '../types.js';
import { PgAuditRepository } from './audit.js';
import { PgConnectionRepository } from './connections.js';
import { PgLoginTransactionRepository } from './login-transactions.js';
import { PgOAuthFlowRepository } from './oauth-flows.js';
import { PgPendingConnectionRepository } from './pending-connections.js';
import type { Queryable } from './queryable.js';
import { PgRefreshLeaseRepository } from './refresh-leases.js';
import { PgSessionRepository } from './sessions.js';

/** Every repository over one queryable: the pool for the store, a client for a transaction. */
export function repositoriesOver(q: Queryable): Repositories {
  return {
    sessions: new PgSessionRepository(q),
    loginTransactions: new PgLoginTransactionRepository(q),
    pending: new PgPendingConnectionRepository(q),
    oauthFlows: new PgOAuthFlowRepository(q),
    connections: new PgConnectionRepository(q),
    leases: new PgRefreshLeaseRepository(q),
    audit: new PgAuditRepository(q),
  };
}
