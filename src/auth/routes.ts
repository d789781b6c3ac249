import { Router, type Request, type RequestHandler, type Response } from 'express';
import * as oidc from 'openid-client';
import { randomHandle, sha256Hex, type Sealer } from '../crypto/index.js';
import { M } from './messages.js';
import { BrokerError } from '../http/errors.js';
import { renderMessage, type PageContext } from '../http/render.js';
import { safeReturnPath } from '../http/return-to.js';
import { allowFormAction } from '../http/security-headers.js';
import type { Logger } from '../log.js';
import type { LoginTransaction, Store } from '../store/index.js';
import type { OidcClient } from './oidc-client.js';
import { displayNameFrom, identityProblem, principalFromVerifiedClaims } from './principal.js';
import type { Sessions } from './sessions.js';
import { subjectOf, type SubjectClaim } from './token-claims.js';

const LOGIN_TTL_MS = 10 * 60 * 1000;

export interface AuthRouteDeps {
  publicUrl: URL;
  store: Store;
  sessions: Sessions;
  idp: OidcClient;
  page: PageContext;
  log: Logger;
  requireCsrf: (req: Request, res: Response) => void;
  /**
   * Seals what a sign-in under way keeps at rest: the return path (it may hold a connect link's
   * handle), the PKCE verifier and the nonce, so a copy of the database cannot finish a sign-in.
   */
  returnToSealer: Sealer;
  /** The sign-in budget, counted on every /auth route. */
  rateLimit: RequestHandler;
  /** The ID-token claim naming the principal's subject: the same one the MCP access tokens are read by. `sub` when unset. */
  subjectClaim?: SubjectClaim;
}

function returnToContext(sessionHash: string) {
  return { issuer: 'sign-in', subject: sessionHash, provider: 'return_to' };
}

function sealedFieldContext(sessionHash: string, field: 'code_verifier' | 'nonce') {
  return { issuer: 'sign-in', subject: sessionHash, provider: field };
}

/** Browser sign-in at the operator's IdP: authorization code + PKCE + nonce through openid-client. */
export function authRoutes(deps: AuthRouteDeps): Router {
  const { publicUrl, store, sessions, idp, page, log } = deps;
  const redirectUri = new URL('/auth/callback', publicUrl).href;
  const signedOutUri = new URL('/auth/signed-out', publicUrl).href;
  const router = Router({ caseSensitive: true, strict: true });
  router.use('/auth', deps.rateLimit);

  /** The IdP's discovered configuration, or a 503 page saying sign-in is unavailable. */
  function idpConfiguration(): Promise<oidc.Configuration> {
    return idp.configuration().catch((err: unknown) => {
      throw new BrokerError(503, 'idp_unavailable', M.idpUnavailable, {
        heading: 'Sign-in is unavailable',
        detail: err instanceof Error ? err.message : String(err),
      });
    });
  }

  async function startSignIn(res: Response, returnTo: string, forceLogin: boolean): Promise<void> {
    const config = await idpConfiguration();
    const session = await sessions.ensure(res);
    const state = randomHandle();
    const nonce = randomHandle();
    const codeVerifier = oidc.randomPKCECodeVerifier();
    await store.loginTransactions.put({
      state_hash: sha256Hex(state),
      session_hash: session.idHash,
      code_verifier: deps.returnToSealer.seal(codeVerifier, sealedFieldContext(session.idHash, 'code_verifier')).value,
      nonce: deps.returnToSealer.seal(nonce, sealedFieldContext(session.idHash, 'nonce')).value,
      return_to: deps.returnToSealer.seal(returnTo, returnToContext(session.idHash)).value,
      expires_at: Date.now() + LOGIN_TTL_MS,
    });
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: 'openid profile',
      state,
      nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
      ...(forceLogin ? { prompt: 'login' } : {}),
    });
    res.redirect(303, url.href);
  }

  // After a sign-out here, a page that needs a sign-in lands on "Signed out — sign in" rather than
  // signing the browser straight back in through an IdP session left running (its "Sign out?"
  // page abandoned); the person's own click (`again=1`) signs in, and the IdP is asked to ask again.
  router.get('/auth/login', async (req, res) => {
    const returnTo = safeReturnPath(req.query.returnTo, publicUrl);
    const signedOut = sessions.signedOut(req) && !res.locals.session?.principal;
    if (signedOut && req.query.again !== '1') {
      renderMessage(res, page, 200, 'Signed out', M.signedOutSignIn, {
        action: { href: signInAgainHref(returnTo), label: 'Sign in' },
      });
      return;
    }
    await startSignIn(res, returnTo, signedOut);
  });

  // "Sign in as a different user": drop our session and make the IdP ask again.
  router.post('/auth/switch', async (req, res) => {
    deps.requireCsrf(req, res);
    const returnTo = safeReturnPath(req.body?.returnTo, publicUrl);
    await sessions.signOut(res);
    await startSignIn(res, returnTo, true);
  });

  router.get('/auth/callback', async (req, res) => {
    const state = typeof req.query.state === 'string' ? req.query.state : undefined;
    const session = res.locals.session;
    // Only the browser session that started this sign-in can take it: from another browser the
    // callback URL consumes nothing, and the real user's callback still works.
    const tx = state && session ? await store.loginTransactions.take(sha256Hex(state), session.idHash) : undefined;
    // Rows written before these were sealed (or under another BROKER_SECRET) open to nothing: start again.
    const secrets = tx ? openSignInSecrets(deps.returnToSealer, tx) : undefined;
    if (!tx || !state || !secrets || tx.expires_at < Date.now()) {
      throw new BrokerError(400, 'invalid_sign_in', M.signInExpired, {
        heading: 'Sign-in could not be completed',
        action: { href: '/connections', label: 'Go to connected accounts' },
      });
    }
    let returnTo = '/connections';
    try {
      returnTo = safeReturnPath(
        deps.returnToSealer.open({ keyId: deps.returnToSealer.keyId, value: tx.return_to }, returnToContext(tx.session_hash)),
        publicUrl,
      );
    } catch {
      // Unreadable (e.g. BROKER_SECRET changed mid-sign-in): land on the accounts page.
    }
    if (typeof req.query.error === 'string') {
      const cancelled = req.query.error === 'access_denied';
      log.info('sign_in_refused', { error: req.query.error });
      throw new BrokerError(
        cancelled ? 400 : 502,
        cancelled ? 'sign_in_cancelled' : 'sign_in_failed',
        cancelled ? M.signInCancelled : M.signInRefused,
        {
          heading: cancelled ? 'Sign-in cancelled' : 'Sign-in failed',
          action: { href: `/auth/login?returnTo=${encodeURIComponent(returnTo)}`, label: 'Sign in again' },
        },
      );
    }
    const config = await idpConfiguration();
    let claims: oidc.IDToken | undefined;
    let idToken: string | undefined;
    try {
      const tokens = await oidc.authorizationCodeGrant(config, new URL(req.originalUrl, publicUrl), {
        expectedState: state,
        expectedNonce: secrets.nonce,
        pkceCodeVerifier: secrets.codeVerifier,
        idTokenExpected: true,
      });
      claims = tokens.claims();
      idToken = tokens.id_token;
    } catch (err) {
      throw new BrokerError(502, 'sign_in_failed', M.signInUnverified, {
        heading: 'Sign-in failed',
        detail: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
        action: { href: `/auth/login?returnTo=${encodeURIComponent(returnTo)}`, label: 'Sign in again' },
      });
    }
    if (!claims) throw new BrokerError(502, 'sign_in_failed', M.noIdentity);
    const subjectClaim = deps.subjectClaim ?? 'sub';
    const subject = subjectOf(claims, subjectClaim);
    // Without the claim the access tokens are read by, this person could never open their own links.
    if (subject === undefined) throw new BrokerError(502, 'sign_in_failed', M.noSubjectClaim(subjectClaim), { heading: 'Sign-in failed' });
    const problem = identityProblem(claims.iss, subject, subjectClaim);
    if (problem) throw new BrokerError(400, 'sign_in_failed', M.accountRefused(problem), { heading: 'Sign-in failed' });
    const name = displayNameFrom(claims);
    const principal = principalFromVerifiedClaims(claims.iss, subject, name);
    await sessions.signIn(res, principal, idToken);
    log.info('signed_in');
    res.redirect(303, returnTo);
  });

  // Signing out here alone would let the IdP's session sign the browser straight back in: end that
  // one too (RP-initiated logout) where the IdP offers it, and say so truthfully where it does not.
  router.post('/auth/logout', async (req, res) => {
    deps.requireCsrf(req, res);
    // The broker's session ends first, whatever the IdP's page then does.
    const { idToken } = await sessions.signOut(res);
    sessions.markSignedOut(res);
    const config = await idp.configuration().catch(() => undefined);
    const endSession = config?.serverMetadata().end_session_endpoint;
    if (config && endSession) {
      const url = oidc.buildEndSessionUrl(config, {
        post_logout_redirect_uri: signedOutUri,
        ...(idToken ? { id_token_hint: idToken } : {}),
      });
      allowFormAction(res, url.origin);
      log.info('signed_out', { identityProvider: 'end_session' });
      res.redirect(303, url.href);
      return;
    }
    log.info('signed_out', { identityProvider: config ? 'no_end_session' : 'unreachable' });
    renderMessage(res, page, 200, 'Signed out', M.signedOutHereOnly, {
      action: { href: signInAgainHref('/connections'), label: 'Sign in again' },
    });
  });

  // Where the IdP sends the browser back after its logout (the registered post_logout_redirect_uri).
  router.get('/auth/signed-out', (_req, res) => {
    renderMessage(res, page, 200, 'Signed out', M.signedOutEverywhere, {
      action: { href: signInAgainHref('/connections'), label: 'Sign in again' },
    });
  });

  return router;
}

/** The sign-in a person asks for after signing out: past the "Signed out" page, back to `returnTo`. */
function signInAgainHref(returnTo: string): string {
  return `/auth/login?again=1&returnTo=${encodeURIComponent(returnTo)}`;
}

function openSignInSecrets(sealer: Sealer, tx: LoginTransaction): { codeVerifier: string; nonce: string } | undefined {
  try {
    return {
      codeVerifier: sealer.open({ keyId: sealer.keyId, value: tx.code_verifier }, sealedFieldContext(tx.session_hash, 'code_verifier')),
      nonce: sealer.open({ keyId: sealer.keyId, value: tx.nonce }, sealedFieldContext(tx.session_hash, 'nonce')),
    };
  } catch {
    return undefined;
  }
}
