import {
  ProtocolError,
  ProtocolErrorCode,
  type CallToolResult,
  type InputRequiredResult,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { Principal } from '../auth/principal.js';
import { DEFAULT_CALLS_IN_FLIGHT_PER_USER, type ConfiguredUpstream } from '../config/upstreams.js';
import { useConnection } from '../connections/index.js';
import {
  accountFor,
  annotationsOf,
  NO_ACCOUNT,
  nothingDone,
  policyGate,
  providerFailure,
  requireConnection,
  toolError,
  type ConnectionNeed,
  type McpCall,
  type ToolDeps,
} from '../mcp/index.js';
import { metrics } from '../observability/metrics.js';
import { ProviderError, type Provider } from '../providers/provider.js';
import { principalKey, type Catalog, type ToolDefinition } from './catalog.js';
import { MAX_UPSTREAM_JSON_DEPTH } from './bounds.js';
import { G } from './messages.js';
import type { ToolRoute } from './names.js';
import type { UpstreamAudit } from './audit.js';
import type { GatewaySeams, SeamCall } from './seams.js';
import type { InFlightCalls } from './in-flight.js';
import { foreignMeta, type UpstreamClient, type UpstreamOutcome } from './upstream-client.js';
import { traceContextMeta } from '../observability/tracing.js';
import { scopeList } from '../providers/scopes.js';

export interface ForwardDeps {
  /** Where each forwarded call's audit row is queued (written after the answer, src/gateway/audit.ts). */
  audit: UpstreamAudit;
  clients: ReadonlyMap<string, UpstreamClient>;
  catalog: Catalog;
  seams: GatewaySeams;
  providerOf(upstream: ConfiguredUpstream): Provider | undefined;
  maxResultBytes: number;
  /** Each principal's calls in flight per upstream (`callsInFlightPerUser`). */
  inFlight: InFlightCalls;
}

type Answer = CallToolResult | InputRequiredResult;

/**
 * A tools/call of an upstream tool: the same connection gate as the built-in tools (a URL
 * elicitation bound to principal, tool and arguments when there is no usable connection), then the
 * call forwarded with the user's own token and the upstream's result returned unchanged; a 401
 * gets one single-flight refresh and one retry, then — only if the provider itself refuses the
 * token (src/connections/provider-check.ts) — the reconnect elicitation, else a tool error naming
 * the upstream. At most `callsInFlightPerUser` calls per principal and upstream at once; past it,
 * a tool error at once. Every forwarded call is audited (never its arguments, never a token).
 */
export async function forwardToolCall(
  ctx: ServerContext,
  mcp: McpCall,
  deps: ToolDeps,
  gw: ForwardDeps,
  route: ToolRoute,
  params: { arguments?: unknown; _meta?: unknown },
): Promise<Answer> {
  if (route.kind === 'connect') {
    const provider = gw.providerOf(route.upstream)?.id ?? '';
    const name = `${route.upstream.toolPrefix}connect`;
    const account = deps.policy ? await accountFor(deps.policy, deps.store, mcp.principal, provider, true) : NO_ACCOUNT;
    const passed = await policyGate(ctx, mcp, deps, { name, upstream: route.upstream.id, annotations: {}, provider }, mcp.args, account);
    if (!passed.ok) return passed.result;
    return connectUpstream(ctx, mcp, deps, gw, route.upstream);
  }
  const { upstream } = route;
  // Filtered out: as unknown as a tool that does not exist, and never forwarded.
  if (!route.allowed) throw new ProtocolError(ProtocolErrorCode.InvalidParams, G.unknownTool(`${upstream.toolPrefix}${route.name}`));
  const args = params.arguments && typeof params.arguments === 'object' ? (params.arguments as Record<string, unknown>) : {};
  const provider = gw.providerOf(upstream);
  const call: SeamCall = { ctx, mcp, deps, upstream, provider, tool: route.name, arguments: args };
  const { principal } = mcp;
  const cap = upstream.callsInFlightPerUser ?? DEFAULT_CALLS_IN_FLIGHT_PER_USER;
  const release = gw.inFlight.take(`${principalKey(principal)}\0${upstream.id}`, cap);
  if (!release) {
    metrics.upstreamCallRefused(upstream.id);
    deps.log.warn('upstream_call_refused', { upstream: upstream.id, tool: route.name, reason: 'calls_in_flight', cap });
    return toolError(G.tooManyInFlight(upstream.id, cap));
  }
  const started = Date.now();
  let outcome: UpstreamOutcome | undefined;
  try {
    const answer = await forwardWithConnection(call, gw, principal, params, (o) => (outcome = o));
    return answer;
  } finally {
    release();
    if (outcome) audit(gw.audit, principal, upstream, route.name, outcome, Date.now() - started);
  }
}

async function forwardWithConnection(
  call: SeamCall,
  gw: ForwardDeps,
  principal: Principal,
  params: { arguments?: unknown; _meta?: unknown },
  seen: (outcome: UpstreamOutcome) => void,
): Promise<Answer> {
  const { ctx, mcp, deps, upstream, provider } = call;
  const purpose = G.purpose(upstream.displayName, call.tool);
  const repeat = await gw.seams.repeatParams(call);
  const body: Record<string, unknown> = { name: call.tool, arguments: call.arguments, ...(repeat ?? {}) };
  // The client's own keys pass, but never its trace context or baggage: the trace continues from
  // our span when tracing is on, and nothing of the client's trace reaches the upstream when it is off.
  const meta = { ...withoutTraceContext(foreignMeta(params._meta)), ...traceContextMeta() };
  if (Object.keys(meta).length > 0) body._meta = meta;
  const client = gw.clients.get(upstream.id)!;
  // A 2025-11-25 upstream cannot hear the answer to the link it asked for (its -32042, relayed):
  // a decline or a cancel ends the call here, as the broker's own link does.
  if (repeat && client.era === 'legacy' && !allAccepted(repeat.inputResponses))
    return nothingDone(G.declinedUpstreamLink(upstream.displayName), { status: 'not_done', reason: 'declined' });
  // One deadline for all the call sends upstream (its list check, the call, a retry), set once the
  // gate has passed: the user's time in the browser is not the upstream's.
  let deadline = Infinity;
  const send = (token: string | undefined) =>
    client.request('tools/call', body, {
      key: principalKey(principal),
      token,
      capabilities: passedCapabilities(mcp),
      signal: ctx.mcpReq.signal,
      deadline,
    });

  const listed: { definition?: ToolDefinition } = {};
  // The policy decides once the tool is known to exist (its annotations are the upstream's) and the
  // account it would use is at hand; before anything is forwarded (src/mcp/policy.ts).
  const decided = (login: string, scopes: string[]) =>
    policyGate(
      ctx,
      mcp,
      deps,
      {
        name: `${upstream.toolPrefix}${call.tool}`,
        upstream: upstream.id,
        annotations: annotationsOf(listed.definition?.annotations),
        provider: provider?.id ?? '',
      },
      call.arguments,
      { login, scopes },
    );
  if (!provider) {
    deadline = Date.now() + upstream.timeoutMs;
    const unknown = await refuseUnknownTool(call, gw, principal, deadline, seen, listed);
    if (unknown) return unknown;
    const passed = await decided('', []);
    if (!passed.ok) return passed.result;
    const outcome = await send(undefined);
    seen(outcome);
    return answerOf(call, gw, outcome);
  }

  const need: ConnectionNeed = { ctx, call: mcp, deps, provider, purpose, scopes: upstream.scopes };
  const tool = `${upstream.toolPrefix}${call.tool}`;
  let refusal: UpstreamOutcome | undefined;
  try {
    const gate = await requireConnection(need);
    if (!gate.ok) return gate.result;
    deadline = Date.now() + upstream.timeoutMs;
    const unknown = await refuseUnknownTool(call, gw, principal, deadline, seen, listed);
    if (unknown) return unknown;
    const passed = await decided(gate.connection.row.account_login, scopeList(gate.connection.row.scopes));
    if (!passed.ok) return passed.result;
    // A refused token goes through the connection core's one policy: one single-flight refresh and
    // one retry, then the connection is marked for reconnecting only if the provider itself refuses
    // the token too (a `provider:` upstream is a third party) or, for `auth: mcp`, on the upstream's word.
    const used = await useConnection(deps, {
      principal,
      provider,
      connection: gate.connection,
      audience: upstream.auth.kind === 'mcp' ? { kind: 'audience', id: upstream.id } : { kind: 'third_party', id: upstream.id },
      send: (token) => send(token),
      refused: (outcome) => {
        if (outcome.kind === 'unauthorized') refusal = outcome;
        return outcome.kind === 'unauthorized';
      },
    });
    if (used.kind === 'answered') {
      seen(used.answer);
      return answerOf(call, gw, used.answer);
    }
    seen(refusal!);
    metrics.upstreamTokenRefusal(upstream.id, used.verdict);
    if (used.kind === 'refused') return toolError(G.tokenRefusedByUpstream(upstream.id, provider.displayName));
    const again = await requireConnection({ ...need, deps: { ...deps, repeatHoldMs: 0 } });
    if (!again.ok) return again.result;
    return toolError(G.stillUnauthorized(upstream.id));
  } catch (err) {
    if (refusal) seen(refusal);
    if (err instanceof ProviderError) return providerFailure(err, deps.log, tool);
    throw err;
  }
}

/**
 * Undefined when `call.tool` is one the caller may call: in their live list of the upstream (fetched
 * now if not at hand), else among its declared tools. A listing that failed, with neither at hand,
 * fails the call the same way; a listing the upstream refused (401, 403, an error) is left to the
 * call, which meets the same refusal and answers it as usual.
 * @throws {ProtocolError} -32602 for a name the upstream does not list: never forwarded.
 */
async function refuseUnknownTool(
  call: SeamCall,
  gw: ForwardDeps,
  principal: Principal,
  deadline: number,
  seen: (outcome: UpstreamOutcome) => void,
  listed: { definition?: ToolDefinition },
): Promise<Answer | undefined> {
  const callable = await gw.catalog.callableTools(principal, call.upstream, deadline);
  if ('names' in callable) {
    const definition = callable.names.get(call.tool);
    if (definition) {
      listed.definition = definition;
      return undefined;
    }
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, G.unknownTool(`${call.upstream.toolPrefix}${call.tool}`));
  }
  if (callable.outcome?.kind !== 'failed') return undefined;
  seen(callable.outcome);
  return answerOf(call, gw, callable.outcome);
}

function allAccepted(responses: unknown): boolean {
  if (!responses || typeof responses !== 'object') return false;
  return Object.values(responses).every((r) => (r as { action?: unknown } | null)?.action === 'accept');
}

/** The upstream's answer as ours: its result unchanged but for the protocol's own `_meta` keys. */
async function answerOf(call: SeamCall, gw: ForwardDeps, outcome: UpstreamOutcome): Promise<Answer> {
  const { upstream, deps } = call;
  switch (outcome.kind) {
    case 'result': {
      const result: Record<string, unknown> = { ...outcome.result };
      delete result.resultType;
      const meta = foreignMeta(result._meta);
      if (meta) result._meta = meta;
      else delete result._meta;
      return result as CallToolResult;
    }
    case 'input_required':
      return gw.seams.relayInputRequired(call, { inputRequests: outcome.inputRequests, requestState: outcome.requestState });
    case 'forbidden':
      return gw.seams.onScopeChallenge(call, outcome.wwwAuthenticate);
    case 'unauthorized':
      return toolError(G.stillUnauthorized(upstream.id));
    case 'rpc_error':
      // 2025-11-25's "open this link first": relayed as a link under the same rules as any input request.
      if (outcome.code === ProtocolErrorCode.UrlElicitationRequired) return gw.seams.relayUrlElicitations(call, outcome.data);
      // An unknown tool or bad arguments: the client's mistake, answered the way the SDK answers ours.
      if (outcome.code === ProtocolErrorCode.InvalidParams) throw new ProtocolError(ProtocolErrorCode.InvalidParams, outcome.message);
      deps.log.warn('upstream_call_failed', { upstream: upstream.id, tool: call.tool, reason: 'rpc_error', code: outcome.code });
      return toolError(G.upstreamError(upstream.id, outcome.message.slice(0, 300)));
    case 'failed': {
      deps.log.warn('upstream_call_failed', { upstream: upstream.id, tool: call.tool, reason: outcome.reason, detail: outcome.detail });
      const text = {
        timeout: () => G.timeout(upstream.id),
        unavailable: () => G.unavailable(upstream.id),
        http_error: () => G.httpError(upstream.id),
        malformed: () => G.malformed(upstream.id),
        too_large: () => G.tooLarge(upstream.id, gw.maxResultBytes),
        too_deep: () => G.tooDeep(upstream.id, MAX_UPSTREAM_JSON_DEPTH),
        over_bounds: () => G.overBounds(upstream.id),
        elicitation_unsupported: () => G.elicitationUnsupported(upstream.id),
      }[outcome.reason]();
      return toolError(text);
    }
  }
}

/** `<prefix>connect`: runs the connect elicitation, then says the tools are there. */
async function connectUpstream(ctx: ServerContext, mcp: McpCall, deps: ToolDeps, gw: ForwardDeps, upstream: ConfiguredUpstream) {
  const provider = gw.providerOf(upstream);
  const { principal } = mcp;
  if (!provider) {
    const outcome = await gw.clients.get(upstream.id)!.request('tools/list', {}, { key: principalKey(principal), token: undefined });
    if (outcome.kind !== 'result') return answerOf({ ctx, mcp, deps, upstream, provider, tool: 'connect', arguments: {} }, gw, outcome);
    return { content: [{ type: 'text' as const, text: G.reachableNoAuth(upstream.displayName, upstream.toolPrefix) }] };
  }
  let gate;
  try {
    gate = await requireConnection({
      ctx,
      call: mcp,
      deps,
      provider,
      purpose: G.connectPurpose(upstream.displayName),
      scopes: upstream.scopes,
    });
  } catch (err) {
    if (err instanceof ProviderError) return providerFailure(err, deps.log, `${upstream.toolPrefix}connect`);
    throw err;
  }
  if (!gate.ok) return gate.result;
  gw.catalog.forget(principal, upstream);
  return {
    content: [{ type: 'text' as const, text: G.connectedToolsAvailable(upstream.displayName, upstream.toolPrefix) }],
    structuredContent: { status: 'connected', upstream: upstream.id, login: gate.connection.row.account_login },
  };
}

/** What the upstream may know of the client: whether it can be asked for input (for the relay), nothing else. */
function passedCapabilities(mcp: McpCall): Record<string, unknown> {
  const caps = mcp.capabilities as Record<string, unknown> | undefined;
  return caps?.elicitation ? { elicitation: caps.elicitation } : {};
}

function audit(
  rows: UpstreamAudit,
  principal: Principal,
  upstream: ConfiguredUpstream,
  tool: string,
  outcome: UpstreamOutcome,
  ms: number,
) {
  const kind = outcome.kind === 'failed' ? `failed/${outcome.reason}` : outcome.kind;
  metrics.upstreamCall(upstream.id, kind, ms / 1000);
  rows.record(principal, upstream.id, `tool=${tool} outcome=${kind} ms=${ms}`);
}

const TRACE_CONTEXT_KEYS = new Set(['traceparent', 'tracestate', 'baggage']);

function withoutTraceContext(meta: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  return meta && Object.fromEntries(Object.entries(meta).filter(([k]) => !TRACE_CONTEXT_KEYS.has(k)));
}
