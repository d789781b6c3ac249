import type { Repositories } from '../types.js';
import { PgAdminRepository } from './admin.js';
import { PgApprovalRepository } from './approvals.js';
import { PgAuditRepository, type PgAuditChain } from './audit.js';
import { PgConnectionRepository } from './connections.js';
import { PgClientAssertionRepository, PgServiceUsageRepository } from './exchange.js';
import { PgLoginTransactionRepository } from './login-transactions.js';
import { PgOAuthFlowRepository } from './oauth-flows.js';
import { PgPendingConnectionRepository } from './pending-connections.js';
import { PgRateLimitRepository } from './rate-limits.js';
import type { Queryable } from './queryable.js';
import { PgRefreshLeaseRepository } from './refresh-leases.js';
import { PgSessionRepository } from './sessions.js';
import { PgUpstreamClientRepository } from './upstream-clients.js';
import { PgUpstreamToolsRepository } from './upstream-tools.js';
import { PgWebhookOutboxRepository } from './webhooks.js';
import { guarded } from './unavailable.js';

/** Every repository over one queryable: the pool for the store, a client for a transaction. */
export function repositoriesOver(q: Queryable, auditChain?: PgAuditChain): Repositories {
  return {
    sessions: guarded(new PgSessionRepository(q)),
    loginTransactions: guarded(new PgLoginTransactionRepository(q)),
    pending: guarded(new PgPendingConnectionRepository(q)),
    oauthFlows: guarded(new PgOAuthFlowRepository(q)),
    connections: guarded(new PgConnectionRepository(q)),
    leases: guarded(new PgRefreshLeaseRepository(q)),
    audit: guarded(new PgAuditRepository(q, auditChain)),
    rateLimits: guarded(new PgRateLimitRepository(q)),
    clientAssertions: guarded(new PgClientAssertionRepository(q)),
    serviceUsage: guarded(new PgServiceUsageRepository(q)),
    admin: guarded(new PgAdminRepository(q)),
    upstreamClients: guarded(new PgUpstreamClientRepository(q)),
    upstreamTools: guarded(new PgUpstreamToolsRepository(q)),
    webhooks: guarded(new PgWebhookOutboxRepository(q)),
    approvals: guarded(new PgApprovalRepository(q)),
  };
}
