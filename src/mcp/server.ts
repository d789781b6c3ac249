import { createMcpHandler, McpServer, type McpHttpHandler, type McpRequestContext, type Server } from '@modelcontextprotocol/server';
import { StoreUnavailableError } from '../store/index.js';
import { toolError } from './results.js';
import { mcpCallOf, type McpCall } from './call.js';
import type { ToolDeps } from './context.js';
import { registerConnectAccount } from './tools/connect-account.js';
import { registerDisconnectAccount } from './tools/disconnect-account.js';
import { registerGitHubCreateIssue } from './tools/github-create-issue.js';
import { registerGitHubWhoami } from './tools/github-whoami.js';
import { registerListConnections } from './tools/list-connections.js';
import { M } from './messages.js';
import { countToolCalls } from '../observability/tool-metrics.js';
import { traceEra } from '../observability/mcp-tracing.js';

export const SERVER_INFO = { name: 'mcp-connect-broker', version: '0.1.0' };

type Registrar = (server: McpServer, deps: ToolDeps, call: McpCall) => void;

/** Every built-in tool, by name (a Map, so a client-chosen name can never reach an Object prototype member). */
const TOOLS = new Map<string, Registrar>([
  ['github_create_issue', registerGitHubCreateIssue],
  ['github_whoami', registerGitHubWhoami],
  ['list_connections', registerListConnections],
  ['disconnect_account', registerDisconnectAccount],
  ['connect_account', registerConnectAccount],
]);

/** The built-in tools of each provider, which PROVIDERS_FILE `builtinTools: { <id>: false }` switches off. */
export const PROVIDER_TOOLS: Readonly<Record<string, readonly string[]>> = { github: ['github_create_issue', 'github_whoami'] };

/** The built-in tool names served with `builtinTools` (provider id → false switches its tools off). */
export function builtinToolNames(builtinTools: Record<string, boolean>): string[] {
  const off = new Set(Object.entries(builtinTools).flatMap(([id, on]) => (on ? [] : (PROVIDER_TOOLS[id] ?? []))));
  return [...TOOLS.keys()].filter((name) => !off.has(name));
}

/**
 * One McpServer per HTTP request (stateless). A `tools/call` of one of our tools gets only that
 * tool (its answer depends on nothing else, and building all of them per request was a large part
 * of the per-request CPU, see bench/README.md); anything else gets every tool.
 */
export function buildMcpServer(rc: McpRequestContext, shared: ToolDeps): McpServer | Server {
  const call = mcpCallOf(rc, shared.log);
  const deps: ToolDeps = { ...shared, log: call.log };
  const routed = deps.router?.serverFor(call, deps, () => buildBuiltinServer(call, deps));
  return routed ?? buildBuiltinServer(call, deps);
}

function buildBuiltinServer(call: McpCall, deps: ToolDeps): McpServer {
  const server = new McpServer(SERVER_INFO, {
    // Stateless /mcp holds no stream to push notifications/tools/list_changed on (the SDK would say true).
    capabilities: { tools: { listChanged: false } },
    requestState: { verify: deps.verifyRequestState ?? ((state, ctx) => deps.codec.verify(state, ctx)) },
    instructions: M.instructions,
  });
  server.server.onerror = (err) => deps.log.warn('mcp_error', { message: err.message });
  reuseConvertedOutputSchemas(server);
  answerStoreOutagesAsToolErrors(server, deps);
  countToolCalls(server);
  traceEra(call.era);
  const off = deps.disabledTools;
  const only = call.method === 'tools/call' && !off?.has(call.tool) ? TOOLS.get(call.tool) : undefined;
  if (only) only(server, deps, call);
  else for (const [name, register] of TOOLS) if (!off?.has(name)) register(server, deps, call);
  return server;
}

/**
 * Output schemas as JSON Schema, converted once per process instead of once per tools/call
 * (performance, see bench/README.md). The SDK memoises the conversion on the registered tool, but
 * this server, and so every tool, is built anew for each request, so each call converted its
 * tool's zod output schema again (25–100 µs). Keyed by the schema object, which the tools define
 * once at module level; the SDK only reads the converted schema.
 */
const outputSchemaJson = new WeakMap<object, Record<string, unknown> | undefined>();

/** Wraps `server.registerTool` so that each output schema is converted once per process. */
function reuseConvertedOutputSchemas(server: McpServer): void {
  const register = server.registerTool.bind(server);
  server.registerTool = ((...args: Parameters<typeof register>) => {
    const tool = register(...args);
    const schema = tool.outputSchema;
    if (schema) {
      if (!outputSchemaJson.has(schema)) outputSchemaJson.set(schema, tool.outputSchemaJson);
      tool.outputSchemaJson = outputSchemaJson.get(schema);
    }
    return tool;
  }) as typeof server.registerTool;
}

/**
 * A tool whose database is away says so, as a tool error the model can relay ("try again in a
 * moment"), instead of the SDK's generic error carrying the driver's message.
 */
function answerStoreOutagesAsToolErrors(server: McpServer, deps: ToolDeps): void {
  const register = server.registerTool.bind(server);
  server.registerTool = ((...args: unknown[]) => {
    const callback = args.at(-1) as (...a: unknown[]) => unknown;
    args[args.length - 1] = async (...a: unknown[]) => {
      try {
        return await callback(...a);
      } catch (err) {
        if (!(err instanceof StoreUnavailableError)) throw err;
        deps.log.warn('store_unavailable', { tool: String(args[0]) });
        return toolError(M.storeDown);
      }
    };
    return (register as (...a: unknown[]) => ReturnType<typeof register>)(...args);
  }) as typeof server.registerTool;
}

export function createMcpEndpointHandler(deps: ToolDeps): McpHttpHandler {
  return createMcpHandler((rc) => buildMcpServer(rc, deps), {
    onerror: (err) => deps.log.warn('mcp_handler_error', { message: err.message }),
  });
}
