import { Router, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { samePrincipal } from '../auth/principal.js';
import type { ConnectLinks } from '../connections/links.js';
import { attemptLimit, clientAddress, type CounterStore } from '../http/rate-limits.js';
import { renderPage, type PageContext } from '../http/render.js';
import type { Logger } from '../log.js';
import type { OpenLink } from './routes.js';

/** Tries at `POST /activate` per signed-in principal, and per client address, in {@link ACTIVATE_WINDOW_MS}. */
export const ACTIVATE_TRIES = 10;
export const ACTIVATE_WINDOW_MS = 10 * 60_000;

/** The one answer to a code that is unknown, expired, already used or not a code at all: which of them is not said. */
export const INVALID_CODE = 'That code is not valid or has expired.';

export interface ActivateRouteDeps {
  links: ConnectLinks;
  /** Where the tries are counted (the broker's store: shared by every instance). */
  store: CounterStore;
  /** Keys the counters' hashes (the rate-limit key). */
  limitKey: Buffer;
  page: PageContext;
  log: Logger;
  requireCsrf: (req: Request, res: Response) => void;
  /** The connect pages' own consent step (src/connect/routes.ts): a code opens exactly what its link opens. */
  openLink: OpenLink;
  /** The per-address limit of the connect pages, for showing the form. */
  pageLimit: RequestHandler;
}

const SIGN_IN = `/auth/login?returnTo=${encodeURIComponent('/activate')}`;

/**
 * `/activate`: the short form of a connect link, for a person on another device. They sign in, type
 * the link's 8-symbol code, and get the link's consent page — only for a code of their own, once,
 * while the link is open. Every try counts against the principal and the client address.
 */
export function activateRoutes(deps: ActivateRouteDeps): Router {
  const { links, page, log } = deps;
  const router = Router({ caseSensitive: true, strict: true });
  const principalKey = (res: Response) => {
    const p = res.locals.session?.principal;
    return p ? JSON.stringify([p.issuer, p.subject]) : undefined;
  };
  const tries = [
    attemptLimit('activate-principal', ACTIVATE_TRIES, ACTIVATE_WINDOW_MS, deps.store, deps.limitKey, principalKey),
    attemptLimit('activate-address', ACTIVATE_TRIES, ACTIVATE_WINDOW_MS, deps.store, deps.limitKey, (_res, req) => clientAddress(req)),
  ];
  // Before the counters: a form from another site (no valid CSRF token) spends nobody's tries.
  const csrfFirst = (req: Request, res: Response, next: NextFunction) => {
    deps.requireCsrf(req, res);
    next();
  };

  const form = (res: Response, status = 200, error?: string) =>
    renderPage(res, page, 'activate', { title: 'Enter your code', ...(error ? { error } : {}) }, status);

  router.get('/activate', deps.pageLimit, (_req, res) => {
    if (!res.locals.session?.principal) return res.redirect(303, SIGN_IN);
    form(res);
  });

  router.post('/activate', csrfFirst, ...tries, async (req, res) => {
    const viewer = res.locals.session?.principal;
    if (!viewer) return res.redirect(303, SIGN_IN);
    const typed: unknown = req.body?.code;
    const pending = typeof typed === 'string' && typed.length <= 64 ? await links.byActivationCode(typed) : undefined;
    // Another principal's code: the link's own wrong-account page, and the code stays unused for its owner.
    if (pending && !samePrincipal(viewer, pending)) return deps.openLink(res, pending.provider, links.handle(pending), '/activate');
    if (!pending || !(await links.redeemActivationCode(pending))) {
      log.info('activation_code_refused', {});
      return form(res, 400, INVALID_CODE);
    }
    log.info('activation_code_used', { provider: pending.provider, pending: pending.id });
    await deps.openLink(res, pending.provider, links.handle(pending), '/activate');
  });

  return router;
}
