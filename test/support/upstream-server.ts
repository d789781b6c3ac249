// A configurable remote MCP server for the gateway tests, built with the official SDK: 2026-07-28
// through createMcpHandler (legacy: 'reject'), or 2025-11-25 sessionful through
// WebStandardStreamableHTTPServerTransport with a session id per initialize. It requires a bearer
// token (checked by `verify`, e.g. against the GitHub stand-in), records the token, session id,
// headers and client port of every request, and has fault switches.
import { randomUUID } from 'node:crypto';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  createMcpHandler,
  inputRequired,
  inputResponse,
  isLegacyRequest,
  ProtocolError,
  ProtocolErrorCode,
  Server,
  WebStandardStreamableHTTPServerTransport,
  type AuthInfo,
  type CallToolResult,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { readBody, sendWebResponse } from '../../src/http/web-adapter.js';

export interface RecordedRequest {
  /** The JSON-RPC method (or `response` for an answer to a request of ours). */
  method: string;
  /** `params.name` of a tools/call. */
  tool?: string;
  token: string | undefined;
  /** Who `verify` said the token belongs to. */
  who?: string;
  sessionId: string | undefined;
  headers: Record<string, string>;
  remotePort: number;
  /** `params._meta` as received. */
  meta?: Record<string, unknown>;
  arguments?: unknown;
  /** `params.requestState` and `params.inputResponses` of a tools/call repeat, as received. */
  requestState?: unknown;
  inputResponses?: unknown;
}

/** Sticky until cleared; they apply to tools/call only, except `down`. */
export interface UpstreamFaults {
  /** Every connection is dropped without an answer. */
  down?: boolean;
  slowMs?: number;
  unauthorized?: boolean;
  /** 403 with a `WWW-Authenticate` insufficient_scope challenge for these scopes. */
  forbiddenScope?: string;
  /** 200 with a body that is not JSON. */
  malformed?: boolean;
  status500?: boolean;
  /** The next server/discover answers 500 (once). */
  discover500?: boolean;
}

export interface UpstreamServerOptions {
  era: 'modern' | 'legacy';
  /** Who a bearer token belongs to, or undefined to answer 401. Default: any token, as itself. */
  verify?: (token: string) => Promise<string | undefined>;
  /** `auth: none` upstreams: no token needed. */
  anonymous?: boolean;
  /** The tool list (default: {@link FIXTURE_TOOLS}). */
  tools?: Array<{ name: string; description?: string; inputSchema: Record<string, unknown> }>;
}

export interface UpstreamServer {
  url: string;
  requests: RecordedRequest[];
  faults: UpstreamFaults;
  /** Live 2025-11-25 sessions (ids). */
  readonly sessions: ReadonlySet<string>;
  /** Forgets every session (a restarted upstream): the next call with an old id gets 404. */
  dropSessions(): void;
  calls(tool?: string): RecordedRequest[];
  close(): Promise<void>;
}

export const FIXTURE_TOOLS = [
  { name: 'echo', description: 'Echoes text back', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } },
  { name: 'whoami', description: 'Who the token belongs to', inputSchema: { type: 'object', properties: {} } },
  { name: 'all_content', description: 'Every content block type', inputSchema: { type: 'object', properties: {} } },
  { name: 'failing', description: 'Answers isError', inputSchema: { type: 'object', properties: {} } },
  { name: 'big', description: 'Answers 10 MB', inputSchema: { type: 'object', properties: {} } },
  { name: 'confirm', description: 'Asks input_required (2026-07-28)', inputSchema: { type: 'object', properties: {} } },
  // 125 characters: valid upstream, but past MCP's 128 once prefixed with github_.
  { name: 'n'.repeat(125), description: 'A long name', inputSchema: { type: 'object', properties: {} } },
  { name: 'odd_content', description: 'Content the SDK does not know', inputSchema: { type: 'object', properties: {} } },
  { name: 'ask', description: 'Asks elicitation/create mid-call (2025-11-25)', inputSchema: { type: 'object', properties: {} } },
];

/** What `odd_content` answers, written to the wire directly: a newer content type and fields the SDK does not know. */
export const ODD_RESULT = {
  content: [
    { type: 'text', text: 'known type, extra field', 'x-extra': { kept: true } },
    { type: 'resource_link', uri: 'https://example.test/x', name: 'x', size: 12, 'x-vendor': 'v' },
    { type: 'widget', widget: { kind: 'chart', points: [1, 2, 3] } },
  ],
  structuredContent: { odd: true },
  'x-top-level': 'kept',
};

/** What `all_content` answers: every content block type, structured content, `_meta` of both namespaces. */
export function allContentResult(receivedMeta: unknown): CallToolResult {
  return {
    content: [
      { type: 'text', text: 'plain text', annotations: { audience: ['user'], priority: 0.5 } },
      { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' },
      { type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav' },
      { type: 'resource_link', uri: 'https://example.test/doc', name: 'doc', mimeType: 'text/html', description: 'a link' },
      { type: 'resource', resource: { uri: 'https://example.test/embedded', mimeType: 'text/plain', text: 'embedded text' } },
      { type: 'resource', resource: { uri: 'https://example.test/blob', mimeType: 'application/octet-stream', blob: 'AAEC' } },
    ],
    structuredContent: { ok: true, receivedMeta: receivedMeta ?? null },
    _meta: { 'acme.example/trace': 'trace-1', 'io.modelcontextprotocol/related-task': { taskId: 'upstream-task' } },
  };
}

function text(t: string, isError = false): CallToolResult {
  return { content: [{ type: 'text', text: t }], ...(isError ? { isError: true } : {}) };
}

function buildServer(options: UpstreamServerOptions, era: 'modern' | 'legacy'): Server {
  const server = new Server({ name: `fixture-${era}`, version: '1.0.0' }, { capabilities: { tools: { listChanged: false } } });
  const tools = options.tools ?? FIXTURE_TOOLS;
  server.setRequestHandler('tools/list', () => ({ tools }) as never);
  server.setRequestHandler('tools/call', async (request, ctx: ServerContext): Promise<CallToolResult> => {
    const who = ctx.http?.authInfo?.clientId ?? 'anonymous';
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    switch (request.params.name) {
      case 'echo':
        return { content: [{ type: 'text', text: String(args.text ?? '') }], structuredContent: { text: args.text ?? null, who } };
      case 'whoami':
        return { content: [{ type: 'text', text: who }], structuredContent: { who } };
      case 'all_content':
        return allContentResult(request.params._meta);
      case 'failing':
        return text('the upstream tool failed on purpose', true);
      case 'big':
        return text('x'.repeat(10 * 1024 * 1024));
      case 'confirm':
        if (ctx.mcpReq.requestState() === undefined)
          return inputRequired({
            inputRequests: { confirm: inputRequired.elicit({ message: 'Really?', requestedSchema: { type: 'object', properties: {} } }) },
            requestState: 'upstream-opaque-state',
          }) as unknown as CallToolResult;
        {
          const answer = inputResponse(ctx.mcpReq.inputResponses, 'confirm');
          return text(answer.kind === 'elicit' ? `confirmed: ${answer.action}` : 'confirmed');
        }
      case 'ask': {
        // On a 2025-11-25 session the SDK's legacy shim turns this into a real elicitation/create
        // pushed on the call's own event stream, and re-enters here with the client's answer.
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'ask');
        if (answer.kind === 'elicit') return text(`the client answered ${answer.action}`);
        return inputRequired({
          inputRequests: { ask: inputRequired.elicit({ message: 'Which one?', requestedSchema: { type: 'object', properties: {} } }) },
        }) as unknown as CallToolResult;
      }
      default:
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool ${request.params.name} not found`);
    }
  });
  return server;
}

function jsonError(status: number, code: number, message: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } }), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

export async function startUpstreamServer(options: UpstreamServerOptions): Promise<UpstreamServer> {
  const requests: RecordedRequest[] = [];
  const faults: UpstreamFaults = {};
  const transports = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const modern = createMcpHandler(() => buildServer(options, 'modern'), { legacy: 'reject' });
  const verify = options.verify ?? (async (token: string) => token);

  async function legacy(request: Request, body: unknown, authInfo: AuthInfo | undefined): Promise<Response> {
    const sid = request.headers.get('mcp-session-id');
    const extra = { parsedBody: body, ...(authInfo ? { authInfo } : {}) };
    if (sid) {
      const transport = transports.get(sid);
      if (!transport) return jsonError(404, -32001, 'Session not found');
      return transport.handleRequest(request, extra);
    }
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void transports.set(id, transport),
    });
    await buildServer(options, 'legacy').connect(transport);
    return transport.handleRequest(request, extra);
  }

  const http: HttpServer = createServer((req, res) => {
    void (async () => {
      if (faults.down) return void req.socket.destroy();
      const raw = await readBody(req, Number.POSITIVE_INFINITY);
      let body: unknown;
      try {
        body = raw.length ? JSON.parse(raw.toString('utf8')) : undefined;
      } catch {
        body = undefined;
      }
      const message = (body ?? {}) as {
        method?: string;
        params?: { name?: string; _meta?: Record<string, unknown>; arguments?: unknown; requestState?: unknown; inputResponses?: unknown };
      };
      const auth = req.headers.authorization;
      const token = auth?.startsWith('Bearer ') ? auth.slice(7) : undefined;
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));
      const record: RecordedRequest = {
        method: message.method ?? (body ? 'response' : req.method!),
        token,
        sessionId: req.headers['mcp-session-id'] as string | undefined,
        headers,
        remotePort: req.socket.remotePort!,
        ...(message.method === 'tools/call'
          ? {
              tool: message.params?.name,
              meta: message.params?._meta,
              arguments: message.params?.arguments,
              ...(message.params?.requestState !== undefined ? { requestState: message.params.requestState } : {}),
              ...(message.params?.inputResponses !== undefined ? { inputResponses: message.params.inputResponses } : {}),
            }
          : {}),
      };
      requests.push(record);

      let authInfo: AuthInfo | undefined;
      if (!options.anonymous) {
        const who = token ? await verify(token) : undefined;
        if (!who)
          return sendWebResponse(
            res,
            jsonError(401, -32001, 'Unauthorized', { 'www-authenticate': 'Bearer error="invalid_token", resource_metadata="x"' }),
          );
        record.who = who;
        authInfo = { token: token!, clientId: who, scopes: [], expiresAt: Math.floor(Date.now() / 1000) + 3600 };
      }
      if (message.method === 'server/discover' && faults.discover500) {
        delete faults.discover500;
        return sendWebResponse(res, new Response('busy', { status: 500 }));
      }
      if (message.method === 'tools/call') {
        if (faults.slowMs) await sleep(faults.slowMs);
        if (faults.unauthorized)
          return sendWebResponse(res, jsonError(401, -32001, 'Unauthorized', { 'www-authenticate': 'Bearer error="invalid_token"' }));
        if (faults.forbiddenScope)
          return sendWebResponse(
            res,
            jsonError(403, -32001, 'Forbidden', {
              'www-authenticate': `Bearer error="insufficient_scope", scope="${faults.forbiddenScope}", error_description="more scopes needed"`,
            }),
          );
        if (faults.malformed)
          return sendWebResponse(
            res,
            new Response('{"jsonrpc":"2.0", this is not json', { headers: { 'content-type': 'application/json' } }),
          );
        if (faults.status500) return sendWebResponse(res, new Response('upstream exploded', { status: 500 }));
      }

      // Past what the SDK's own server would let through: a content type it does not know, and an extra field.
      if (message.method === 'tools/call' && message.params?.name === 'odd_content') {
        const id = (body as { id?: unknown }).id;
        return sendWebResponse(
          res,
          new Response(JSON.stringify({ jsonrpc: '2.0', id, result: ODD_RESULT }), { headers: { 'content-type': 'application/json' } }),
        );
      }
      const request = new Request(`http://127.0.0.1${req.url}`, {
        method: req.method!,
        headers: Object.entries(headers),
        ...(req.method === 'POST' ? { body: new Uint8Array(raw) } : {}),
      });
      if (options.era === 'modern')
        return sendWebResponse(res, await modern.fetch(request, { ...(authInfo ? { authInfo } : {}), parsedBody: body }));
      if (!(await isLegacyRequest(request.clone(), body)))
        return sendWebResponse(res, jsonError(400, -32022, 'Unsupported protocol version: 2026-07-28'));
      return sendWebResponse(res, await legacy(request, body, authInfo));
    })().catch((err: unknown) => {
      if (!res.headersSent) res.statusCode = 500;
      res.end(String(err));
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const port = (http.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}/mcp`,
    requests,
    faults,
    get sessions() {
      return new Set(transports.keys());
    },
    dropSessions: () => {
      for (const t of transports.values()) void t.close().catch(() => undefined);
      transports.clear();
    },
    calls: (tool) => requests.filter((r) => r.method === 'tools/call' && (tool === undefined || r.tool === tool)),
    close: async () => {
      for (const t of transports.values()) await t.close().catch(() => undefined);
      await modern.close();
      await new Promise<void>((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      });
    },
  };
}
