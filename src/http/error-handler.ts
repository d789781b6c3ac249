import type { ErrorRequestHandler, Request } from 'express';
import type { Logger } from '../log.js';
import { BrokerError } from './errors.js';
import { jsonRpcError } from './json-rpc-error.js';
import { renderMessage, type PageContext } from './render.js';

function wantsJson(req: Request): boolean {
  return req.path.startsWith('/mcp') || req.path.startsWith('/.well-known/') || !req.accepts('html');
}

/**
 * The one place errors become responses: a page for browsers, JSON(-RPC) for API routes, never a
 * stack trace. Body-parser errors (size, syntax) keep their 4xx status. `isUnavailable` picks the
 * errors that mean the database is away (a 503 with `Retry-After`), so this file needs no store.
 */
export function errorHandler(page: PageContext, log: Logger, isUnavailable: (err: unknown) => err is Error): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let status = 500;
    let code = 'internal_error';
    let message = 'Something went wrong on our side. Please try again.';
    let heading = 'Something went wrong';
    let extra: { detail?: string; action?: { href: string; label: string } } = {};
    if (err instanceof BrokerError) {
      ({ status, code, message } = err);
      heading = err.options.heading ?? heading;
      if (err.options.action) extra = { action: err.options.action };
      if (err.options.detail) log.info('request_refused', { errorCode: code, status, detail: err.options.detail });
    } else if (isUnavailable(err)) {
      status = 503;
      code = 'temporarily_unavailable';
      message = 'This service cannot reach its database right now. Nothing was changed; please try again in a moment.';
      heading = 'Temporarily unavailable';
      res.set('Retry-After', '5');
      log.warn('store_unavailable', { path: req.path, cause: err.cause instanceof Error ? err.cause.message : undefined });
    } else if (
      typeof err?.status === 'number' &&
      err.status >= 400 &&
      err.status < 500 &&
      (typeof err.expose === 'boolean' || err instanceof URIError)
    ) {
      // Client errors from middleware: http-errors instances (they carry `expose`) from body-parser
      // (entity.too.large, entity.parse.failed, ...) and serve-static (404 missing file, 403, 400),
      // and the router's URIError (status 400) for an undecodable path parameter. Other errors
      // that merely carry a status (an upstream library's) stay 500s.
      status = err.status;
      code = typeof err.type === 'string' ? String(err.type).replace(/\W+/g, '_') : status === 404 ? 'not_found' : 'invalid_request';
      message =
        status === 413
          ? 'The request is too large.'
          : status === 404
            ? `There is nothing at ${req.path}.`
            : 'The request could not be read.';
      heading = status === 404 ? 'Page not found' : 'Bad request';
    } else {
      log.error('unhandled_error', { path: req.path, name: err?.name, message: err?.message });
    }
    if (res.headersSent) return void res.end();
    if (req.path.startsWith('/mcp')) return jsonRpcError(res, status, status >= 500 ? -32603 : -32600, message);
    if (wantsJson(req)) return void res.status(status).json({ error: code, error_description: message });
    renderMessage(res, page, status, heading, message, extra);
  };
}
