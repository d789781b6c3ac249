import type { RequestHandler } from 'express';
import { parentFrom, runInSpan, SpanKind, SpanStatusCode, tracingEnabled } from './tracing.js';

/**
 * A SERVER span per HTTP request outside `/mcp` (which has its own, see mcp-tracing.ts), so the store
 * and provider spans of the pages, the callbacks and the token exchange have a parent. Named
 * `http <METHOD> <route>` with the route's template (`/connect/:provider/callback`), never the path
 * or the query: callbacks carry `code` and `state`, connect links their handle. Continues an incoming
 * `traceparent` (a proxy's). Passes straight through when tracing is off.
 */
export function traceHttpRequests(): RequestHandler {
  return (req, res, next) => {
    if (!tracingEnabled() || req.path === '/mcp') return next();
    const method = req.method;
    runInSpan(
      `http ${method}`,
      { 'http.request.method': method },
      parentFrom(undefined, req.headers as Record<string, string | string[] | undefined>),
      SpanKind.SERVER,
      (span) => {
        res.once('close', () => {
          const route = (req.route as { path?: unknown } | undefined)?.path;
          if (typeof route === 'string') {
            const template = `${req.baseUrl}${route}`;
            span?.updateName(`http ${method} ${template}`);
            span?.setAttribute('http.route', template);
          }
          span?.setAttribute('http.response.status_code', res.statusCode);
          if (res.statusCode >= 500) span?.setStatus({ code: SpanStatusCode.ERROR });
          span?.end();
        });
        next();
      },
    );
  };
}
