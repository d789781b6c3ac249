// A hostile upstream MCP server for the trust-boundary suites (issue 19): plain node:http, no SDK,
// so it can send what no well-behaved server would — any body, any nesting, any header, any
// status, any pace. Each JSON-RPC method has a default answer (a 2026-07-28 or 2025-11-25 server
// with a small tool list); a suite scripts the answers it needs with `on(method, …)`, and other
// paths (metadata documents) with `onPath(path, …)`. Binds loopback only; records every request.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface HostileRequest {
  method: string;
  id: unknown;
  params: Record<string, unknown>;
  headers: IncomingHttpHeaders;
  /** The bearer token sent, if any. */
  token: string | undefined;
}

/** What the server answers: a JSON-RPC `result` or `error` (wrapped for the request's id), or anything at all. */
export interface Answer {
  status?: number;
  headers?: Record<string, string>;
  /** The JSON-RPC result for the request's id. */
  result?: unknown;
  /** The JSON-RPC error for the request's id. */
  error?: { code: number; message: string; data?: unknown };
  /** A whole JSON body, as is (no JSON-RPC wrapping). */
  json?: unknown;
  /** A raw body (the content type is whatever `headers` says, else application/json). */
  raw?: string | Buffer;
  /** Server-sent events, each a JSON-RPC message (requests, notifications, then the response). */
  sse?: unknown[];
  /** Waits this long before the head is sent. */
  delayMs?: number;
  /** Sends the head and this much of the body, then never finishes. */
  stallAfter?: string;
}

export type Script = (request: HostileRequest) => Answer | Promise<Answer>;
export type PathScript = (req: IncomingMessage, body: string) => Answer | Promise<Answer>;

export interface HostileUpstreamOptions {
  era?: 'modern' | 'legacy';
  /** The default tools/list (default: {@link HOSTILE_TOOLS}). */
  tools?: unknown[];
}

export interface HostileUpstream {
  /** The MCP endpoint (`http://127.0.0.1:<port>/mcp`). */
  url: string;
  origin: string;
  requests: HostileRequest[];
  /** Replaces the answer to `method` until `reset()`. */
  on(method: string, script: Script): void;
  /** Answers any request to `path` (a GET of a metadata document, say) until `reset()`. */
  onPath(path: string, script: PathScript): void;
  /** Back to the default answers, and forgets the recorded requests. */
  reset(): void;
  calls(method?: string): HostileRequest[];
  close(): Promise<void>;
}

export const HOSTILE_TOOLS = [
  { name: 'echo', description: 'Echoes text back', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } },
];

/** A value nested `depth` levels deep (`{ d: { d: … } }`), built without recursion. */
export function nested(depth: number, leaf: unknown = 1): unknown {
  let value = leaf;
  for (let i = 0; i < depth; i++) value = { d: value };
  return value;
}

/** JSON text nested `depth` arrays deep, written directly (too deep for JSON.stringify to build). */
export function nestedJsonText(depth: number): string {
  return `${'['.repeat(depth)}1${']'.repeat(depth)}`;
}

export async function startHostileUpstream(options: HostileUpstreamOptions = {}): Promise<HostileUpstream> {
  const era = options.era ?? 'modern';
  const tools = options.tools ?? HOSTILE_TOOLS;
  const scripts = new Map<string, Script>();
  const paths = new Map<string, PathScript>();
  const requests: HostileRequest[] = [];
  const sockets = new Set<Socket>();
  let sessions = 0;

  const defaults: Record<string, Script> = {
    'server/discover': () =>
      era === 'modern'
        ? { result: { supportedVersions: ['2026-07-28'], capabilities: { tools: {} }, serverInfo: { name: 'hostile', version: '1' } } }
        : { status: 400, error: { code: -32601, message: 'Method not found' } },
    initialize: () => ({
      headers: { 'mcp-session-id': `session-${++sessions}` },
      result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'hostile', version: '1' } },
    }),
    'notifications/initialized': () => ({ status: 202, raw: '' }),
    'tools/list': () => ({ result: { tools } }),
    'tools/call': () => ({ result: { content: [{ type: 'text', text: 'ok' }] } }),
  };

  const send = async (res: ServerResponse, id: unknown, answer: Answer) => {
    if (answer.delayMs) await sleep(answer.delayMs);
    let body: string | Buffer;
    let type = 'application/json';
    if (answer.sse) {
      type = 'text/event-stream';
      body = answer.sse.map((m) => `event: message\ndata: ${typeof m === 'string' ? m : JSON.stringify(m)}\n\n`).join('');
    } else if (answer.raw !== undefined) body = answer.raw;
    else if (answer.json !== undefined) body = JSON.stringify(answer.json);
    else if (answer.error) body = JSON.stringify({ jsonrpc: '2.0', id, error: answer.error });
    else body = JSON.stringify({ jsonrpc: '2.0', id, result: answer.result ?? {} });
    const headers = { 'content-type': type, ...answer.headers };
    if (answer.stallAfter !== undefined) {
      res.writeHead(answer.status ?? 200, headers);
      res.write(answer.stallAfter);
      return; // never ended: the broker's deadline must cut it
    }
    res.writeHead(answer.status ?? 200, { ...headers, 'content-length': String(Buffer.byteLength(body)) });
    res.end(body);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const pathScript = paths.get(path);
      const run = async () => {
        if (pathScript) return send(res, undefined, await pathScript(req, body));
        let message: { id?: unknown; method?: unknown; params?: unknown } = {};
        try {
          message = JSON.parse(body) as typeof message;
        } catch {
          return send(res, null, { status: 400, error: { code: -32700, message: 'Parse error' } });
        }
        const method = typeof message.method === 'string' ? message.method : 'response';
        const auth = req.headers.authorization;
        const request: HostileRequest = {
          method,
          id: message.id,
          params: (message.params ?? {}) as Record<string, unknown>,
          headers: req.headers,
          token: auth?.startsWith('Bearer ') ? auth.slice(7) : undefined,
        };
        requests.push(request);
        const script = scripts.get(method) ?? defaults[method] ?? (() => ({ status: 202, raw: '' }));
        return send(res, message.id, await script(request));
      };
      run().catch(() => res.destroy());
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url: `${origin}/mcp`,
    origin,
    requests,
    on: (method, script) => void scripts.set(method, script),
    onPath: (path, script) => void paths.set(path, script),
    reset() {
      scripts.clear();
      paths.clear();
      requests.length = 0;
    },
    calls: (method) => requests.filter((r) => method === undefined || r.method === method),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
