import { validateHostHeader, validateOriginHeader } from '@modelcontextprotocol/server';
import type { RequestHandler } from 'express';

const jsonRpcForbidden = (message: string) => ({ jsonrpc: '2.0', id: null, error: { code: -32000, message } });

/** DNS-rebinding defence: the `Host` header must name this service. */
export function hostGuard(allowedHostnames: string[]): RequestHandler {
  return (req, res, next) => {
    const result = validateHostHeader(req.headers.host, allowedHostnames);
    if (result.ok) return next();
    const body = req.path.startsWith('/mcp') ? jsonRpcForbidden(result.message) : { error: 'invalid_host', error_description: result.message };
    res.status(403).json(body);
  };
}

/** A present `Origin` must be ours; `Origin: null` and foreign origins are refused. */
export function originGuard(allowedHostnames: string[]): RequestHandler {
  return (req, res, next) => {
    const result = validateOriginHeader(req.headers.origin, allowedHostnames);
    if (result.ok) return next();
    const body = req.path.startsWith('/mcp') ? jsonRpcForbidden(result.message) : { error: 'invalid_origin', error_description: result.message };
    res.status(403).json(body);
  };
}
