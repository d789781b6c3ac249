import { inputRequired, inputResponse, UrlElicitationRequiredError } from '@modelcontextprotocol/server';
import type { CallToolResult, InputRequiredResult, ServerContext } from '@modelcontextprotocol/server';
import type { Principal } from '../auth/principal.js';
import { samePrincipal } from '../auth/principal.js';
import {
  DECLINED_IN_CLIENT,
  FAILURE_TOLD_WITHIN_MS,
  failureReason,
  resolveConnection,
  useConnection,
  type OpenConnection,
} from '../connections/index.js';
import { ProviderError, type Provider } from '../providers/provider.js';
import type { PendingConnection } from '../store/index.js';
import { supportsUrlElicitation, type McpCall } from './call.js';
import type { ToolDeps } from './context.js';
import { nothingDone, withDenial } from './results.js';
import { M } from './messages.js';
import { providerFailure } from './tools/provider-failure.js';

/** The key of our one input request; the same on every round. */
export const CONNECT_INPUT_KEY = 'connect_account';

export type ConnectionGate =
  { ok: true; principal: Principal; connection: OpenConnection } | { ok: false; result: CallToolResult | InputRequiredResult };

/** What a call needs of a connection: whose (`call`), to which provider, with which scopes, and why (told to the person). */
export interface ConnectionNeed {
  ctx: ServerContext;
  call: McpCall;
  deps: ToolDeps;
  provider: Provider;
  /** Finishes "…so I can <purpose>" in the question to the person. */
  purpose: string;
  scopes?: string[];
}

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
 * Finds the caller's connection to `provider` with `scopes`, refreshed if near expiry (the
 * connection core's resolve), or produces what the tool should answer instead: a URL elicitation
 * of our /connect page (2026-07-28), a -32042 (2025-11-25), the link itself in the result (a client
 * without URL elicitation), or a "nothing was done" after a decline.
 *
 * On a repeat the decision comes from our own store, never from the client's `accept`: a flow still
 * under way holds the call (bounded) until the provider callback lands in any process.
 */
export async function requireConnection(need: ConnectionNeed): Promise<ConnectionGate> {
  const { ctx, call, deps, provider, purpose } = need;
  const requiredScopes = need.scopes ?? [];
  const { principal } = call;
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

  // A client that cannot carry our state across (2025-11-25, or no URL elicitation) repeats the
  // plain call: it holds on the caller's flow in progress, if there is one, else is told (once) of
  // one the provider just refused.
  const linkInResult = call.era === 'modern' && !supportsUrlElicitation(call.capabilities);
  const resolution = await resolveConnection(deps, {
    principal,
    provider,
    requiredScopes,
    baseScopes: provider.defaultScopes,
    pending: pending ?? (call.era === 'legacy' || linkInResult ? () => plainRepeatsFlow(deps, principal, provider) : undefined),
    holdMs: deps.repeatHoldMs,
    signal: ctx.mcpReq.signal,
    read: deps.connectionRead,
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

  pending ??= await deps.links.create(principal, provider.id, call.clientName, provider.scopesApply ? scopes : undefined, purpose);
  const url = deps.links.url(pending);
  const code = deps.links.activationCode(pending);
  const otherDevice = M.otherDevice(deps.links.activateUrl(), code);
  // No URL elicitation to carry it: the link itself goes in the result. It is bound to this
  // principal, single-use and short-lived, so the model may see it; a plain repeat before the
  // person finishes finds the same flow and answers the same link.
  if (linkInResult) {
    const state = usable.kind === 'none' ? M.stateNotConnected : usable.kind === 'reauth_required' ? M.stateReconnect : M.stateMoreAccess;
    const missing = usable.kind === 'ok' ? scopes : [];
    const text = M.linkInResult(provider.displayName, state, provider.scopesApply ? scopes : [], url, purpose) + otherDevice;
    const result = nothingDone(text, {
      status: 'not_connected',
      reason: resolution.reason,
      provider: provider.id,
      connect_url: url,
      missing_scopes: missing,
      user_code: code,
      verification_uri: deps.links.activateUrl(),
    });
    return {
      ok: false,
      result: withDenial(result, {
        reason: resolution.reason,
        authorizationContextId: pending.id,
        remediationHints: [{ type: 'url', url }],
      }),
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
  message += otherDevice;
  if (call.era === 'legacy') throw new UrlElicitationRequiredError([{ mode: 'url', message, url, elicitationId: pending.id }], message);
  return {
    ok: false,
    result: inputRequired({
      inputRequests: { [CONNECT_INPUT_KEY]: inputRequired.elicitUrl({ message, url }) },
      requestState: await deps.codec.mint({ kind: 'connect', pid: pending.id }, ctx),
    }),
  };
}

/**
 * Runs `act` with the caller's usable connection to the provider's own API, under the connection
 * core's one policy for a refused token (src/connections/use.ts): a token the provider refuses
 * after the retries is marked `reauth_required` (never deleted) and the person is asked to
 * reconnect right away; other provider failures become tool errors.
 */
export async function withConnection(
  need: ConnectionNeed & { tool: string },
  act: (connection: OpenConnection, principal: Principal) => Promise<CallToolResult>,
): Promise<CallToolResult | InputRequiredResult> {
  const { deps, provider, tool } = need;
  try {
    const gate = await requireConnection(need);
    if (!gate.ok) return gate.result;
    const { connection, principal } = gate;
    const used = await useConnection(deps, {
      principal,
      provider,
      connection,
      audience: { kind: 'provider' },
      send: (accessToken) => act({ ...connection, tokens: { ...connection.tokens, accessToken } }, principal),
    });
    if (used.kind === 'answered') return used.answer;
    const again = await requireConnection({ ...need, deps: { ...deps, repeatHoldMs: 0 } });
    if (!again.ok) return again.result;
    return 'error' in used.last ? providerFailure(used.last.error, deps.log, tool) : used.last.answer;
  } catch (err) {
    if (err instanceof ProviderError) return providerFailure(err, deps.log, tool);
    throw err;
  }
}

/** A plain repeat's flow (no state of ours to name it): the caller's one under way, else the one that failed last, unless a call was told of it. */
async function plainRepeatsFlow(deps: ToolDeps, principal: Principal, provider: Provider): Promise<PendingConnection | undefined> {
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
