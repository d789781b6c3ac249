// An example service: an MCP server of the operator's, on its own port and audience, whose one tool
// creates a GitHub issue with the signed-in user's GitHub token, obtained from the connection broker
// through `mcp-connect-broker/client`. It never sees a refresh token and never shows a token.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import {
  McpServer,
  createMcpHandler,
  getOAuthProtectedResourceMetadataUrl,
  hostHeaderValidationResponse,
  oauthMetadataResponse,
  requireBearerAuth,
  type CallToolResult,
  type OAuthMetadata,
} from '@modelcontextprotocol/server';
import * as z from 'zod/v4';
import { connectBroker, type Broker, type BrokerOptions } from '../../src/client/index.js';
import { idpTokenVerifier } from './bearer.js';

export interface IssueServiceOptions {
  /** The broker's PUBLIC_URL. */
  brokerUrl: string;
  /** This service's id at the broker (`services:` in its config). */
  serviceId: string;
  serviceSecret: string;
  /** ≥ 32 bytes, the same on every instance. */
  stateKey: string;
  /** The operator's IdP: the users' tokens come from it. */
  oidcIssuer: string;
  /** This service's MCP URL, the audience of its users' tokens, e.g. http://127.0.0.1:4100/mcp. */
  audience: string;
  /** Where GitHub's REST API lives (https://api.github.com, or a stand-in). */
  githubApiUrl: string;
  /** The scopes its resource metadata advertises, so clients ask the IdP for them (e.g. ['mcp']). */
  scopes?: string[];
  /** Listen port (default: the audience's port, or 0 for any). */
  port?: number;
  host?: string;
  /** Extra broker options (waitSeconds, fetch, …). */
  broker?: Partial<BrokerOptions>;
  /** Where diagnostics go (never a secret); silent by default. */
  log?: (line: string) => void;
}

export interface IssueService {
  url: string;
  port: number;
  broker: Broker;
  close(): Promise<void>;
}

const createIssueInput = z.object({
  owner: z.string().min(1).max(100),
  repo: z.string().min(1).max(100),
  title: z.string().min(1).max(256),
});

/** The MCP server of one request (the SDK builds one per HTTP request). */
export function buildIssueServer(broker: Broker, githubApiUrl: string): McpServer {
  // The helper's hook: a tampered, foreign or expired state is refused with -32602 before the tool runs.
  const server = new McpServer(
    { name: 'issue-service', version: '0.1.0' },
    { capabilities: { tools: {} }, requestState: broker.requestState },
  );
  server.registerTool(
    'create_issue',
    {
      description: 'Create a GitHub issue as the signed-in user (their GitHub account is connected through the connection broker).',
      inputSchema: createIssueInput,
    },
    (args, ctx) =>
      broker.withToken(
        ctx,
        {
          provider: 'github',
          scopes: ['public_repo'],
          purpose: `create the issue in ${args.owner}/${args.repo}`,
          tool: 'create_issue',
          args,
        },
        async (token, info) => createIssue(githubApiUrl, token, args, info.login),
      ),
  );
  return server;
}

async function createIssue(
  apiUrl: string,
  token: string,
  args: z.infer<typeof createIssueInput>,
  login: string | undefined,
): Promise<CallToolResult> {
  const url = `${apiUrl.replace(/\/$/, '')}/repos/${encodeURIComponent(args.owner)}/${encodeURIComponent(args.repo)}/issues`;
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      accept: 'application/vnd.github+json',
      'content-type': 'application/json',
      'x-github-api-version': '2022-11-28',
      'user-agent': 'mcp-connect-broker-example-issue-service',
    },
    body: JSON.stringify({ title: args.title }),
    redirect: 'error',
  });
  const body = (await res.json().catch(() => ({}))) as { number?: unknown; html_url?: unknown; message?: unknown };
  if (res.status !== 201 || typeof body.number !== 'number' || typeof body.html_url !== 'string') {
    const why = typeof body.message === 'string' ? body.message.slice(0, 200) : `HTTP ${res.status}`;
    return { content: [{ type: 'text', text: `GitHub did not create the issue (${why}).` }], isError: true };
  }
  return {
    content: [{ type: 'text', text: `Created ${args.owner}/${args.repo}#${body.number}${login ? ` as ${login}` : ''}: ${body.html_url}` }],
    structuredContent: { number: body.number, url: body.html_url },
  };
}

/** Starts the example service on its own port. */
export async function startIssueService(options: IssueServiceOptions): Promise<IssueService> {
  const audience = new URL(options.audience);
  const log = options.log ?? (() => undefined);
  const broker = connectBroker({
    url: options.brokerUrl,
    clientId: options.serviceId,
    clientSecret: options.serviceSecret,
    stateKey: options.stateKey,
    onError: (e) => log(`broker: ${e.message}`),
    ...options.broker,
  });
  const handler = createMcpHandler(() => buildIssueServer(broker, options.githubApiUrl), { onerror: (e) => log(`mcp: ${e.message}`) });
  const resourceMetadataUrl = getOAuthProtectedResourceMetadataUrl(audience);
  const gate = requireBearerAuth({
    verifier: idpTokenVerifier(options.oidcIssuer, audience.href),
    resourceMetadataUrl,
    expectedResource: audience,
  });
  const oauthMetadata = {
    issuer: options.oidcIssuer,
    authorization_endpoint: `${options.oidcIssuer}/auth`,
    token_endpoint: `${options.oidcIssuer}/token`,
    response_types_supported: ['code'],
  } satisfies OAuthMetadata;

  const serve = async (request: Request): Promise<Response> => {
    const badHost = hostHeaderValidationResponse(request, [audience.hostname, 'localhost', '127.0.0.1', '[::1]']);
    if (badHost) return badHost;
    const metadata = oauthMetadataResponse(request, {
      oauthMetadata,
      resourceServerUrl: audience,
      resourceName: 'Example issue service',
      ...(options.scopes?.length ? { scopesSupported: options.scopes } : {}),
    });
    if (metadata) return metadata;
    if (new URL(request.url).pathname !== audience.pathname) return new Response('Not found', { status: 404 });
    const auth = await gate(request);
    if (auth instanceof Response) return auth;
    return handler.fetch(request, { authInfo: auth });
  };

  const http = createServer((req, res) => void nodeToFetch(req, res, serve));
  const host = options.host ?? '127.0.0.1';
  const port = await listen(http, options.port ?? (audience.port ? Number(audience.port) : 0), host);
  return {
    url: audience.href,
    port,
    broker,
    close: async () => {
      await handler.close();
      await new Promise<void>((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      });
    },
  };
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** node:http ↔ fetch, streaming both bodies (the SDK's own body limit applies). */
async function nodeToFetch(req: IncomingMessage, res: ServerResponse, serve: (r: Request) => Promise<Response>): Promise<void> {
  try {
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
      else if (v !== undefined) headers.set(k, v);
    }
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    const init: RequestInit & { duplex?: 'half' } = { method: req.method ?? 'GET', headers, signal: abort.signal };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      init.body = Readable.toWeb(req) as unknown as ReadableStream;
      init.duplex = 'half';
    }
    const response = await serve(new Request(new URL(req.url ?? '/', `http://${req.headers.host ?? 'localhost'}`), init));
    res.statusCode = response.status;
    response.headers.forEach((v, k) => res.setHeader(k, v));
    if (!response.body) {
      res.end();
      return;
    }
    res.flushHeaders();
    const reader = response.body.getReader();
    res.on('close', () => void reader.cancel().catch(() => undefined));
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      res.write(value);
    }
    res.end();
  } catch {
    if (!res.headersSent) res.statusCode = 500;
    res.end();
  }
}
