import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

export type ElicitAnswer = { action: 'accept' | 'decline' | 'cancel'; content?: Record<string, string | number | boolean | string[]> };

export interface ModernClientOptions {
  url: string;
  token: string | (() => Promise<string>);
  /** Declare `elicitation.url` (default true) and/or form. */
  capabilities?: { url?: boolean; form?: boolean };
  /** Called for each URL elicitation; performs the "browser" part and answers. */
  onUrl?: (url: string, message: string) => Promise<ElicitAnswer>;
  onForm?: (message: string, schema: unknown) => Promise<ElicitAnswer>;
  name?: string;
  timeoutMs?: number;
}

/** The official SDK client pinned to 2026-07-28, auto-fulfilling input requests through the callbacks. */
export async function modernClient(options: ModernClientOptions): Promise<Client> {
  const caps = options.capabilities ?? { url: true, form: true };
  const elicitation: Record<string, Record<string, never>> = {};
  if (caps.url) elicitation.url = {};
  if (caps.form) elicitation.form = {};
  const client = new Client(
    { name: options.name ?? 'test-assistant', version: '1.0.0' },
    { capabilities: Object.keys(elicitation).length ? { elicitation } : {}, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  if (Object.keys(elicitation).length) {
    client.setRequestHandler('elicitation/create', async (request) => {
      const params = request.params as { mode?: string; url?: string; message: string; requestedSchema?: unknown };
      if (params.mode === 'url') return options.onUrl ? options.onUrl(params.url!, params.message) : { action: 'decline' };
      return options.onForm ? options.onForm(params.message, params.requestedSchema) : { action: 'decline' };
    });
  }
  const token = typeof options.token === 'string' ? async () => options.token as string : options.token;
  await client.connect(new StreamableHTTPClientTransport(new URL(options.url), { authProvider: { token } }));
  return client;
}

/** `fn(client)`, then the client closed whatever happened. */
export async function closing<T>(client: Client, fn: (client: Client) => Promise<T>): Promise<T> {
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

/** The official SDK client in its default (2025-11-25, initialize handshake) era. */
export async function legacyClient(options: { url: string; token: string }): Promise<Client> {
  const client = new Client({ name: 'legacy-assistant', version: '1.0.0' }, { capabilities: { elicitation: { url: {} } } });
  client.setRequestHandler('elicitation/create', async () => ({ action: 'decline' as const }));
  await client.connect(new StreamableHTTPClientTransport(new URL(options.url), { authProvider: { token: async () => options.token } }));
  return client;
}

/** Text of a tool result's content blocks. */
export function resultText(result: unknown): string {
  const content = (result as { content?: Array<{ type: string; text?: string }> }).content ?? [];
  return content.map((c) => c.text ?? '').join('\n');
}

/** Raw JSON-RPC POST to /mcp the way a 2026-07-28 client sends it, for wire-level assertions. */
export async function rawCall(
  mcpUrl: string,
  token: string | undefined,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: any; text: string }> {
  const method = String(body.method);
  const params = (body.params ?? {}) as Record<string, unknown>;
  const res = await fetch(mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': method,
      ...(typeof params.name === 'string' ? { 'mcp-name': params.name } : {}),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...body }),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text.startsWith('event:') || text.startsWith('data:') ? (/data: (.*)/.exec(text)?.[1] ?? 'null') : text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

export function envelope(capabilities: Record<string, unknown> = { elicitation: { url: {}, form: {} } }) {
  return {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'raw-client', version: '1.0.0' },
    'io.modelcontextprotocol/clientCapabilities': capabilities,
  };
}
