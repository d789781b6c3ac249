import { inputRequired, inputResponse, UrlElicitationRequiredError, type CallToolResult, type InputRequiredResult, type ServerContext } from '@modelcontextprotocol/server';
import type { Principal } from '../auth/principal.js';
import { samePrincipal } from '../auth/principal.js';
import type { OpenConnection } from '../connect/connections.js';
import type { Provider } from '../providers/provider.js';
import type { PendingConnection } from '../store/index.js';
import { clientCapabilities, clientName, principalOf, supportsUrlElicitation, type RequestFacts, type ToolDeps } from './context.js';
import { nothingDone, toolError } from './results.js';

/** The key of our one input request; the same on every round. */
export const CONNECT_INPUT_KEY = 'connect_account';

export type ConnectionGate =
  | { ok: true; principal: Principal; connection: OpenConnection }
  | { ok: false; result: CallToolResult | InputRequiredResult };

/**
 * Finds the caller's connection to `provider`, or produces what the tool should answer instead:
 * a URL elicitation of our /connect page (2026-07-28), a -32042 (2025-11-25), an instruction to
 * use /connections (clients without URL elicitation), or a "nothing was done" after a decline.
 *
 * On a repeat the decision comes from our own store, never from the client's `accept`: a flow still
 * under way holds the call (bounded) until the provider callback lands in any process.
 */
export async function requireConnection(ctx: ServerContext, facts: RequestFacts, deps: ToolDeps, provider: Provider, purpose: string): Promise<ConnectionGate> {
  const principal = principalOf(ctx);
  const state = ctx.mcpReq.requestState<{ kind: string; pid?: string }>();
  let pending: PendingConnection | undefined;

  if (state?.kind === 'connect' && state.pid) {
    pending = ownPending(deps, state.pid, principal, provider);
    const answer = inputResponse(ctx.mcpReq.inputResponses, CONNECT_INPUT_KEY);
    if (answer.kind === 'elicit' && answer.action !== 'accept') {
      if (pending) deps.store.pending.settle(pending.id, 'cancelled');
      return { ok: false, result: nothingDone(`${provider.displayName} was not connected (you chose not to open the link), so nothing was done.`, { status: 'not_connected', reason: answer.action }) };
    }
  }

  let connection = deps.connections.open(principal, provider.id);
  if (connection) return { ok: true, principal, connection };

  // A 2025-11-25 repeat carries no state: hold on the caller's flow in progress, if there is one.
  if (!pending && facts.era === 'legacy') pending = deps.store.pending.latestInFlight(principal, provider.id);

  if (pending) {
    const outcome = await deps.watcher.wait(pending.id, deps.repeatHoldMs, ctx.mcpReq.signal);
    if (outcome === 'completed') {
      connection = deps.connections.open(principal, provider.id);
      if (connection) return { ok: true, principal, connection };
    }
    if (outcome === 'cancelled' || outcome === 'denied') {
      const why = outcome === 'denied' ? `you cancelled at ${provider.displayName}` : 'you cancelled on the connect page';
      return { ok: false, result: nothingDone(`${provider.displayName} was not connected (${why}), so nothing was done.`, { status: 'not_connected', reason: outcome }) };
    }
    if (outcome === 'aborted') return { ok: false, result: nothingDone('The request was cancelled.', { status: 'not_connected', reason: 'aborted' }) };
    const current = deps.store.pending.byId(pending.id);
    // Still in the browser: ask again with the same link. A failed or expired flow gets a new one.
    pending = current && (current.status === 'open' || current.status === 'authorizing') && current.expires_at > Date.now() ? current : undefined;
  }

  const caps = clientCapabilities(ctx);
  const message = `Connect your ${provider.displayName} account so I can ${purpose}. Open the link, sign in, and approve; the token stays with this server.`;
  if (facts.era === 'modern' && !supportsUrlElicitation(caps)) {
    return {
      ok: false,
      result: toolError(`${provider.displayName} is not connected for your account, and this client cannot open links. Link it at ${new URL('/connections', deps.publicUrl).href}, then try again.`),
    };
  }

  pending ??= deps.links.create(principal, provider.id, clientName(ctx));
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

function ownPending(deps: ToolDeps, id: string, principal: Principal, provider: Provider): PendingConnection | undefined {
  const row = deps.store.pending.byId(id);
  // The codec already bound the state to this principal; the row check is belt and braces.
  return row && samePrincipal(row, principal) && row.provider === provider.id ? row : undefined;
}
