import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  type ClientCapabilities,
  type McpRequestContext,
  type McpServer,
  type ProtocolEra,
  type Server,
  type RequestStateCodec,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { principalFromAuthInfo } from '../auth/bearer.js';
import type { Principal } from '../auth/principal.js';
import type { CompletionWatcher } from '../connections/completion-watcher.js';
import type { ConnectionService } from '../connections/index.js';
import type { ConnectLinks } from '../connections/links.js';
import type { Logger } from '../log.js';
import type { GitHubApi } from '../providers/github/api.js';
import type { Provider } from '../providers/provider.js';
import type { Store } from '../store/index.js';
import type { ToolState } from './request-state.js';

/** Everything a tool may use. Tools never see the store's tokens except through `connections`. */
export interface ToolDeps {
  publicUrl: URL;
  repeatHoldMs: number;
  store: Store;
  links: ConnectLinks;
  connections: ConnectionService;
  watcher: CompletionWatcher;
  codec: RequestStateCodec<ToolState>;
  /**
   * The McpServer's `requestState.verify` hook; `codec.verify` when absent. The broker passes
   * src/gateway/relay's `verifyToolState`, which also opens an upstream's state sealed inside ours.
   */
  verifyRequestState?: (state: string, ctx: ServerContext) => Promise<unknown>;
  log: Logger;
  /** GitHub's connection side (any Provider) and the REST calls our GitHub tools make. */
  github: { provider: Provider; api: GitHubApi };
  providers: ReadonlyMap<string, Provider>;
  /** Built-in tools switched off (PROVIDERS_FILE `builtinTools:`). */
  disabledTools?: ReadonlySet<string>;
  /** Remote MCP servers behind the broker (src/gateway/), when any are configured. */
  gateway?: GatewayHook;
}

/**
 * How the per-request server hands a request to the gateway: a server for it when it is a
 * tools/list or a tools/call of an upstream tool, else undefined (the built-ins answer).
 */
export interface GatewayHook {
  serverFor(rc: McpRequestContext, deps: ToolDeps, builtinServer: () => McpServer): McpServer | Server | undefined;
}

/** Per-request facts: which protocol era this request was served in. */
export interface RequestFacts {
  era: ProtocolEra;
}

/** The caller, from the bearer token the HTTP layer verified; tool arguments never name it. */
export function principalOf(ctx: ServerContext): Principal {
  const principal = principalFromAuthInfo(ctx.http?.authInfo);
  if (!principal) throw new Error('This request is not authenticated.');
  return principal;
}

/** Capabilities declared on this very request (2026-07-28); undefined on the stateless legacy leg. */
export function clientCapabilities(ctx: ServerContext): ClientCapabilities | undefined {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  return envelope?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined;
}

export function clientName(ctx: ServerContext): string | undefined {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  const info = envelope?.[CLIENT_INFO_META_KEY] as { name?: unknown; title?: unknown } | undefined;
  const name = typeof info?.title === 'string' ? info.title : info?.name;
  return typeof name === 'string' ? name : undefined;
}

export function supportsUrlElicitation(caps: ClientCapabilities | undefined): boolean {
  return !!caps?.elicitation && (caps.elicitation as Record<string, unknown>).url !== undefined;
}

/** `elicitation: {}` means form mode, for backwards compatibility. */
export function supportsFormElicitation(caps: ClientCapabilities | undefined): boolean {
  const e = caps?.elicitation as Record<string, unknown> | undefined;
  return !!e && (e.form !== undefined || Object.keys(e).length === 0);
}
