import { validateHostHeader, validateOriginHeader } from '@modelcontextprotocol/server';
import type { Request, RequestHandler, Response } from 'express';

/** 403 as a JSON-RPC error on /mcp, as plain JSON elsewhere. */
function refuse(res: Response, path: string, error: string, message: string): void {
  res.status(403).json(path.startsWith('/mcp') ? { jsonrpc: '2.0', id: null, error: { code: -32000, message } } : { error, error_description: message });
}

/** DNS-rebinding defence: the `Host` header must name this service. */
export function hostGuard(allowedHostnames: string[]): RequestHandler {
  return (req, res, next) => {
    const result = validateHostHeader(req.headers.host, allowedHostnames);
    if (result.ok) next();
    else refuse(res, req.path, 'invalid_host', result.message);
  };
}

/** A present `Origin` must be ours; `Origin: null` and foreign origins are refused. */
export function originGuard(allowedHostnames: string[]): RequestHandler {
  return (req, res, next) => {
    const result = validateOriginHeader(req.headers.origin, allowedHostnames);
    if (result.ok) next();
    else refuse(res, req.path, 'invalid_origin', result.message);
  };
}

/**
 * The same Origin check for our own forms (pages), where privacy settings can make a browser send
 * `Origin: null` for a same-origin POST: trust its Fetch Metadata then.
 */
export function formOriginOk(req: Request, allowedHostnames: string[]): boolean {
  if (req.headers.origin === 'null') return req.headers['sec-fetch-site'] === 'same-origin';
  return validateOriginHeader(req.headers.origin, allowedHostnames).ok;
}
