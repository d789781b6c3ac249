import {
  createMcpHandler,
  McpServer,
  type CallToolResult,
  type InputRequiredResult,
  type McpHttpHandler,
  type McpRequestContext,
  type Server,
  type ServerContext,
} from '@modelcontextprotocol/server';
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
import { accountFor, accountOf, annotationsOf, answerDecision, decideCall, listableTools, readAccount, type PolicyTool } from './policy.js';

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

/** Built-in tools whose output schema has room for an approval link (the others answer it as a tool error). */
const APPROVAL_LINK_TOOLS = new Set(['github_create_issue', 'github_whoami', 'connect_account']);

/** The provider whose account a built-in tool uses: its own, or the one its `provider` argument names. */
export function builtinToolProvider(name: string, args: unknown): string {
  for (const [provider, tools] of Object.entries(PROVIDER_TOOLS)) if (tools.includes(name)) return provider;
  const named = (args as { provider?: unknown } | null | undefined)?.provider;
  return typeof named === 'string' ? named : '';
}

/** Each built-in tool's annotations, as it registers them (constant; read once per process). */
const builtinAnnotations = new Map<string, Record<string, unknown>>();

function annotationsOfBuiltin(name: string, call: McpCall, deps: ToolDeps): Record<string, unknown> {
  if (!builtinAnnotations.has(name)) buildBuiltinServer({ ...call, method: 'tools/list', tool: '' }, deps);
  return builtinAnnotations.get(name) ?? {};
}

/**
 * One McpServer per HTTP request (stateless). A `tools/call` of one of our tools gets only that
 * tool (its answer depends on nothing else, and building all of them per request was a large part
 * of the per-request CPU, see bench/README.md); anything else gets every tool. Under a policy, a
 * built-in tool the caller may not see is not registered at all (the SDK's own "not found"), and
 * a denied or approval-bound call answers before the tool runs (src/mcp/policy.ts).
 */
export function buildMcpServer(rc: McpRequestContext, shared: ToolDeps): McpServer | Server | Promise<McpServer | Server> {
  const call = mcpCallOf(rc, shared.log);
  const deps: ToolDeps = { ...shared, log: call.log };
  if (deps.policy && call.method === 'tools/call' && TOOLS.has(call.tool) && !deps.disabledTools?.has(call.tool))
    return builtinCallUnderPolicy(call, deps);
  const routed = deps.router?.serverFor(call, deps, () => buildBuiltinServer(call, deps));
  if (routed) return routed;
  if (deps.policy && call.method === 'tools/list') return builtinListUnderPolicy(call, deps);
  return buildBuiltinServer(call, deps);
}

async function builtinCallUnderPolicy(call: McpCall, deps: ToolDeps): Promise<McpServer> {
  const policy = deps.policy!;
  const tool: PolicyTool = {
    name: call.tool,
    upstream: '',
    annotations: annotationsOfBuiltin(call.tool, call, deps),
    provider: builtinToolProvider(call.tool, call.args),
  };
  const read = await readAccount(policy, deps.store, call.principal, tool.provider);
  const decision = decideCall(call, deps, tool, call.args, accountOf(read));
  // Hidden: not registered, so the SDK answers exactly as for a tool that does not exist.
  if (decision?.effect === 'hide')
    return buildBuiltinServer(call, { ...deps, disabledTools: new Set([...(deps.disabledTools ?? []), call.tool]) });
  // Allowed: the tool runs now, and its first look at the connection is the row the decision saw
  // (one store read per call, and the account decided on is the account used).
  if (decision?.effect === 'allow') return buildBuiltinServer(call, read ? { ...deps, connectionRead: read } : deps);
  // An approval is bound to the account the call would use, whether or not a rule reads it. (A
  // call held for a decision reads its connection afresh when it runs.)
  const account =
    decision?.effect === 'approve' && !read ? await accountFor(policy, deps.store, call.principal, tool.provider, true) : accountOf(read);
  return buildBuiltinServer(call, deps, (ctx) =>
    answerDecision({ ctx, call, deps, tool, args: call.args, account }, decision, !APPROVAL_LINK_TOOLS.has(call.tool)),
  );
}

async function builtinListUnderPolicy(call: McpCall, deps: ToolDeps): Promise<McpServer> {
  const off = deps.disabledTools;
  const names = [...TOOLS.keys()].filter((name) => !off?.has(name));
  const tools = names.map((name) => ({ name, annotations: annotationsOfBuiltin(name, call, deps) }));
  const shown = new Set(
    (await listableTools(deps, call, tools, (t) => ({ upstream: '', provider: builtinToolProvider(t.name, {}) }))).map((t) => t.name),
  );
  return buildBuiltinServer(call, { ...deps, disabledTools: new Set([...(off ?? []), ...names.filter((n) => !shown.has(n))]) });
}

/** Answers a tools/call before the tool runs, or lets it run ({ ok: true }). */
type CallGate = (ctx: ServerContext) => Promise<{ ok: true } | { ok: false; result: CallToolResult | InputRequiredResult }>;

function buildBuiltinServer(call: McpCall, deps: ToolDeps, gate?: CallGate): McpServer {
  const server = new McpServer(SERVER_INFO, {
    // Stateless /mcp holds no stream to push notifications/tools/list_changed on (the SDK would say true).
    capabilities: { tools: { listChanged: false } },
    requestState: { verify: deps.verifyRequestState ?? ((state, ctx) => deps.codec.verify(state, ctx)) },
    instructions: M.instructions,
  });
  server.server.onerror = (err) => deps.log.warn('mcp_error', { message: err.message });
  reuseConvertedOutputSchemas(server);
  answerStoreOutagesAsToolErrors(server, deps);
  rememberAnnotations(server);
  if (gate) gateEveryTool(server, gate);
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

/** Keeps each built-in tool's annotations as it registers them, for policy conditions (`tool.annotations`). */
function rememberAnnotations(server: McpServer): void {
  const register = server.registerTool.bind(server);
  server.registerTool = ((...args: unknown[]) => {
    const config = args[1] as { annotations?: unknown } | undefined;
    if (!builtinAnnotations.has(String(args[0]))) builtinAnnotations.set(String(args[0]), annotationsOf(config?.annotations));
    return (register as (...a: unknown[]) => ReturnType<typeof register>)(...args);
  }) as typeof server.registerTool;
}

/** Runs `gate` before each tool's own callback: a refusal or a question is the answer, and the tool does not run. */
function gateEveryTool(server: McpServer, gate: CallGate): void {
  const register = server.registerTool.bind(server);
  server.registerTool = ((...args: unknown[]) => {
    const callback = args.at(-1) as (...a: unknown[]) => unknown;
    args[args.length - 1] = async (...a: unknown[]) => {
      const passed = await gate(a.at(-1) as ServerContext);
      return passed.ok ? callback(...a) : passed.result;
    };
    return (register as (...a: unknown[]) => ReturnType<typeof register>)(...args);
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
