import type { IncomingHttpHeaders } from 'node:http';
import { PROTOCOL_VERSION_META_KEY, TRACEPARENT_META_KEY, TRACESTATE_META_KEY, type ProtocolEra } from '@modelcontextprotocol/server';
import { activeSpan, parentFrom, SpanKind, SpanStatusCode, tracingEnabled, withSpan } from './tracing.js';

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

/** Puts the request's era on its span (the tool and its outcome are put there by src/observability/tool-metrics.ts). */
export function traceEra(era: ProtocolEra): void {
  activeSpan()?.setAttribute('mcp.era', era);
}
