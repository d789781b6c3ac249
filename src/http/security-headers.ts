import { randomHandle } from '../crypto/index.js';
import helmet from 'helmet';
import type { RequestHandler, Response } from 'express';

/**
 * Strict headers for every response: no script at all, styles and images from us only, forms may
 * post to us and to the origins our redirects after a form go to (the IdP and the providers), and
 * nobody may frame a page.
 */
export function securityHeaders({
  formActionOrigins,
  imageOrigins,
}: {
  formActionOrigins: () => string[];
  imageOrigins: string[];
}): RequestHandler {
  return helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'none'"],
        scriptSrc: ["'none'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'", ...new Set(imageOrigins)],
        // Evaluated per response: an OIDC provider's authorization endpoint is known after discovery.
        formAction: ["'self'", () => [...new Set(formActionOrigins())].join(' ')],
        frameAncestors: ["'none'"],
        baseUri: ["'none'"],
      },
    },
    crossOriginEmbedderPolicy: false,
    // same-origin, not no-referrer: under no-referrer browsers send `Origin: null` on our own form
    // posts; links (with their ?req= handle) still never leak to the IdP or the provider.
    referrerPolicy: { policy: 'same-origin' },
    strictTransportSecurity: { maxAge: 31_536_000, includeSubDomains: false },
    xFrameOptions: { action: 'deny' },
  });
}

/** Pages carry personal data and one-time links: never cache them. */
export const noStore: RequestHandler = (_req, res, next) => {
  res.setHeader('Cache-Control', 'no-store');
  next();
};

/** Adds `origin` to this response's CSP `form-action` if it is not there yet (learnt after the headers were set). */
export function allowFormAction(res: Response, origin: string): void {
  const csp = res.getHeader('Content-Security-Policy');
  if (typeof csp !== 'string') return;
  const directive = /form-action ([^;]*)/.exec(csp);
  if (!directive || directive[1]!.split(' ').includes(origin)) return;
  res.setHeader('Content-Security-Policy', csp.replace(directive[0], `${directive[0]} ${origin}`));
}

/**
 * Lets this response's page run the scripts that carry the nonce returned (a static file of ours,
 * never an inline one): `script-src 'none'` becomes `script-src 'nonce-…'` for this response only.
 */
export function allowScriptNonce(res: Response): string {
  const nonce = randomHandle(16);
  const csp = res.getHeader('Content-Security-Policy');
  if (typeof csp === 'string') res.setHeader('Content-Security-Policy', csp.replace(/script-src [^;]*/, `script-src 'nonce-${nonce}'`));
  return nonce;
}
