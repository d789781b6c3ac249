import type { Response } from 'express';

/** The browser session `res.locals.session` carries (set by the sessions middleware in src/auth/). */
type PageSession = NonNullable<Response['locals']['session']>;

export interface PageContext {
  productName: string;
  logoUrl?: string;
  sessions: { csrfToken(session: PageSession): string };
}

/** Renders a view with the locals every page needs: product name, the signed-in viewer, a CSRF token. */
export function renderPage(
  res: Response,
  page: PageContext,
  view: string,
  locals: Record<string, unknown> & { title: string },
  status = 200,
): void {
  const session = res.locals.session;
  res.status(status).render(view, {
    productName: page.productName,
    logoUrl: page.logoUrl,
    ...(session?.principal
      ? { viewer: { name: session.principal.name, subject: session.principal.subject, issuer: session.principal.issuer } }
      : {}),
    ...(session ? { csrfToken: page.sessions.csrfToken(session) } : {}),
    ...locals,
  });
}

export function renderMessage(
  res: Response,
  page: PageContext,
  status: number,
  heading: string,
  message: string,
  extra: { detail?: string; action?: { href: string; label: string } } = {},
): void {
  renderPage(res, page, 'message', { title: heading, heading, message, ...extra }, status);
}
