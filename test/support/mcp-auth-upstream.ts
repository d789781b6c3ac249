// Test helper: an `auth: mcp` upstream — a 2025-11-25 sessionful MCP server (official SDK) protected
// by its own authorization server, a second oidc-provider instance (src/dev/identity-provider.ts,
// not the broker's IdP) with dynamic registration, client ID metadata documents and resource
// indicators. The MCP server verifies the AS's JWT access tokens (jose, against its JWKS) with
// audience = its own URL, and answers 401 with a `resource_metadata` challenge.
import { randomUUID } from 'node:crypto';
import { request as httpRequest, type Server, type ServerResponse } from 'node:http';
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import {
  McpServer,
  UrlElicitationRequiredError,
  WebStandardStreamableHTTPServerTransport,
  isInitializeRequest,
} from '@modelcontextprotocol/server';
import * as z from 'zod/v4';
import { createIdentityProvider, type IdpClient } from '../../src/dev/identity-provider.js';
import { readBody, sendWebResponse } from '../../src/http/web-adapter.js';
import { bindLoopback, portOf } from './listen.js';

export interface UpstreamOptions {
  /** The MCP server, bound beforehand (`bindUpstreamServer`), so a broker can be configured with its URL first. */
  mcpServer?: Server;
  /** Clients registered at the upstream's AS beforehand (the operator's pre-registration). */
  clients?: (upstreamUrl: string) => IdpClient[];
  /** What the protected resource metadata says its `resource` is (default: the MCP URL). */
  prmResource?: (upstreamUrl: string) => string;
  /** What it names as its authorization server (default: the AS issuer). */
  authorizationServer?: (issuer: string) => string;
  /** Changes the AS's discovery documents as the broker reads them (e.g. to hide its OpenID Connect support). */
  rewriteAsMetadata?: (metadata: Record<string, unknown>) => Record<string, unknown>;
  /** Leave `resource_metadata` out of the 401 (clients must then try the well-known URLs). */
  noChallengeMetadata?: boolean;
}

export interface AsRequest {
  method: string;
  path: string;
  body: URLSearchParams;
  raw: string;
}

export interface ProtectedUpstream {
  /** The MCP endpoint, e.g. http://127.0.0.1:P/mcp. */
  url: string;
  issuer: string;
  /** The access token claims every accepted MCP request carried. */
  readonly accepted: JWTPayload[];
  /** Every bearer token the MCP server was sent, accepted or not. */
  readonly bearers: string[];
  /** Every request the AS received, with its form body (what the broker sent to `/token`, `/reg`, …). */
  readonly asRequests: AsRequest[];
  /** Requests the MCP server refused with 401. */
  readonly refused: number;
  close(): Promise<void>;
}

/**
 * A server bound on 127.0.0.1 for an upstream started later: it answers 503 until
 * `startProtectedUpstream({ mcpServer })` takes it over, as an upstream that is not up yet would
 * (a broker that reads its discovery meanwhile gets a quick failure and retries on first use).
 */
export async function bindUpstreamServer(): Promise<Server> {
  const server = await bindLoopback();
  server.on('request', (_req, res) => res.writeHead(503).end());
  return server;
}

export async function startProtectedUpstream(options: UpstreamOptions = {}): Promise<ProtectedUpstream> {
  const asServer = await bindLoopback();
  const asPort = portOf(asServer);
  const issuer = `http://127.0.0.1:${asPort}`;
  const mcpServer = options.mcpServer ?? (await bindLoopback());
  const mcpPort = portOf(mcpServer);
  // A server bound beforehand answered 503 meanwhile (bindUpstreamServer): from here on, the upstream answers.
  mcpServer.removeAllListeners('request');
  const url = `http://127.0.0.1:${mcpPort}/mcp`;
  const asRequests: AsRequest[] = [];

  const idp = await createIdentityProvider({
    issuer,
    clients: options.clients?.(url) ?? [],
    // A decoy as the default resource: a client that forgets `resource` gets a token the upstream refuses.
    resource: `http://127.0.0.1:${asPort}/decoy`,
    moreResources: [url],
    loopbackMetadataDocuments: true,
  });
  // The AS behind a recording proxy: the tests read what the broker sent to its endpoints.
  const inner = await bindLoopback();
  inner.on('request', idp.callback());
  const innerPort = portOf(inner);
  asServer.on('request', (req, res) => {
    void (async () => {
      const path = new URL(req.url ?? '/', issuer).pathname;
      const body = await readBody(req, Number.POSITIVE_INFINITY);
      asRequests.push({ method: req.method ?? 'GET', path, body: new URLSearchParams(body.toString('utf8')), raw: body.toString('utf8') });
      // Host and all: oidc-provider names its endpoints after the request's host.
      const upstreamReq = httpRequest(
        { host: '127.0.0.1', port: innerPort, method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers },
        (upstreamRes) => {
          const rewrite = options.rewriteAsMetadata;
          if (!rewrite || !/^\/\.well-known\/(oauth-authorization-server|openid-configuration)$/.test(path)) {
            res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
            return void upstreamRes.pipe(res);
          }
          void readBody(upstreamRes, Number.POSITIVE_INFINITY).then((raw) => {
            const json = JSON.stringify(rewrite(JSON.parse(raw.toString('utf8')) as Record<string, unknown>));
            const { 'content-length': _length, ...headers } = upstreamRes.headers;
            void _length;
            res.writeHead(upstreamRes.statusCode ?? 502, headers);
            res.end(json);
          });
        },
      );
      upstreamReq.on('error', (err) => {
        if (!res.headersSent) res.statusCode = 502;
        res.end(String(err));
      });
      upstreamReq.end(body);
    })().catch((err: unknown) => {
      if (!res.headersSent) res.statusCode = 502;
      res.end(String(err));
    });
  });

  const jwks = createRemoteJWKSet(new URL(`${issuer}/jwks`));
  const metadataUrl = `http://127.0.0.1:${mcpPort}/.well-known/oauth-protected-resource/mcp`;
  const accepted: JWTPayload[] = [];
  const bearers: string[] = [];
  let refused = 0;
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();

  const challenge = (res: ServerResponse, description: string) => {
    refused += 1;
    res.statusCode = 401;
    res.setHeader(
      'WWW-Authenticate',
      `Bearer error="invalid_token", error_description="${description}"${options.noChallengeMetadata ? '' : `, resource_metadata="${metadataUrl}"`}, scope="mcp"`,
    );
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ error: 'invalid_token', error_description: description }));
  };

  mcpServer.on('request', (req, res) => {
    void (async () => {
      const path = new URL(req.url ?? '/', url).pathname;
      if (req.method === 'GET' && path === '/.well-known/oauth-protected-resource/mcp') {
        res.setHeader('Content-Type', 'application/json');
        res.end(
          JSON.stringify({
            resource: options.prmResource?.(url) ?? url,
            authorization_servers: [options.authorizationServer?.(issuer) ?? issuer],
            scopes_supported: ['mcp'],
            bearer_methods_supported: ['header'],
          }),
        );
        return;
      }
      if (path !== '/mcp') {
        res.statusCode = 404;
        return void res.end();
      }
      const header = req.headers.authorization ?? '';
      const token = /^Bearer (.+)$/.exec(header)?.[1];
      if (!token) return challenge(res, 'Missing Authorization header');
      bearers.push(token);
      let claims: JWTPayload;
      try {
        ({ payload: claims } = await jwtVerify(token, jwks, { issuer, audience: url, typ: 'at+jwt' }));
      } catch {
        return challenge(res, 'The access token is not valid for this server');
      }
      accepted.push(claims);
      const body = await readBody(req, Number.POSITIVE_INFINITY);
      const parsed: unknown = body.length ? JSON.parse(body.toString('utf8')) : undefined;
      const request = new Request(new URL(req.url ?? '/', url), {
        method: req.method ?? 'GET',
        headers: Object.entries(req.headers).flatMap(([k, v]) => (typeof v === 'string' ? [[k, v] as [string, string]] : [])),
      });
      const authInfo = {
        token,
        clientId: String(claims.client_id ?? ''),
        scopes: String(claims.scope ?? '').split(' '),
        expiresAt: claims.exp ?? 0,
        extra: { sub: claims.sub ?? '' },
      };
      const sid = req.headers['mcp-session-id'];
      let transport = typeof sid === 'string' ? sessions.get(sid) : undefined;
      if (!transport) {
        if (typeof sid === 'string' || !isInitializeRequest(parsed)) {
          res.statusCode = typeof sid === 'string' ? 404 : 400;
          return void res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'No session' } }));
        }
        transport = new WebStandardStreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => void sessions.set(id, transport!),
        });
        const mcp = new McpServer({ name: 'tracker', version: '1.0.0' }, { capabilities: { tools: {} } });
        mcp.registerTool('whoami', { description: 'Who the access token is for' }, async (ctx) => ({
          content: [{ type: 'text', text: `you are ${String(ctx.http?.authInfo?.extra?.sub ?? 'nobody')}` }],
        }));
        // Asks (2025-11-25's -32042) to open `url` first: its own AS's account page, say.
        mcp.registerTool(
          'open_link',
          { description: 'Asks the user to open a link first', inputSchema: z.object({ url: z.string() }) },
          async ({ url: link }) => {
            throw new UrlElicitationRequiredError([
              { mode: 'url', url: link, message: 'Confirm your tracker account.', elicitationId: 'tracker-1' },
            ]);
          },
        );
        await mcp.connect(transport);
      }
      await sendWebResponse(res, await transport.handleRequest(request, { parsedBody: parsed, authInfo }));
    })().catch((err: unknown) => {
      if (!res.headersSent) res.statusCode = 500;
      res.end(String(err));
    });
  });

  return {
    url,
    issuer,
    accepted,
    bearers,
    asRequests,
    get refused() {
      return refused;
    },
    async close() {
      for (const t of sessions.values()) await t.close().catch(() => {});
      for (const s of [mcpServer, asServer, inner]) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
    },
  };
}
