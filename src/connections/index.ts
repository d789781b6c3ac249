export { ConnectionService, type ConnectionServiceOptions, type DisconnectActor, type DisconnectOutcome } from './service.js';
export { needsRefresh, TokenRefresher, type OpenConnection, type RefreshOptions, type RefreshVault, type Usable } from './refresh.js';
export { summarizeConnection, type ConnectionSummary } from './summary.js';
