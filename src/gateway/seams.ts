import type { CallToolResult, InputRequiredResult, ServerContext } from '@modelcontextprotocol/server';
import type { ConfiguredUpstream } from '../config/upstreams.js';
import { toolError, type McpCall, type ToolDeps } from '../mcp/index.js';
import type { Provider } from '../providers/provider.js';
import { G } from './messages.js';

/** What a seam knows about the call it answers. */
export interface SeamCall {
  ctx: ServerContext;
  /** The MCP call being served (its principal, era, capabilities). */
  mcp: McpCall;
  deps: ToolDeps;
  upstream: ConfiguredUpstream;
  /** The connection's provider (`provider:` and `auth: mcp` upstreams), undefined for `auth: none`. */
  provider: Provider | undefined;
  /** The upstream's own (unprefixed) tool name, and the arguments as the client sent them. */
  tool: string;
  arguments: Record<string, unknown>;
}

/**
 * Where the relay (src/gateway/relay/seams.ts, passed as `GatewayOptions.seams` in src/broker.ts)
 * answers what the forwarder cannot: nested input requests and scope challenges. Without it each
 * seam answers with a tool error that names the upstream.
 */
export interface GatewaySeams {
  /** The upstream answered 403 (a `WWW-Authenticate` scope challenge, when it sent one). */
  onScopeChallenge(call: SeamCall, wwwAuthenticate: string | undefined): Promise<CallToolResult | InputRequiredResult>;
  /** The upstream (2026-07-28) answered `input_required`: relay its `inputRequests`, sealing its `requestState` in ours. */
  relayInputRequired(
    call: SeamCall,
    upstream: { inputRequests: Record<string, unknown>; requestState: string | undefined },
  ): Promise<CallToolResult | InputRequiredResult>;
  /**
   * The upstream (2025-11-25) answered -32042, URL elicitation required, with these `data`: relay
   * its links (a 2026-07-28 client gets them as `input_required`, a 2025-11-25 client as -32042).
   */
  relayUrlElicitations(call: SeamCall, data: unknown): Promise<CallToolResult | InputRequiredResult>;
  /**
   * On a repeated call: the `inputResponses` and the upstream's own `requestState` to forward (the
   * relay's sealed state unwrapped), or undefined when this call is no repeat of a relayed one.
   */
  repeatParams(call: SeamCall): Promise<{ inputResponses?: unknown; requestState?: string } | undefined>;
}

export const defaultSeams: GatewaySeams = {
  onScopeChallenge: async (call) => toolError(G.needsMoreAccess(call.upstream.id)),
  relayInputRequired: async (call) => toolError(G.inputRequired(call.upstream.id)),
  relayUrlElicitations: async (call) => toolError(G.inputRequired(call.upstream.id)),
  repeatParams: async () => undefined,
};
