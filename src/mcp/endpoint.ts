import {
  bearerAuthChallengeResponse,
  OAuthError,
  verifyBearerToken,
  type AuthInfo,
  type McpHttpHandler,
} from '@modelcontextprotocol/server';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import {
  answerThenDiscard,
  BodyTooLarge,
  DISCARD_LIMITS,
  MAX_JSON_DEPTH,
  nestsDeeperThan,
  readBody,
  sendWebResponse,
  toWebRequest,
  type DiscardLimits,
} from '../http/web-adapter.js';
import { jsonRpcError, jsonRpcErrorBody } from '../http/json-rpc-error.js';
import type { McpRateLimit } from '../http/rate-limits.js';
import { IdentityProviderUnavailable, principalFromAuthInfo, type AccessTokenVerifier } from '../auth/bearer.js';
import { withFields, type Logger } from '../log.js';
import { requestIdOf } from '../http/request-log.js';
import { M } from './messages.js';
import { withHttpFacts } from './call.js';
import { traceMcpRequest } from '../observability/mcp-tracing.js';

export interface McpEndpointOptions {
  handler: McpHttpHandler;
  verifier: AccessTokenVerifier;
  audience: string;
  requiredScopes: string[];
  resourceMetadataUrl: string;
  maxBodyBytes: number;
  log: Logger;
  /** Runs between authentication and the handler, keyed by {@link mcpPrincipalKey} (the per-principal limit). */
  rateLimit?: McpRateLimit;
}

/** The verified caller of an authenticated /mcp request, as a rate-limit key; undefined before authentication. */
export function mcpPrincipalKey(res: Response): string | undefined {
  const principal = principalFromAuthInfo(res.locals.mcpAuth as AuthInfo | undefined);
  return principal ? JSON.stringify([principal.issuer, principal.subject]) : undefined;
}

/**
 * The body of a POST to an MCP endpoint, read by us (bounded) so that every refusal is JSON-RPC:
 * 415 for another content type, 413 past `maxBodyBytes`, 400 for JSON that does not parse or that
 * nests deeper than {@link MAX_JSON_DEPTH}. Resolves undefined once it has answered, or when the
 * client went away mid-body; other read errors are thrown. The 413 goes out at once, and what the
 * client still sends is read (within `discard`) so that it sees it. The sandbox GitHub's MCP
 * endpoint (src/dev/) reads its bodies through it too.
 */
export async function readJsonRpcBody(
  req: Request,
  res: Response,
  maxBodyBytes: number,
  discard: DiscardLimits = DISCARD_LIMITS,
): Promise<{ body: string; parsed: unknown } | undefined> {
  if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) return void jsonRpcError(res, 415, -32000, M.notJson);
  let body: string;
  try {
    body = (await readBody(req, maxBodyBytes)).toString('utf8');
  } catch (err) {
    if (err instanceof BodyTooLarge)
      return void answerThenDiscard(req, res, 413, jsonRpcErrorBody(-32600, M.tooLarge(maxBodyBytes)), discard);
    // The client went away mid-body: nobody is left to answer.
    if (req.destroyed || (err as NodeJS.ErrnoException).code === 'ECONNRESET' || (err as Error).message === 'aborted')
      return void res.destroy();
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return void jsonRpcError(res, 400, -32700, M.parseError);
  }
  if (nestsDeeperThan(parsed, MAX_JSON_DEPTH)) return void jsonRpcError(res, 400, -32600, M.tooDeep(MAX_JSON_DEPTH));
  return { body, parsed };
}

/**
 * POST/GET/DELETE /mcp: authenticate every request on its own (no sessions, no token passthrough),
 * count it against the caller's rate limit (after authentication, so anonymous requests cost no
 * one's budget), bound and parse the body ourselves so limits and parse errors are JSON-RPC, then
 * hand the request to the SDK's stateless handler with the verified principal attached.
 */
export function mcpEndpoint(options: McpEndpointOptions, publicUrl: URL): RequestHandler[] {
  const { handler, verifier, log } = options;
  const authenticate = async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    try {
      res.locals.mcpAuth = await verifyBearerToken(req.headers.authorization, {
        verifier,
        requiredScopes: options.requiredScopes,
        resourceMetadataUrl: options.resourceMetadataUrl,
        expectedResource: new URL(options.audience),
      });
    } catch (err) {
      if (err instanceof IdentityProviderUnavailable) {
        withFields(log, { reqId: requestIdOf(res) }).error('idp_unavailable', { message: err.message });
        return jsonRpcError(res, 503, -32603, M.idpDown, {
          'Retry-After': '5',
        });
      }
      if (err instanceof OAuthError) {
        return sendWebResponse(
          res,
          bearerAuthChallengeResponse(err, { requiredScopes: options.requiredScopes, resourceMetadataUrl: options.resourceMetadataUrl }),
        );
      }
      throw err;
    }
    next();
  };

  const serve = async (req: Request, res: Response): Promise<void> => {
    const authInfo = res.locals.mcpAuth as AuthInfo;
    let body: string | undefined;
    let parsed: unknown;
    if (req.method === 'POST') {
      const read = await readJsonRpcBody(req, res, options.maxBodyBytes);
      if (!read) return;
      ({ body, parsed } = read);
      // A 2025-11-25 batch is as many requests as it holds calls.
      if (Array.isArray(parsed) && options.rateLimit && (await options.rateLimit.chargeBatch(res, parsed.length))) return;
    }

    await traceMcpRequest(req.method, req.headers, parsed, async () => {
      const request = toWebRequest(req, res, publicUrl.href, body);
      const response = await handler.fetch(request, {
        authInfo: withHttpFacts(authInfo, parsed, requestIdOf(res)),
        ...(parsed !== undefined ? { parsedBody: parsed } : {}),
      });
      await sendWebResponse(res, response);
      return response.status;
    });
  };
  return [authenticate, ...(options.rateLimit ? [options.rateLimit] : []), serve];
}
