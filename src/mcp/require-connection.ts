import { inputRequired, inputResponse, UrlElicitationRequiredError } from '@modelcontextprotocol/server';
import type { CallToolResult, InputRequiredResult, ServerContext } from '@modelcontextprotocol/server';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Principal } from '../auth/principal.js';
import { samePrincipal } from '../auth/principal.js';
import { lastUsedIsDue, type OpenConnection } from '../connections/index.js';
import { resolveConnection } from '../connections/resolve.js';
import { DECLINED_IN_CLIENT } from '../connections/links.js';
import { FAILURE_TOLD_WITHIN_MS, failureReason } from '../connections/failure-reasons.js';
import { ProviderError, type Provider } from '../providers/provider.js';
import type { PendingConnection } from '../store/index.js';
import { clientCapabilities, clientName, principalOf, supportsUrlElicitation, type RequestFacts, type ToolDeps } from './context.js';
import { nothingDone, toolError } from './results.js';
import { M } from './messages.js';
import { providerFailure } from './tools/provider-failure.js';

/** The key of our one input request; the same on every round. */
export const CONNECT_INPUT_KEY = 'connect_account';

export type ConnectionGate =
  { ok: true; principal: Principal; connection: OpenConnection } | { ok: false; result: CallToolResult | InputRequiredResult };

/** Pending connections the broker itself refused or replaced: why, in words and as a code. */
const SETTLED_REASONS: Record<string, (provider: Provider) => { why: string; code: string }> = {
  refused_shared_account: (p) => ({
    why: `that ${p.displayName} account is already linked to another user`,
    code: 'account_linked_elsewhere',
  }),
  refused_different_account: (p) => ({
    why: `${p.displayName} signed you in as a different account than the one linked here, which was kept`,
    code: 'different_account',
  }),
  superseded: () => ({ why: 'newer connect links replaced this one before it was opened', code: 'superseded' }),
};

/**
 * Finds the caller's connection to `provider` with `requiredScopes`, refreshed if near expiry, or
 * produces what the tool should answer instead: a URL elicitation of our /connect page
 * (2026-07-28), a -32042 (2025-11-25), an instruction to use /connections (clients without URL
 * elicitation), or a "nothing was done" after a decline.
 *
 * On a repeat the decision comes from our own store, never from the client's `accept`: a flow still
 * under way holds the call (bounded) until the provider callback lands in any process.
 */
export async function requireConnection(
  ctx: ServerContext,
  facts: RequestFacts,
  deps: ToolDeps,
  provider: Provider,
  purpose: string,
  requiredScopes: string[] = [],
): Promise<ConnectionGate> {
  const principal = principalOf(ctx);
  const state = ctx.mcpReq.requestState<{ kind: string; pid?: string }>();
  let pending: PendingConnection | undefined;

  if (state?.kind === 'connect' && state.pid) {
    pending = await ownPending(deps, state.pid, principal, provider);
    const answer = inputResponse(ctx.mcpReq.inputResponses, CONNECT_INPUT_KEY);
    if (answer.kind === 'elicit' && answer.action !== 'accept') {
      if (pending) await deps.store.pending.settle(pending.id, 'cancelled', DECLINED_IN_CLIENT);
      return {
        ok: false,
        result: nothingDone(M.declinedLink(provider.displayName), {
          status: 'not_connected',
          reason: answer.action,
        }),
      };
    }
  }

  const resolution = await resolveConnection(deps, {
    principal,
    provider,
    requiredScopes,
    baseScopes: provider.defaultScopes,
    // A 2025-11-25 repeat carries no state: hold on the caller's flow in progress, if there is one,
    // else be told (once) of one the provider just refused.
    pending: pending ?? (facts.era === 'legacy' ? () => legacyRepeatsFlow(deps, principal, provider) : undefined),
    holdMs: deps.repeatHoldMs,
    signal: ctx.mcpReq.signal,
  });
  if (resolution.kind === 'ok') return { ok: true, principal, connection: resolution.connection };
  if (resolution.kind === 'settled' && resolution.status === 'failed')
    return { ok: false, result: failedLink(provider, resolution.outcomeReason) };
  if (resolution.kind === 'settled') {
    const known = resolution.outcomeReason ? SETTLED_REASONS[resolution.outcomeReason]?.(provider) : undefined;
    const why =
      known?.why ?? (resolution.status === 'denied' ? `you cancelled at ${provider.displayName}` : 'you cancelled on the connect page');
    const code = known?.code ?? resolution.status;
    return {
      ok: false,
      result: nothingDone(M.notConnected(provider.displayName, why), {
        status: 'not_connected',
        reason: code,
      }),
    };
  }
  if (resolution.kind === 'aborted')
    return { ok: false, result: nothingDone('The request was cancelled.', { status: 'not_connected', reason: 'aborted' }) };
  const { usable, scopes } = resolution;
  pending = resolution.pending;

  const caps = clientCapabilities(ctx);
  if (facts.era === 'modern' && !supportsUrlElicitation(caps)) {
    return {
      ok: false,
      result: toolError(
        M.cannotOpenLinks(
          provider.displayName,
          usable.kind === 'none' ? M.stateNotConnected : usable.kind === 'reauth_required' ? M.stateReconnect : M.stateMoreAccess,
          new URL('/connections', deps.publicUrl).href,
        ),
      ),
    };
  }

  let message: string;
  if (usable.kind === 'ok') {
    message = M.askMoreAccess(provider.displayName, scopes, purpose);
  } else if (usable.kind === 'reauth_required') {
    message = M.askReconnect(provider.displayName, purpose);
  } else {
    message = M.askConnect(provider.displayName, purpose);
  }
  pending ??= await deps.links.create(principal, provider.id, clientName(ctx), provider.scopesApply ? scopes : undefined, purpose);
  const url = deps.links.url(pending);
  if (facts.era === 'legacy') throw new UrlElicitationRequiredError([{ mode: 'url', message, url, elicitationId: pending.id }], message);
  return {
    ok: false,
    result: inputRequired({
      inputRequests: { [CONNECT_INPUT_KEY]: inputRequired.elicitUrl({ message, url }) },
      requestState: await deps.codec.mint({ kind: 'connect', pid: pending.id }, ctx),
    }),
  };
}

/**
 * Runs `act` with the caller's usable connection. When the provider rejects the stored token
 * (HTTP 401), the connection is marked `reauth_required` (never deleted) and the user is asked to
 * reconnect right away; other provider failures become tool errors.
 */
export async function withConnection(
  ctx: ServerContext,
  facts: RequestFacts,
  deps: ToolDeps,
  provider: Provider,
  purpose: string,
  requiredScopes: string[],
  tool: string,
  act: (connection: OpenConnection, principal: Principal) => Promise<CallToolResult>,
): Promise<CallToolResult | InputRequiredResult> {
  let gate: ConnectionGate;
  try {
    gate = await requireConnection(ctx, facts, deps, provider, purpose, requiredScopes);
  } catch (err) {
    if (err instanceof ProviderError) return providerFailure(err, deps.log, tool);
    throw err;
  }
  if (!gate.ok) return gate.result;
  try {
    const result = await actTolerantOfReplicationLag(provider, gate.connection, gate.principal, act);
    if (lastUsedIsDue(gate.connection.row.last_used_at)) void deps.connections.touch(gate.principal, provider.id).catch(() => undefined);
    return result;
  } catch (err) {
    if (err instanceof ProviderError && err.code === 'unauthorized') {
      await deps.connections.markReauthRequired(gate.principal, provider.id, 'api_401');
      const again = await requireConnection(ctx, facts, { ...deps, repeatHoldMs: 0 }, provider, purpose, requiredScopes);
      if (!again.ok) return again.result;
    }
    return providerFailure(err, deps.log, tool);
  }
}

/**
 * A token minted or refreshed in the last minute may be refused once with 401 while it replicates
 * (the provider's `freshTokenRetryMs`, set for GitHub): retry such a fresh token once before
 * calling it dead.
 */
async function actTolerantOfReplicationLag<T>(
  provider: Provider,
  connection: OpenConnection,
  principal: Principal,
  act: (c: OpenConnection, p: Principal) => Promise<T>,
): Promise<T> {
  try {
    return await act(connection, principal);
  } catch (err) {
    const fresh = Date.now() - connection.row.updated_at < FRESH_TOKEN_MS;
    if (!(err instanceof ProviderError && err.code === 'unauthorized' && fresh && provider.freshTokenRetryMs > 0)) throw err;
    await sleep(provider.freshTokenRetryMs);
    return act(connection, principal);
  }
}

const FRESH_TOKEN_MS = 60_000;

/** A 2025-11-25 call's flow: the caller's one under way, else the one that failed last, unless a call was told of it. */
async function legacyRepeatsFlow(deps: ToolDeps, principal: Principal, provider: Provider): Promise<PendingConnection | undefined> {
  return (
    (await deps.store.pending.latestInFlight(principal, provider.id)) ??
    (await deps.store.pending.takeUntoldFailure(principal, provider.id, Date.now() - FAILURE_TOLD_WITHIN_MS))
  );
}

/** What a call held on a link the provider refused answers: what the provider said (its bounded code), and no new link. */
function failedLink(provider: Provider, outcomeReason: string | null): CallToolResult {
  const reason = failureReason(outcomeReason);
  const code = reason.kind === 'provider_error' ? reason.code : 'unrecognised';
  return nothingDone(M.failedAtProvider(provider.displayName, code), {
    status: 'not_connected',
    reason: 'provider_error',
    providerError: code,
  });
}

async function ownPending(deps: ToolDeps, id: string, principal: Principal, provider: Provider): Promise<PendingConnection | undefined> {
  const row = await deps.store.pending.byId(id);
  // The codec already bound the state to this principal; the row check is belt and braces.
  return row && samePrincipal(row, principal) && row.provider === provider.id ? row : undefined;
}
