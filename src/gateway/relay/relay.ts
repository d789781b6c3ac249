/**
 * Nested MRTR: an upstream's `input_required` relayed to our client, and the client's answers
 * relayed back. How a forwarder's tools/call uses it (`tool` is the name the client called):
 *
 *   const repeat = readRelayedRepeat(ctx, deps, { upstream: id, tool });       // may throw -32602
 *   const result = await upstreamClient.callTool(
 *     { name, arguments: args, ...(repeat && { inputResponses: repeat.inputResponses, requestState: repeat.requestState }) },
 *     { allowInputRequired: true });
 *   if (isInputRequiredResult(result))
 *     return relayInputRequired(ctx, deps, { upstream: id, tool, inputRequests: result.inputRequests, requestState: result.requestState });
 *
 * The McpServer's `requestState.verify` must be `verifyToolState` (src/broker.ts passes it through
 * ToolDeps.verifyRequestState), so a state that does not open is refused before any tool runs.
 */
import {
  inputRequired,
  ProtocolError,
  ProtocolErrorCode,
  type CallToolResult,
  type InputRequests,
  type InputRequiredResult,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { toolError, type StateSigner } from '../../mcp/index.js';
import { M } from './messages.js';
import {
  bindingOf,
  MAX_UPSTREAM_STATE_BYTES,
  UpstreamStateRefused,
  type OpenedUpstreamState,
  type UpstreamState,
  isUpstreamState,
  type UpstreamStates,
} from './upstream-state.js';

export interface RelayDeps {
  codec: StateSigner<UpstreamState>;
  upstreamStates: UpstreamStates;
}

export interface UpstreamInputRequired {
  /** The upstream's id (from the configuration). */
  upstream: string;
  /** The tool name the client called (the broker's, prefixed): the call scope's `name`. */
  tool: string;
  /** The upstream's `inputRequests`, relayed as they are. */
  inputRequests: InputRequests | undefined;
  /** The upstream's own `requestState`, if it sent one. */
  requestState: unknown;
}

/** What the forwarder sends the upstream on a repeat: the client's answers as they came, and the upstream's own state. */
export interface RelayedRepeat {
  inputResponses: Record<string, unknown>;
  requestState: string | undefined;
}

/** The SDK's own answer to a requestState it does not accept (the frozen -32602 of the verify seam). */
function invalidState(): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid or expired requestState', { reason: 'invalid_request_state' });
}

/**
 * Answers the client with an upstream's `input_required`: its `inputRequests` untouched, and our
 * own requestState (HMAC-bound to principal, method, tool and arguments) carrying the upstream's
 * state sealed under the same binding plus the upstream's id. An upstream state over
 * {@link MAX_UPSTREAM_STATE_BYTES} (or not a string) is a tool error naming the upstream.
 */
export async function relayInputRequired(
  ctx: ServerContext,
  deps: RelayDeps,
  up: UpstreamInputRequired,
): Promise<InputRequiredResult | CallToolResult> {
  const binding = bindingOf(ctx, up.upstream);
  // Fail closed: never seal a state bound to another tool than the one this request calls.
  if (binding.tool !== up.tool) throw new Error('relayInputRequired: tool is not the tool this request calls');
  if (up.requestState !== undefined && typeof up.requestState !== 'string') return toolError(M.upstreamStateMalformed(up.upstream));
  if (!up.inputRequests || Object.keys(up.inputRequests).length === 0) {
    // A state-only round (the upstream asks to be called again) has nothing for the client to answer.
    if (up.requestState === undefined) return toolError(M.upstreamAskedNothing(up.upstream));
  }
  const bytes = up.requestState === undefined ? 0 : Buffer.byteLength(up.requestState, 'utf8');
  if (bytes > MAX_UPSTREAM_STATE_BYTES) return toolError(M.upstreamStateTooLarge(up.upstream, bytes, MAX_UPSTREAM_STATE_BYTES));
  const sealed = deps.upstreamStates.seal(up.requestState, binding);
  const requestState = await deps.codec.mint({ kind: 'upstream', upstream: up.upstream, sealed }, ctx);
  return inputRequired({ ...(up.inputRequests ? { inputRequests: up.inputRequests } : {}), requestState });
}

/**
 * On a repeat of an upstream tool's call: undefined when this round carries no relayed state of
 * ours (a first call, or our own connect state); else the upstream's own `requestState` and the
 * client's `inputResponses` exactly as they came — a decline or a cancel too, the upstream decides
 * what they mean.
 * @throws {ProtocolError} -32602, as the SDK answers a state it refuses, when the state is for
 *   another upstream or does not open under this call's binding. The forwarder must let it
 *   through (McpServer.registerTool turns a thrown ProtocolError into a tool error).
 */
export function readRelayedRepeat(
  ctx: ServerContext,
  deps: RelayDeps,
  call: { upstream: string; tool: string },
): RelayedRepeat | undefined {
  const state = ctx.mcpReq.requestState<{ kind: string } | OpenedUpstreamState>();
  if (!state || typeof state !== 'object' || !isUpstreamState(state)) return undefined;
  if (state.upstream !== call.upstream) throw invalidState();
  let opened: { state?: string };
  try {
    const binding = bindingOf(ctx, call.upstream);
    if (binding.tool !== call.tool) throw invalidState();
    // The verify hook (verifyToolState) opened it already; without the hook, open it here.
    opened = 'opened' in state ? state.opened : deps.upstreamStates.open(state.sealed, binding);
  } catch (err) {
    if (err instanceof UpstreamStateRefused || err instanceof ProtocolError) throw invalidState();
    throw err;
  }
  return { inputResponses: { ...(ctx.mcpReq.inputResponses ?? {}) }, requestState: opened.state };
}
