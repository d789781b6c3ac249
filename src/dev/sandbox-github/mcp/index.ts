// The sandbox GitHub's MCP endpoint (<sandbox>/mcp): a small stand-in for GitHub's remote MCP server
// (github/github-mcp-server), over the sandbox store. Like GitHub's, it takes only GitHub tokens —
// here the sandbox's own, checked exactly as the sandbox REST API checks them — answers a request
// without one with a 401 Bearer challenge naming its protected-resource metadata, and answers an
// OAuth App token that lacks a tool's scopes with a 403 `insufficient_scope` challenge (its
// docs/scope-filtering.md; GitHub App tokens have no scopes and are not challenged). Served with
// the SDK's stateless handler: 2026-07-28 requests, and 2025-11-25 ones statelessly.
//
// It records which sandbox user's token each call came with (`calls()`), never the token.
import { createMcpHandler, createRequestStateCodec, McpServer, type AuthInfo, type ServerContext } from '@modelcontextprotocol/server';
import express from 'express';
import type { Request, Response } from 'express';
import { randomText, sha256Base64url } from '../../../crypto/index.js';
import { jsonRpcError } from '../../../http/json-rpc-error.js';
import { sendWebResponse, toWebRequest } from '../../../http/web-adapter.js';
import { canonicalJson } from '../../../mcp/index.js';
import { readJsonRpcBody } from '../../../mcp/endpoint.js';
import type { SandboxGitHubStore, SandboxToken, SandboxUser } from '../../store/index.js';
import { D, M, MCP_SERVER_NAME } from './messages.js';
import { administers, registerSandboxTools, type DeleteRepositoryState, type SandboxCaller } from './tools.js';

export { CONFIRM_FIELD, CONFIRM_KEY, type DeleteRepositoryState } from './tools.js';

/**
 * A fault of the MCP endpoint (sticky, like the REST API's): 401 answers every request as if its
 * token were revoked; 403 answers every call of a tool that needs scopes with the insufficient_scope
 * challenge, whatever the token holds; 500 answers every request with a server error; 'timeout'
 * never answers.
 */
export type SandboxMcpFault = 401 | 403 | 500 | 'timeout';

/** One request that reached the endpoint, as {@link SandboxMcp.calls} lists it. */
export interface SandboxMcpCall {
  at: number;
  /** The sandbox user whose token came in; absent when there was no working sandbox token. */
  login?: string;
  userId?: number;
  /** The app the token was issued to. */
  clientId?: string;
  /** The JSON-RPC method (absent when the request was refused before its body was read). */
  method?: string;
  /** `params.name` of a tools/call. */
  tool?: string;
  outcome: 'served' | 'unauthenticated' | 'insufficient_scope' | 'fault';
}

export interface SandboxMcpOptions {
  store: SandboxGitHubStore;
  /** The sandbox's "github.com" (its publicBase, no trailing slash). */
  webUrl: string;
  now: () => number;
  /** Read on every request. */
  faults: { mcp?: SandboxMcpFault | undefined };
  /** The HMAC key of delete_repository's requestState: at least 32 bytes; default a random one per process. */
  stateKey?: string | Uint8Array | undefined;
  /** The sandbox REST API's bearer check: the working token's record and user, or undefined. */
  authenticate: (authorization: string | undefined) => { token: SandboxToken; user: SandboxUser } | undefined;
  /** Whether the app is an OAuth App (its tokens have scopes; GitHub App tokens have none). */
  isOAuthApp: (clientId: string) => boolean;
  /** Whether `granted` (a token's scopes) includes `scope`, directly or through a broader scope. */
  hasScope: (granted: string[], scope: string) => boolean;
  issueRefusal: (owner: string, repo: string) => { status: number; message: string } | undefined;
}

export interface SandboxMcp {
  /** Serves /mcp and its protected-resource metadata; mount it on the sandbox router before any body parser. */
  router: express.Router;
  /** The endpoint's URL (the resource). */
  url: string;
  resourceMetadataUrl: string;
  /** The last {@link MAX_RECORDED_CALLS} requests, oldest first (a copy). */
  calls(): SandboxMcpCall[];
}

/** The scopes a tool needs from an OAuth App token (as github-mcp-server declares them; reads need none here). */
export const TOOL_SCOPES: ReadonlyMap<string, readonly string[]> = new Map([
  ['create_issue', ['repo']],
  ['delete_repository', ['delete_repo', 'repo']],
]);

export const MAX_RECORDED_CALLS = 1000;
const MAX_BODY_BYTES = 1024 * 1024;
const MAX_RECORDED_NAME = 128;
const STATE_TTL_SECONDS = 600;
const CALLER = 'sandboxGitHub';

interface CallerInfo {
  caller: SandboxCaller;
  method: string;
  name: string;
  argsDigest: string;
}

const infoOf = (authInfo: AuthInfo | undefined): CallerInfo | undefined => authInfo?.extra?.[CALLER] as CallerInfo | undefined;

/** The JSON-RPC messages of a body (a 2025-era batch is several), each as method + params. */
function messagesOf(parsed: unknown): Array<{ method: string; params: Record<string, unknown> }> {
  return (Array.isArray(parsed) ? parsed : [parsed]).flatMap((m) => {
    if (!m || typeof m !== 'object' || typeof (m as { method?: unknown }).method !== 'string') return [];
    const params = (m as { params?: unknown }).params;
    return [
      { method: (m as { method: string }).method, params: params && typeof params === 'object' ? (params as Record<string, unknown>) : {} },
    ];
  });
}

/** Whether `login` administers the repository a delete_repository call names (false for a missing one or bad arguments). */
function administersTarget(store: SandboxGitHubStore, args: unknown, login: string): boolean {
  const { owner, repo } = (args && typeof args === 'object' ? args : {}) as { owner?: unknown; repo?: unknown };
  if (typeof owner !== 'string' || typeof repo !== 'string') return false;
  const repository = store.findRepository(owner, repo);
  return !!repository && administers(repository, login);
}

const quoted = (value: string): string => `"${value.replace(/[\\"]/g, '\\$&')}"`;

export function createSandboxMcp(options: SandboxMcpOptions): SandboxMcp {
  const { webUrl, now, faults } = options;
  const url = `${webUrl}/mcp`;
  const resourceMetadataUrl = `${webUrl}/.well-known/oauth-protected-resource/mcp`;
  const recorded: SandboxMcpCall[] = [];
  const record = (call: Omit<SandboxMcpCall, 'at'>) => {
    recorded.push({ at: now(), ...call });
    if (recorded.length > MAX_RECORDED_CALLS) recorded.splice(0, recorded.length - MAX_RECORDED_CALLS);
  };

  // Its own key, never the broker's: the sandbox plays another party.
  const codec = createRequestStateCodec<DeleteRepositoryState>({
    key: options.stateKey ?? randomText(32, 'base64url'),
    ttlSeconds: STATE_TTL_SECONDS,
    bind: (ctx: ServerContext) => {
      const info = infoOf(ctx.http?.authInfo);
      // Fail closed: a state is only ever bound to the user, the app, the tool and its arguments.
      if (!info || info.method !== ctx.mcpReq.method) throw new Error('requestState needs a sandbox caller and the call it belongs to');
      return [info.caller.login.toLowerCase(), info.caller.clientId, info.method, info.name, info.argsDigest].join('\0');
    },
  });
  const tools = {
    store: options.store,
    webUrl,
    now,
    codec,
    issueRefusal: options.issueRefusal,
    callerOf: (ctx: ServerContext): SandboxCaller => {
      const info = infoOf(ctx.http?.authInfo);
      if (!info) throw new Error('no sandbox caller'); // unreachable: every request is authenticated first
      return info.caller;
    },
  };
  const handler = createMcpHandler(
    (rc) => {
      const server = new McpServer(
        { name: MCP_SERVER_NAME, version: '0.1.0' },
        {
          capabilities: { tools: { listChanged: false } },
          requestState: { verify: (state, ctx) => codec.verify(state, ctx) },
          instructions: D.instructions,
        },
      );
      server.server.onerror = () => {}; // the sandbox never logs
      registerSandboxTools(server, tools, rc.era);
      return server;
    },
    { onerror: () => {} },
  );

  const challenge = (res: Response, status: 401 | 403, params: string[], text: string) =>
    void res
      .status(status)
      .set('WWW-Authenticate', `Bearer ${[...params, `resource_metadata=${quoted(resourceMetadataUrl)}`].join(', ')}`)
      .type('text/plain')
      .send(text);

  const serve = async (req: Request, res: Response): Promise<void> => {
    res.set('Cache-Control', 'no-store');
    const fault = faults.mcp;
    if (fault === 'timeout') return record({ outcome: 'fault' }); // never answers (the client, or closing the server, ends it)
    if (fault === 500) {
      record({ outcome: 'fault' });
      return jsonRpcError(res, 500, -32603, M.serverError);
    }

    const authorization = req.get('authorization');
    const auth = authorization === undefined ? undefined : options.authenticate(authorization);
    if (!auth) {
      record({ outcome: 'unauthenticated' });
      return authorization === undefined
        ? challenge(res, 401, [], M.unauthorized)
        : challenge(res, 401, ['error="invalid_token"', `error_description=${quoted(M.badCredentials)}`], M.badCredentials);
    }
    const caller: SandboxCaller = { login: auth.user.login, userId: auth.user.id, clientId: auth.token.clientId };
    const who = { login: caller.login, userId: caller.userId, clientId: caller.clientId };
    if (fault === 401) {
      record({ ...who, outcome: 'fault' });
      return challenge(res, 401, ['error="invalid_token"', `error_description=${quoted(M.badCredentials)}`], M.badCredentials);
    }

    let body: string | undefined;
    let parsed: unknown;
    if (req.method === 'POST') {
      // The broker's own /mcp body handling: the same bounds, the same JSON-RPC refusals.
      const read = await readJsonRpcBody(req, res, MAX_BODY_BYTES);
      if (!read) return;
      ({ body, parsed } = read);
    }
    const messages = messagesOf(parsed).map((m) => ({
      ...m,
      tool: m.method === 'tools/call' && typeof m.params.name === 'string' ? m.params.name : undefined,
    }));
    const recordAll = (outcome: SandboxMcpCall['outcome']) => {
      for (const m of messages)
        record({
          ...who,
          method: m.method.slice(0, MAX_RECORDED_NAME),
          ...(m.tool === undefined ? {} : { tool: m.tool.slice(0, MAX_RECORDED_NAME) }),
          outcome,
        });
    };

    // GitHub's scope challenge: before the tool runs, for OAuth App tokens only. A person is never
    // asked for a scope that cannot help: delete_repository on a repository they do not administer
    // (or that does not exist) goes on to the tool, which says so.
    for (const m of messages) {
      const needed = TOOL_SCOPES.get(m.tool ?? '');
      if (!needed) continue;
      if (m.tool === 'delete_repository' && !administersTarget(options.store, m.params.arguments, caller.login)) continue;
      const oauthApp = options.isOAuthApp(auth.token.clientId);
      const missing = needed.filter((s) => !options.hasScope(auth.token.scopes, s));
      if (fault !== 403 && (!oauthApp || missing.length === 0)) continue;
      const lacking = missing.length ? missing : [...needed];
      recordAll('insufficient_scope');
      // As GitHub's does: the scopes to ask for are the token's plus the tool's.
      const recommended = [...new Set([...auth.token.scopes, ...needed])];
      return challenge(
        res,
        403,
        [
          'error="insufficient_scope"',
          `scope=${quoted(recommended.join(' '))}`,
          `error_description=${quoted(`Additional scopes required: ${lacking.join(', ')}`)}`,
        ],
        M.insufficientScope(lacking),
      );
    }
    recordAll('served');

    const first = messages[0];
    const info: CallerInfo = {
      caller,
      method: first?.method ?? '',
      name: first?.tool ?? '',
      argsDigest: sha256Base64url(canonicalJson(first?.params.arguments ?? {})),
    };
    // The tools need to know only who called; the token itself goes no further than the check above.
    const authInfo: AuthInfo = { token: '', clientId: caller.clientId, scopes: auth.token.scopes, extra: { [CALLER]: info } };
    const response = await handler.fetch(toWebRequest(req, res, webUrl, body), {
      authInfo,
      ...(parsed !== undefined ? { parsedBody: parsed } : {}),
    });
    await sendWebResponse(res, response);
  };

  const router = express.Router();
  router.all('/mcp', (req, res) =>
    serve(req, res).catch(() => {
      if (!res.headersSent) jsonRpcError(res, 500, -32603, M.internalError);
      else res.end();
    }),
  );
  // RFC 9728 metadata, at the URL the challenges name (GitHub serves its own likewise).
  router.get('/.well-known/oauth-protected-resource/mcp', (_req, res) => {
    res.set('Cache-Control', 'no-store').json({
      resource: url,
      authorization_servers: [`${webUrl}/login/oauth`],
      resource_name: MCP_SERVER_NAME,
      scopes_supported: [...new Set([...TOOL_SCOPES.values()].flat())],
      bearer_methods_supported: ['header'],
    });
  });

  return { router, url, resourceMetadataUrl, calls: () => recorded.map((c) => ({ ...c })) };
}
