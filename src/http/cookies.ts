import type { Request, Response } from 'express';

export interface CookieSettings {
  /** https deployments get `__Host-` names and `Secure`; plain loopback http cannot. */
  secure: boolean;
}

export function cookieName(base: string, settings: CookieSettings): string {
  return settings.secure ? `__Host-${base}` : base;
}

/** Reads one cookie; a name sent twice is treated as absent rather than guessing which one wins. */
export function readCookie(req: Request, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  let found: string | undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    if (found !== undefined) return undefined;
    found = part.slice(eq + 1).trim();
  }
  return found && /^[A-Za-z0-9_-]{1,200}$/.test(found) ? found : undefined;
}

export function setCookie(res: Response, name: string, value: string, settings: CookieSettings, maxAgeMs: number): void {
  res.cookie(name, value, { httpOnly: true, sameSite: 'lax', secure: settings.secure, path: '/', maxAge: maxAgeMs });
}

export function clearCookie(res: Response, name: string, settings: CookieSettings): void {
  res.clearCookie(name, { httpOnly: true, sameSite: 'lax', secure: settings.secure, path: '/' });
}
