import type { Principal } from '../auth/principal.js';
import { samePrincipal } from '../auth/principal.js';
import type { Provider } from '../providers/provider.js';
import type { ConnectionRow, PendingConnection, Store } from '../store/index.js';
import type { Logger } from '../log.js';
import type { CompletionWatcher } from './completion-watcher.js';
import type { OpenConnection, Usable } from './refresh.js';
import { metrics } from '../observability/metrics.js';
import { failureReason } from './failure-reasons.js';
import { scopeList } from '../providers/scopes.js';

/** Why a usable token cannot be handed out: what the connect link will fix. */
export type AskReason = 'not_connected' | 'reauth_required' | 'insufficient_scope';

/**
 * The one answer to "principal, provider, scopes → a usable token, or what to ask the user",
 * shared by the built-in tools' gate and the token exchange.
 */
export type Resolution =
  | { kind: 'ok'; connection: OpenConnection }
  /**
   * Ask the user: `scopes` is what the connect link asks for (for `insufficient_scope` only the
   * missing ones); `pending` is a link to show again (open, unexpired), if the caller held on one.
   */
  | { kind: 'ask'; reason: AskReason; scopes: string[]; usable: Usable; pending?: PendingConnection }
  /** The flow held on ended without a connection: cancelled, denied, or failed with the provider's error; with the stored reason. */
  | { kind: 'settled'; status: 'cancelled' | 'denied' | 'failed'; outcomeReason: string | null }
  | { kind: 'aborted' };

/**
 * The principal's connection row as this request already read it (the policy's `account` input,
 * src/mcp/policy.ts), so that the request's first look at the connection is no second store read.
 * Given out once, and only for its own principal and provider: every later look reads afresh.
 */
export class ConnectionRead {
  #taken = false;
  constructor(
    readonly owner: Principal,
    readonly provider: string,
    readonly row: ConnectionRow | undefined,
  ) {}

  /** `{ row }` for the first look of `owner` at `provider`; undefined when taken already or for another connection. */
  take(owner: Principal, provider: string): { row: ConnectionRow | undefined } | undefined {
    if (this.#taken || provider !== this.provider || !samePrincipal(owner, this.owner)) return undefined;
    this.#taken = true;
    return { row: this.row };
  }
}

export interface ResolveDeps {
  store: Store;
  /** `read`: the row this request already read, used instead of reading it again. */
  connections: { usable(owner: Principal, provider: Provider, read?: { row: ConnectionRow | undefined }): Promise<Usable> };
  watcher: CompletionWatcher;
  log: Logger;
}

export interface ResolveRequest {
  principal: Principal;
  provider: Provider;
  /** What the caller needs the token to carry. */
  requiredScopes: string[];
  /** What a new connection asks for besides `requiredScopes` (the tools: the provider's defaults). */
  baseScopes: string[];
  /**
   * A flow of this principal's to hold on (bounded by `holdMs`) before answering "ask"; a function
   * is called only when no usable connection was found (a look-up the happy path does not pay for).
   */
  pending?: PendingConnection | (() => Promise<PendingConnection | undefined>) | undefined;
  holdMs: number;
  signal?: AbortSignal | undefined;
  /** What this request already read of the connection: the first look uses it (once); looks after a hold read afresh. */
  read?: ConnectionRead | undefined;
}

const union = (...lists: string[][]) => [...new Set(lists.flat().filter(Boolean))];

/**
 * Finds the principal's connection with `requiredScopes`, refreshed first when near expiry (the
 * single-flight refresh of {@link ConnectionService.usable}), holding on `pending` while the user
 * is in the browser; otherwise says why and what the connect link must ask for.
 * @throws {ProviderError} `unavailable` when the provider cannot be reached to refresh.
 */
export async function resolveConnection(deps: ResolveDeps, req: ResolveRequest): Promise<Resolution> {
  const { principal, provider, requiredScopes } = req;
  const check = async (): Promise<{ usable: Usable; missing: string[] }> => {
    const read = req.read?.take(principal, provider.id);
    const usable = await (read ? deps.connections.usable(principal, provider, read) : deps.connections.usable(principal, provider));
    const granted = usable.kind === 'ok' ? scopeList(usable.connection.row.scopes) : [];
    return { usable, missing: usable.kind === 'ok' ? provider.missingScopes(granted, requiredScopes) : [] };
  };
  let { usable, missing } = await check();
  if (usable.kind === 'ok' && missing.length === 0) return { kind: 'ok', connection: usable.connection };

  const candidate = typeof req.pending === 'function' ? await req.pending() : req.pending;
  let pending = candidate && samePrincipal(candidate, principal) && candidate.provider === provider.id ? candidate : undefined;
  if (pending) {
    // Tests wait on this line instead of sleeping to be sure a call is held (and an operator at
    // debug level sees which calls sit on which flow).
    deps.log.debug('repeat_held', { provider: provider.id, pending: pending.id, holdMs: req.holdMs });
    const held = metrics.holdStarted();
    const { outcome, row: current } = await deps.watcher.waitForRow(pending.id, req.holdMs, req.signal).finally(held);
    if (outcome === 'completed') {
      ({ usable, missing } = await check());
      if (usable.kind === 'ok' && missing.length === 0) return { kind: 'ok', connection: usable.connection };
    }
    // A flow the provider refused with an error is told, not answered with a fresh link: a client
    // that repeats at once would otherwise send the person to a provider that refuses again, round
    // after round. Other failures (a code exchange that timed out, say) are retried with a fresh link.
    const refusedByProvider = outcome === 'failed' && failureReason(current?.outcome_reason ?? null).kind === 'provider_error';
    if (outcome === 'cancelled' || outcome === 'denied' || refusedByProvider)
      return { kind: 'settled', status: outcome, outcomeReason: current?.outcome_reason ?? null };
    if (outcome === 'aborted') return { kind: 'aborted' };
    if (outcome !== 'completed' && current?.status === 'completed') {
      // Completed, but the wake-up never came (a lost NOTIFY, a clock far off): the row decides.
      ({ usable, missing } = await check());
      if (usable.kind === 'ok' && missing.length === 0) return { kind: 'ok', connection: usable.connection };
    }
    // Not opened yet: ask again with the same link. A link already used to start an authorization
    // cannot be opened again, so a user who gave up at the provider gets a fresh one (the old flow
    // may still finish, and the next repeat then finds the connection); expired: fresh.
    pending = current && current.status === 'open' && current.expires_at > Date.now() ? current : undefined;
  }

  if (usable.kind === 'ok') return { kind: 'ask', reason: 'insufficient_scope', scopes: missing, usable, ...(pending ? { pending } : {}) };
  const scopes =
    usable.kind === 'reauth_required'
      ? union(req.baseScopes, scopeList(usable.row.scopes), requiredScopes)
      : union(req.baseScopes, requiredScopes);
  return {
    kind: 'ask',
    reason: usable.kind === 'reauth_required' ? 'reauth_required' : 'not_connected',
    scopes,
    usable,
    ...(pending ? { pending } : {}),
  };
}
