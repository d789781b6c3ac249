export { ConnectionService, type ConnectionServiceOptions, type DisconnectActor, type DisconnectOutcome } from './service.js';
export { needsRefresh, TokenRefresher, type OpenConnection, type RefreshOptions, type RefreshVault, type Usable } from './refresh.js';
export { summarizeConnection, type ConnectionSummary } from './summary.js';
export { LAST_USED_EVERY_MS, lastUsedIsDue, UsageMarks } from './last-used.js';
export { connectionIsDead, upstreamRefusalVerdict, type RefusalVerdict } from './provider-check.js';
