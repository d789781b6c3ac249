// The connection core: one principal's connection to one provider, found, refreshed, used or asked for.
export { ConnectionService, type ConnectionServiceOptions, type DisconnectActor, type DisconnectOutcome } from './service.js';
export { needsRefresh, TokenRefresher, type OpenConnection, type RefreshOptions, type RefreshVault, type Usable } from './refresh.js';
export { ConnectionRead, resolveConnection, type AskReason, type Resolution, type ResolveDeps, type ResolveRequest } from './resolve.js';
export { useConnection, type RefusalVerdict, type TokenAudience, type UseDeps, type UseOutcome, type UseRequest } from './use.js';
export { ConnectLinks, DECLINED_IN_CLIENT, type ConnectLinkOptions } from './links.js';
export { CompletionWatcher } from './completion-watcher.js';
export { CODE_EXCHANGE_FAILED, FAILURE_TOLD_WITHIN_MS, failureReason, providerErrorReason, type FailureReason } from './failure-reasons.js';
export { summarizeConnection, type ConnectionSummary } from './summary.js';
export { LAST_USED_EVERY_MS, lastUsedIsDue, UsageMarks } from './last-used.js';
