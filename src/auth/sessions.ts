import type { NextFunction, Request, Response } from 'express';
import { decodeJwt } from 'jose';
import { deriveKey, mac, randomHandle, Sealer, sha256Hex, verifyMac } from '../crypto/index.js';
import { clearCookie, cookieName, readCookie, setCookie, type CookieSettings } from '../http/cookies.js';
import type { Store } from '../store/index.js';
import { principalFromVerifiedClaims, type Principal } from './principal.js';

const SESSION_TTL_MS = 12 * 60 * 60 * 1000;
/** How long "you signed out here" is remembered: the next visit within it asks before signing in. */
const SIGNED_OUT_TTL_MS = 30 * 24 * 60 * 60 * 1000;

function idTokenContext(sessionHash: string) {
  return { issuer: 'sign-in', subject: sessionHash, provider: 'id_token' };
}

/** What a page handler knows about the browser in front of it. */
export interface BrowserSession {
  /** SHA-256 of the cookie value: the only form in which the id is stored or compared. */
  idHash: string;
  principal?: Principal;
}

declare module 'express-serve-static-core' {
  interface Locals {
    session?: BrowserSession;
  }
}

/**
 * Server-side sessions in the store. The cookie is a random 256-bit id (HttpOnly, SameSite=Lax,
 * `__Host-`/Secure on https); its id is replaced at sign-in so a planted cookie never gains a user.
 */
export class Sessions {
  readonly cookie: string;
  /** Set at sign-out, cleared at sign-in: holds no secret, only "this browser signed out". */
  readonly signedOutCookie: string;
  readonly #csrfKey: Buffer;
  readonly #idTokenSealer: Sealer;

  constructor(
    private readonly store: Store,
    private readonly settings: CookieSettings,
    brokerSecret: Buffer,
  ) {
    this.cookie = cookieName('broker_session', settings);
    this.signedOutCookie = cookieName('broker_signed_out', settings);
    this.#csrfKey = deriveKey(brokerSecret, 'csrf');
    this.#idTokenSealer = new Sealer([deriveKey(brokerSecret, 'session-id-token')]);
  }

  /** Middleware: attaches the current session (if any) to `res.locals.session`. */
  load = async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const id = readCookie(req, this.cookie);
    if (id) {
      const idHash = sha256Hex(id);
      const row = await this.store.sessions.find(idHash);
      if (row) {
        res.locals.session = {
          idHash,
          ...(row.issuer && row.subject
            ? { principal: principalFromVerifiedClaims(row.issuer, row.subject, row.display_name ?? undefined) }
            : {}),
        };
      }
    }
    next();
  };

  /** Returns the current session, creating an anonymous one (for a sign-in to attach to). */
  async ensure(res: Response): Promise<BrowserSession> {
    if (res.locals.session) return res.locals.session;
    const id = randomHandle();
    const session = { idHash: sha256Hex(id) };
    await this.store.sessions.create(session.idHash, Date.now() + SESSION_TTL_MS);
    setCookie(res, this.cookie, id, this.settings, SESSION_TTL_MS);
    res.locals.session = session;
    return session;
  }

  /**
   * Starts a signed-in session under a brand-new id, discarding the old one. The ID token is kept
   * sealed to that id, only to be the `id_token_hint` of the IdP's logout at sign-out.
   */
  async signIn(res: Response, principal: Principal, idToken?: string): Promise<void> {
    const id = randomHandle();
    const idHash = sha256Hex(id);
    const sealed = idToken ? this.#idTokenSealer.seal(idToken, idTokenContext(idHash)).value : undefined;
    await this.store.sessions.rotateSignedIn({
      oldHash: res.locals.session?.idHash,
      newHash: idHash,
      principal,
      expiresAt: Date.now() + SESSION_TTL_MS,
      sealedIdToken: sealed,
    });
    setCookie(res, this.cookie, id, this.settings, SESSION_TTL_MS);
    clearCookie(res, this.signedOutCookie, this.settings);
    res.locals.session = { idHash, principal };
  }

  /**
   * Remembers that this browser signed out, whatever the IdP's own sign-out page then does: the
   * next page that needs a sign-in shows "Signed out — sign in" instead of signing in silently
   * through an IdP session the person may have left running.
   */
  markSignedOut(res: Response): void {
    setCookie(res, this.signedOutCookie, '1', this.settings, SIGNED_OUT_TTL_MS);
  }

  /** Whether this browser signed out here (and has not signed in since). */
  signedOut(req: Request): boolean {
    return readCookie(req, this.signedOutCookie) === '1';
  }

  /** Ends the session here; returns the sign-in's ID token (if one was kept and still opens) for the IdP's logout. */
  async signOut(res: Response): Promise<{ idToken?: string }> {
    const session = res.locals.session;
    let idToken: string | undefined;
    if (session) {
      const sealed = (await this.store.sessions.find(session.idHash))?.id_token;
      try {
        if (sealed) idToken = this.#idTokenSealer.open({ keyId: this.#idTokenSealer.keyId, value: sealed }, idTokenContext(session.idHash));
      } catch {
        // Unreadable (BROKER_SECRET changed): log out without the hint.
      }
      await this.store.sessions.delete(session.idHash);
    }
    clearCookie(res, this.cookie, this.settings);
    delete res.locals.session;
    return idToken ? { idToken } : {};
  }

  /**
   * The claims of the ID token this session signed in with (verified by the sign-in: signature,
   * issuer, audience, nonce; kept sealed to this session since), for decisions about the signed-in
   * person such as who may approve a call (src/approvals/). Empty when the session kept none, it no
   * longer opens, or its issuer is not the session's.
   */
  async verifiedClaims(session: BrowserSession): Promise<Record<string, unknown>> {
    if (!session.principal) return {};
    const sealed = (await this.store.sessions.find(session.idHash))?.id_token;
    if (!sealed) return {};
    try {
      const idToken = this.#idTokenSealer.open({ keyId: this.#idTokenSealer.keyId, value: sealed }, idTokenContext(session.idHash));
      const claims = decodeJwt(idToken) as Record<string, unknown>;
      return claims.iss === session.principal.issuer ? claims : {};
    } catch {
      return {};
    }
  }

  /** A CSRF token bound to this session (HMAC of its id hash under a CSRF-only key). */
  csrfToken(session: BrowserSession): string {
    return mac(this.#csrfKey, session.idHash);
  }

  verifyCsrf(session: BrowserSession | undefined, token: unknown): boolean {
    return !!session && typeof token === 'string' && token.length > 0 && verifyMac(this.#csrfKey, token, session.idHash);
  }
}
