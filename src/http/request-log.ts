import type { Request, RequestHandler, Response } from 'express';
import { randomId } from '../crypto/index.js';
import { ACCESS_EVENT, runWithLogContext, type Logger } from '../log.js';

/** An incoming `X-Request-Id` is kept only when it is a short token of safe characters. */
const SANE_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const MAX_LOGGED_PATH = 256;

/**
 * The route label of a request: the Express route pattern it matched, never the raw path. The
 * pattern alone: our routers are mounted at the root, and `req.baseUrl` when the response finishes
 * is that of whichever layer answered (an error handler mounted at a path), not the route's.
 */
export function routeOf(req: Request, status: number): string {
  const route = (req as { route?: { path?: unknown } }).route;
  if (route && typeof route.path === 'string') return route.path;
  // Mounted middleware without a route (static files): its mount path, a literal of ours.
  if (req.baseUrl) return req.baseUrl;
  return status === 404 ? 'unmatched' : 'other';
}

export interface RequestLogOptions {
  /** Called once per request when its response is finished (or its connection closed first). */
  onDone?: (route: string, status: number, seconds: number) => void;
  /**
   * Requests served outside the log context, which then pass `requestIdOf(res)` along themselves.
   * The context is an AsyncLocalStorage, whose promise hooks cost an MCP request ~13 % of its CPU
   * (bench: list_connections at c=16; see bench/README.md on call-scope.ts, now src/mcp/call.ts): /mcp goes without.
   */
  outsideContext?: (req: Request) => boolean;
}

/** The request id `requestLog` gave this response. */
export function requestIdOf(res: Response): string | undefined {
  const id = res.locals.reqId;
  return typeof id === 'string' ? id : undefined;
}

/**
 * The first middleware: a request id (the caller's `X-Request-Id` when sane, else a fresh one) in
 * the `X-Request-Id` response header and on every line logged while the request is served, and one
 * access line at `info` when it ends. The logged path never carries the query string (callbacks
 * carry `code` and `state`, connect links their handle).
 */
export function requestLog(log: Logger, options: RequestLogOptions = {}): RequestHandler {
  return (req, res, next) => {
    const incoming = req.headers['x-request-id'];
    const reqId = typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomId();
    res.setHeader('X-Request-Id', reqId);
    res.locals.reqId = reqId;
    const started = performance.now();
    const finish = () => {
      const seconds = (performance.now() - started) / 1000;
      const status = res.statusCode;
      const route = routeOf(req, status);
      options.onDone?.(route, status, seconds);
      log.info(ACCESS_EVENT, {
        reqId,
        method: req.method,
        path: pathOf(req),
        route,
        status,
        durationMs: Math.round(seconds * 10_000) / 10,
        ...(res.writableFinished ? {} : { aborted: true }),
      });
    };
    // 'close' follows 'finish' on every response, and comes alone when the client went away first.
    res.once('close', finish);
    if (options.outsideContext?.(req)) next();
    else runWithLogContext({ reqId }, next);
  };
}

function pathOf(req: Request): string {
  const url = req.originalUrl;
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  return path.length > MAX_LOGGED_PATH ? `${path.slice(0, MAX_LOGGED_PATH)}…` : path;
}
