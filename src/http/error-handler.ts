import type { ErrorRequestHandler, Request } from 'express';
import type { Logger } from '../log.js';
import { BrokerError } from './errors.js';
import { renderMessage, type PageContext } from './render.js';

function wantsJson(req: Request): boolean {
  return req.path.startsWith('/mcp') || req.path.startsWith('/.well-known/') || !req.accepts('html');
}

/**
 * The one place errors become responses: a page for browsers, JSON(-RPC) for API routes, never a
 * stack trace. Body-parser errors (size, syntax) keep their 4xx status.
 */
export function errorHandler(page: PageContext, log: Logger): ErrorRequestHandler {
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
      if (err.options.detail) log.info('request_refused', { code, status, detail: err.options.detail });
    } else if (typeof err?.status === 'number' && err.status >= 400 && err.status < 500 && typeof err.type === 'string') {
      // body-parser: entity.too.large, entity.parse.failed, parameters.too.many, ...
      status = err.status;
      code = String(err.type).replace(/\W+/g, '_');
      message = status === 413 ? 'The request is too large.' : 'The request could not be read.';
      heading = 'Bad request';
    } else {
      log.error('unhandled_error', { path: req.path, name: err?.name, message: err?.message });
    }
    if (res.headersSent) return void res.end();
    if (req.path.startsWith('/mcp')) return void res.status(status).json({ jsonrpc: '2.0', id: null, error: { code: status >= 500 ? -32603 : -32600, message } });
    if (wantsJson(req)) return void res.status(status).json({ error: code, error_description: message });
    renderMessage(res, page, status, heading, message, extra);
  };
}
