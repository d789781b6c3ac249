import { rateLimit, type RateLimitRequestHandler } from 'express-rate-limit';
import { renderMessage, type PageContext } from './render.js';

/**
 * Per-client-IP limits on the browser routes that start or finish a sign-in or a connection, so a
 * script cannot churn through links, states or the IdP. Counted per process; `0` disables.
 */
export function pageRateLimit(limitPerMinute: number, page: PageContext): RateLimitRequestHandler {
  return rateLimit({
    windowMs: 60_000,
    limit: limitPerMinute,
    skip: () => limitPerMinute === 0,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    handler: (_req, res, _next, options) => {
      res.setHeader('Retry-After', String(Math.ceil(options.windowMs / 1000)));
      renderMessage(res, page, 429, 'Too many requests', 'Too many attempts from your network in a short time. Wait a minute, then try again.');
    },
  });
}
