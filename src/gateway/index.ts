import { createMcpHandler, ProtocolError, ProtocolErrorCode, Server, type McpServer } from '@modelcontextprotocol/server';
import type { ConfiguredUpstream } from '../config/upstreams.js';
import type { ConnectionService } from '../connections/index.js';
import type { Logger } from '../log.js';
import {
  builtinToolProvider,
  listableTools,
  McpMessages,
  SERVER_INFO,
  type McpCall,
  type RequestRouter,
  type ToolDeps,
} from '../mcp/index.js';
import type { Provider } from '../providers/provider.js';
import type { Store } from '../store/index.js';
import { UpstreamAudit } from './audit.js';
import { Catalog, type ToolDefinition } from './catalog.js';
import { forwardToolCall, type ForwardDeps } from './forward.js';
import { InFlightCalls } from './in-flight.js';
import { ToolNames } from './names.js';
import { defaultSeams, type GatewaySeams } from './seams.js';
import { passToolResultsThrough } from './sdk-result-passthrough.js';
import { UpstreamClient } from './upstream-client.js';

export { defaultSeams, type GatewaySeams, type SeamCall } from './seams.js';
export type { UpstreamOutcome } from './upstream-client.js';

export interface GatewayOptions {
  upstreams: readonly ConfiguredUpstream[];
  /** Every provider, including those `auth: mcp` upstreams were given under their own id. */
  providers: ReadonlyMap<string, Provider>;
  /** The built-in tool names switched on. */
  builtins: ReadonlySet<string>;
  store: Store;
  connections: ConnectionService;
  log: Logger;
  maxResultBytes: number;
  clientInfo: { name: string; version: string };
  /** Replacements for the relay's seams (src/gateway/relay/); the defaults answer with tool errors. */
  seams?: Partial<GatewaySeams>;
  /** How long a user's live tool list is reused. */
  liveTtlMs?: number;
}

/**
 * Remote MCP servers behind the broker: their tools listed beside ours (per user) and their calls
 * forwarded with the user's own token. Plugged into the per-request MCP server through
 * {@link RequestRouter}: only a `tools/list`, or a `tools/call` of an upstream tool, is served here.
 */
export class Gateway implements RequestRouter {
  readonly names: ToolNames;
  readonly catalog: Catalog;
  readonly clients: ReadonlyMap<string, UpstreamClient>;
  readonly #forward: ForwardDeps;
  readonly #audit: UpstreamAudit;
  #builtinDefinitions: Promise<ToolDefinition[]> | undefined;

  constructor(private readonly options: GatewayOptions) {
    this.names = new ToolNames(options.upstreams, options.builtins);
    this.clients = new Map(
      options.upstreams.map((u) => [
        u.id,
        new UpstreamClient(u, { maxResultBytes: options.maxResultBytes, clientInfo: options.clientInfo, log: options.log }),
      ]),
    );
    const providerOf = (u: ConfiguredUpstream) => this.providerOf(u);
    this.catalog = new Catalog(options.upstreams, {
      store: options.store,
      connections: options.connections,
      log: options.log,
      clients: this.clients,
      providerOf,
      builtins: options.builtins,
      ...(options.liveTtlMs !== undefined ? { liveTtlMs: options.liveTtlMs } : {}),
    });
    this.#audit = new UpstreamAudit(options.store, options.log);
    this.#forward = {
      audit: this.#audit,
      clients: this.clients,
      catalog: this.catalog,
      seams: { ...defaultSeams, ...options.seams },
      providerOf,
      maxResultBytes: options.maxResultBytes,
      inFlight: new InFlightCalls(),
    };
  }

  /**
   * Start-up: refuses tool names the configuration makes collide (a ConfigError naming both); a
   * definition last seen that collides is logged and stays hidden from the listing.
   */
  async start(): Promise<void> {
    for (const hidden of this.names.assertNoCollisions(await this.catalog.loadStored()))
      this.options.log.warn('upstream_tool_hidden', hidden);
  }

  providerOf(upstream: ConfiguredUpstream): Provider | undefined {
    if (upstream.auth.kind === 'none') return undefined;
    const provider = this.options.providers.get(upstream.auth.kind === 'provider' ? upstream.auth.provider : upstream.id);
    if (!provider) throw new Error(`upstream ${upstream.id} has no provider`);
    return provider;
  }

  serverFor(call: McpCall, deps: ToolDeps, builtinServer: () => McpServer): Server | undefined {
    if (this.options.upstreams.length === 0) return undefined;
    if (call.method === 'tools/call') {
      const route = this.names.route(call.tool);
      if (!route) return undefined;
      const server = this.#server(deps);
      server.setRequestHandler('tools/call', (request, ctx) =>
        forwardToolCall(ctx, call, deps, this.#forward, route, request.params as { arguments?: unknown; _meta?: unknown }),
      );
      return server;
    }
    if (call.method === 'tools/list') {
      const server = this.#server(deps);
      server.setRequestHandler('tools/list', async () => {
        const [builtins, upstream] = await Promise.all([this.#builtins(builtinServer), this.catalog.listFor(call.principal)]);
        const tools = [...builtins, ...upstream];
        return { tools: deps.policy ? await listableTools(deps, call, tools, (t) => this.#policyFacts(t.name)) : tools } as never;
      });
      return server;
    }
    return undefined;
  }

  /** Which upstream a listed tool comes from and whose account it uses, as a policy condition sees them. */
  #policyFacts(name: string): { upstream: string; provider: string } {
    const route = this.names.route(name);
    if (!route) return { upstream: '', provider: builtinToolProvider(name, {}) };
    return { upstream: route.upstream.id, provider: this.providerOf(route.upstream)?.id ?? '' };
  }

  /** Resolves once the audit rows queued so far are in the store (or reported lost). */
  auditSettled(): Promise<void> {
    return this.#audit.flush();
  }

  /** Closes the upstream connections and writes the audit rows still queued. */
  async close(): Promise<void> {
    for (const client of this.clients.values()) client.close();
    await this.#audit.flush();
  }

  /**
   * A server for one request, whose `tools/call` answers are not re-validated against the SDK's
   * content types: an upstream's result must pass through unchanged (a newer content block, or an
   * extra field on a known one, would otherwise be refused or dropped). The input-required seam
   * (requestState verification, capability checks) still runs; only the result validation is skipped
   * (src/gateway/sdk-result-passthrough.ts, the one place that touches SDK internals).
   */
  #server(deps: ToolDeps): Server {
    const server = new Server(SERVER_INFO, {
      capabilities: { tools: { listChanged: false } },
      requestState: { verify: deps.verifyRequestState ?? ((state, ctx) => deps.codec.verify(state, ctx)) },
      instructions: McpMessages.instructions,
    });
    server.onerror = (err) => deps.log.warn('mcp_error', { message: err.message });
    passToolResultsThrough(server);
    return server;
  }

  /** The built-in tools' definitions, exactly as the SDK lists them, computed once per process. */
  #builtins(builtinServer: () => McpServer): Promise<ToolDefinition[]> {
    this.#builtinDefinitions ??= listBuiltins(builtinServer).catch((err: unknown) => {
      this.#builtinDefinitions = undefined;
      throw err;
    });
    return this.#builtinDefinitions;
  }
}

/** Asks an in-process server with every built-in tool for its tools/list (their JSON Schemas as the SDK converts them). */
async function listBuiltins(builtinServer: () => McpServer): Promise<ToolDefinition[]> {
  const handler = createMcpHandler(() => builtinServer(), { legacy: 'reject' });
  try {
    const envelope = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientInfo': { name: 'gateway', version: '0' },
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const res = await handler.fetch(
      new Request('http://gateway.invalid/mcp', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/list',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: envelope } }),
      }),
    );
    const body = (await res.json()) as { result?: { tools?: ToolDefinition[] } };
    if (!Array.isArray(body.result?.tools))
      throw new ProtocolError(ProtocolErrorCode.InternalError, 'the built-in tools could not be listed');
    return body.result.tools;
  } finally {
    await handler.close();
  }
}
