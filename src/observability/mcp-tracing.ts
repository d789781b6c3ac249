import type { IncomingHttpHeaders } from 'node:http';
import {
  PROTOCOL_VERSION_META_KEY,
  TRACEPARENT_META_KEY,
  TRACESTATE_META_KEY,
  UrlElicitationRequiredError,
  type McpServer,
  type ProtocolEra,
} from '@modelcontextprotocol/server';
import { activeSpan, parentFrom, recordFailure, SpanKind, SpanStatusCode, tracingEnabled, withSpan } from './tracing.js';

/** Client-to-server methods of both eras: anything else is named `other`, so a client cannot mint span names. */
const KNOWN_METHODS = new Set([
  'initialize',
  'ping',
  'server/discover',
  'tools/list',
  'tools/call',
  'resources/list',
  'resources/read',
  'resources/templates/list',
  'resources/subscribe',
  'resources/unsubscribe',
  'prompts/list',
  'prompts/get',
  'completion/complete',
  'logging/setLevel',
  'subscriptions/listen',
  'tasks/get',
  'tasks/list',
  'tasks/cancel',
  'tasks/result',
  'notifications/initialized',
  'notifications/cancelled',
  'notifications/progress',
  'notifications/roots/list_changed',
]);

type Meta = Record<string, string | string[] | undefined>;

function messageParts(body: unknown): { method: string; meta: Meta | undefined } {
  const msg = (body && typeof body === 'object' && !Array.isArray(body) ? body : {}) as { method?: unknown; params?: { _meta?: unknown } };
  const method = typeof msg.method === 'string' && KNOWN_METHODS.has(msg.method) ? msg.method : 'other';
  const meta = msg.params && typeof msg.params === 'object' ? msg.params._meta : undefined;
  return { method, meta: meta && typeof meta === 'object' && !Array.isArray(meta) ? (meta as Meta) : undefined };
}

/**
 * Runs `serve` (the SDK handler and the response) in the span of one MCP request: `mcp <method>`
 * (`mcp batch` for a 2025-11-25 batch, `mcp GET`/`mcp DELETE` for the stream requests), continuing
 * the trace the client named in `_meta.traceparent`, else in its `traceparent` header. `serve`
 * resolves to the HTTP status. Nothing but `serve` runs when tracing is off.
 */
export function traceMcpRequest(
  httpMethod: string,
  headers: IncomingHttpHeaders,
  body: unknown,
  serve: () => Promise<number>,
): Promise<number> {
  if (!tracingEnabled()) return serve();
  const batch = Array.isArray(body);
  const { method, meta } =
    httpMethod === 'POST' ? (batch ? { method: 'batch', meta: undefined } : messageParts(body)) : { method: httpMethod, meta: undefined };
  const carrier = meta ? { traceparent: meta[TRACEPARENT_META_KEY], tracestate: meta[TRACESTATE_META_KEY] } : undefined;
  const claimed = meta?.[PROTOCOL_VERSION_META_KEY] ?? headers['mcp-protocol-version'];
  // A revision is a date; anything else a client claims is not recorded.
  const version = typeof claimed === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(claimed) ? claimed : undefined;
  return withSpan(
    `mcp ${method}`,
    {
      'mcp.method.name': method,
      ...(batch ? { 'mcp.batch.size': (body as unknown[]).length } : {}),
      ...(version ? { 'mcp.protocol.version': version } : {}),
    },
    async (span) => {
      const status = await serve();
      span?.setAttribute('http.response.status_code', status);
      if (status >= 500) span?.setStatus({ code: SpanStatusCode.ERROR });
      return status;
    },
    { kind: SpanKind.SERVER, parent: parentFrom(carrier, headers as Meta) },
  );
}

export type ToolOutcome = 'complete' | 'input_required' | 'error' | 'declined';

/**
 * A tool's answer in the words of `broker_mcp_tool_calls_total`: asked the user for something, an
 * error, "nothing was done" after a decline or cancel (`structuredContent.status` `not_connected` /
 * `not_done`, see src/mcp/results.ts), or done.
 */
export function toolOutcome(result: unknown): ToolOutcome {
  const r = (result ?? {}) as { resultType?: unknown; isError?: unknown; structuredContent?: { status?: unknown } };
  if (r.resultType === 'input_required') return 'input_required';
  if (r.isError === true) return 'error';
  const status = r.structuredContent?.status;
  return status === 'not_connected' || status === 'not_done' ? 'declined' : 'complete';
}

/**
 * Puts the era on the request's span and, for each tool `server` registers from here on, the tool's
 * registered name (our own code's, never the client's: bounded) and its outcome. Installs nothing
 * when tracing is off.
 */
export function traceToolCalls(server: McpServer, era: ProtocolEra): void {
  if (!tracingEnabled()) return;
  activeSpan()?.setAttribute('mcp.era', era);
  const register = server.registerTool.bind(server);
  server.registerTool = ((...args: unknown[]) => {
    const name = String(args[0]);
    const callback = args.at(-1) as (...a: unknown[]) => unknown;
    args[args.length - 1] = async (...a: unknown[]) => {
      const span = activeSpan();
      span?.setAttribute('gen_ai.tool.name', name);
      try {
        const result = await callback(...a);
        const outcome = toolOutcome(result);
        span?.setAttribute('broker.tool.outcome', outcome);
        if (outcome === 'error') span?.setStatus({ code: SpanStatusCode.ERROR });
        return result;
      } catch (err) {
        const elicit = err instanceof UrlElicitationRequiredError;
        span?.setAttribute('broker.tool.outcome', elicit ? 'input_required' : 'error');
        if (span && !elicit) recordFailure(span, err);
        throw err;
      }
    };
    return (register as (...a: unknown[]) => ReturnType<typeof register>)(...args);
  }) as typeof server.registerTool;
}
