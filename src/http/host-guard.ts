import { validateHostHeader } from '@modelcontextprotocol/server';
import type { Request, RequestHandler, Response } from 'express';
import { jsonRpcError } from './json-rpc-error.js';

/** 403 as a JSON-RPC error on /mcp, as plain JSON elsewhere. */
function refuse(res: Response, path: string, error: string, message: string): void {
  if (path.startsWith('/mcp')) jsonRpcError(res, 403, -32000, message);
  else res.status(403).json({ error, error_description: message });
}

/**
 * DNS-rebinding defence: the `Host` header must name this service. Host names only: behind a proxy
 * the port in `Host` is often the internal one, and a rebinding page cannot choose our name anyway.
 */
export function hostGuard(allowedHostnames: string[]): RequestHandler {
  return (req, res, next) => {
    const result = validateHostHeader(req.headers.host, allowedHostnames);
    if (result.ok) next();
    else refuse(res, req.path, 'invalid_host', result.message);
  };
}

/**
 * Whether a request's `Origin` is one of `allowedOrigins` (serialized origins, lowercase): scheme,
 * host and port compared whole, so another port or scheme on our host name is a different site.
 * No `Origin` at all is a non-browser client; `null` and anything else are refused.
 */
export function originAllowed(origin: string | undefined, allowedOrigins: ReadonlySet<string>): boolean {
  return origin === undefined || origin === '' || allowedOrigins.has(origin.toLowerCase());
}

/** A present `Origin` must be ours; `Origin: null` and foreign origins are refused. */
export function originGuard(allowedOrigins: ReadonlySet<string>): RequestHandler {
  return (req, res, next) => {
    if (originAllowed(req.headers.origin, allowedOrigins)) next();
    else refuse(res, req.path, 'invalid_origin', 'Forbidden: requests from this Origin are not accepted');
  };
}

/**
 * The same Origin check for our own forms (pages), where privacy settings can make a browser send
 * `Origin: null` for a same-origin POST: trust its Fetch Metadata then.
 */
export function formOriginOk(req: Request, allowedOrigins: ReadonlySet<string>): boolean {
  if (req.headers.origin === 'null') return req.headers['sec-fetch-site'] === 'same-origin';
  return originAllowed(req.headers.origin, allowedOrigins);
}
