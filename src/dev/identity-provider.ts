/// <reference path="../types/oidc-provider.d.ts" />
// A real OpenID Provider (oidc-provider 9) standing in for "the operator's identity provider".
// Tests run it on loopback; `npm run dev` will embed it as the development IdP.
//
// It is deliberately permissive about *who* signs in (any user name is accepted and becomes the
// account id / `sub`) but strict about the protocol: PKCE (S256) for every client, exact
// redirect URIs, and access tokens for the MCP resource are RS256 JWTs whose `aud` is that
// resource (RFC 8707 resource indicators + RFC 9068 JWT access token profile).
import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SignJWT, calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK } from 'jose';
import Provider, { errors } from 'oidc-provider';
import type { Configuration, Interaction, ResourceServerInfo } from 'oidc-provider';
import type { Logger } from '../log.js';

export interface IdpClient {
  client_id: string;
  client_secret?: string;
  redirect_uris: string[];
  token_endpoint_auth_method?: string;
  grant_types?: string[];
  response_types?: string[];
}

export interface IdentityProviderOptions {
  /** Full issuer URL, e.g. http://127.0.0.1:PORT or http://127.0.0.1:PORT/idp (no trailing slash needed). */
  issuer: string;
  /** Statically registered clients (dynamic registration is also enabled). */
  clients: IdpClient[];
  /** The MCP resource URL; access tokens for it are JWTs with aud = resource. */
  resource: string;
  /** Keys for signing oidc-provider's cookies; random when omitted. */
  cookieKeys?: string[];
  /** A private RS256 JWK to sign with (persist it to keep tokens valid across restarts); generated when omitted. */
  signingJwk?: Record<string, unknown>;
  /** An oidc-provider storage adapter class; the in-memory one when omitted. */
  adapter?: unknown;
  /** Where the provider's own failures are reported; silent when omitted. */
  log?: Logger;
}

export interface MintAccessTokenClaims {
  sub: string;
  aud?: string | string[];
  expiresInSeconds?: number;
  iss?: string;
  clientId?: string;
  scope?: string;
  /** JOSE `typ` header, `at+jwt` when omitted. */
  typ?: string;
  /** `iat` in seconds since the epoch, now when omitted. */
  issuedAt?: number;
  nonce?: string;
}

export interface IdentityProvider {
  provider: Provider;
  /**
   * A node request listener. It expects to see full request paths (mount it at the server root,
   * or with Express `app.use(idp.callback())` without a mount path): for an issuer with a path
   * such as /idp it serves everything under /idp plus the path-inserted discovery documents
   * /.well-known/oauth-authorization-server/idp and /.well-known/openid-configuration/idp.
   */
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  /**
   * Mint an access token exactly like the provider's own JWT access tokens (RS256 with the
   * provider's signing key, typ at+jwt) without running a flow. Defaults: iss = issuer,
   * aud = resource, client_id = first configured client (or 'dev-minted'), scope 'mcp',
   * lifetime 300 s (a negative value yields an already-expired token).
   */
  mintAccessToken(claims: MintAccessTokenClaims): Promise<string>;
}

const RESOURCE_SCOPE = 'mcp';
const SCOPES = ['openid', 'profile', 'email', 'offline_access', RESOURCE_SCOPE];
const MAX_LOGIN_LENGTH = 200;
const MAX_BODY_BYTES = 16 * 1024;
const CIMD_ACK = 'draft-02';

function sameUrl(a: string, b: string): boolean {
  if (a === b) return true;
  const ua = URL.parse(a);
  const ub = URL.parse(b);
  return !!ua && !!ub && ua.href === ub.href;
}

export async function createIdentityProvider(options: IdentityProviderOptions): Promise<IdentityProvider> {
  const issuer = options.issuer.replace(/\/+$/, '');
  const issuerUrl = new URL(issuer);
  const basePath = issuerUrl.pathname.replace(/\/+$/, ''); // '' or e.g. '/idp'
  const { resource } = options;

  const privateJwk = options.signingJwk
    ? { ...options.signingJwk }
    : await exportJWK((await generateKeyPair('RS256', { extractable: true })).privateKey);
  const privateKey = await importJWK(privateJwk, 'RS256');
  const kid = await calculateJwkThumbprint(privateJwk);
  Object.assign(privateJwk, { kid, use: 'sig', alg: 'RS256' });

  const resourceServer: ResourceServerInfo = {
    scope: RESOURCE_SCOPE,
    audience: resource,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'RS256' } },
  };

  const configuration = (cimdAck: string | undefined): Configuration => ({
    clients: options.clients.map((client) => ({ ...client })),
    ...(options.adapter ? { adapter: options.adapter } : {}),
    jwks: { keys: [privateJwk] },
    cookies: { keys: options.cookieKeys?.length ? options.cookieKeys : [randomBytes(32).toString('base64url')] },
    scopes: SCOPES,
    claims: {
      openid: ['sub'],
      profile: ['name', 'preferred_username'],
      email: ['email'],
    },
    conformIdTokenClaims: false,
    clientBasedCORS: () => true,
    // Development IdP: the user name typed at sign-in is the account id.
    findAccount: (_ctx, id) => ({
      accountId: id,
      claims: () => ({ sub: id, name: id, preferred_username: id, email: `${id}@example.test` }),
    }),
    interactions: {
      url: (_ctx, interaction) => `${basePath}/interaction/${interaction.uid}`,
    },
    pkce: { required: () => true },
    ttl: {
      AccessToken: 3600,
      AuthorizationCode: 60,
      IdToken: 3600,
      Interaction: 600,
      Session: 86400,
      Grant: 86400,
      RefreshToken: 86400,
    },
    features: {
      devInteractions: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: (_ctx, _client, oneOf) => {
          if (oneOf) return oneOf.find((r) => sameUrl(r, resource)) ?? oneOf;
          return resource;
        },
        getResourceServerInfo: (_ctx, indicator) => {
          if (sameUrl(indicator, resource)) return resourceServer;
          throw new errors.InvalidTarget();
        },
        useGrantedResource: () => true,
      },
      registration: { enabled: true },
      clientIdMetadataDocument: { enabled: true, ack: cimdAck },
      revocation: { enabled: true },
      introspection: { enabled: true },
    },
  });

  let provider: Provider;
  try {
    provider = new Provider(issuer, configuration(CIMD_ACK));
  } catch (err) {
    // A newer oidc-provider may implement a later CIMD draft; run it unacknowledged (it then only
    // logs a notice) rather than refusing to start.
    if (!(err instanceof TypeError && /unacknowledged version of an experimental feature/.test(err.message))) throw err;
    provider = new Provider(issuer, configuration(undefined));
  }

  provider.on('server_error', (_ctx, err) => {
    options.log?.error('dev_idp_server_error', { message: err instanceof Error ? err.message : String(err) });
  });

  const providerListener = provider.callback();
  const defaultClientId = options.clients[0]?.client_id ?? 'dev-minted';

  const forwardToProvider = (req: IncomingMessage & { originalUrl?: string }, res: ServerResponse,
    fullPath: string, innerPath: string): void => {
    // oidc-provider derives its mount path from originalUrl minus url.
    req.originalUrl = fullPath;
    req.url = innerPath;
    void providerListener(req, res);
  };

  const listener = (req: IncomingMessage & { originalUrl?: string }, res: ServerResponse): void => {
    const full = req.originalUrl ?? req.url ?? '/';
    const parsed = new URL(full, 'http://idp.invalid');
    const { pathname, search } = parsed;

    if (basePath) {
      for (const wellKnown of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
        if (pathname === `${wellKnown}${basePath}`) {
          forwardToProvider(req, res, `${basePath}${wellKnown}${search}`, `${wellKnown}${search}`);
          return;
        }
      }
      if (pathname !== basePath && !pathname.startsWith(`${basePath}/`)) {
        sendText(res, 404, 'Not found');
        return;
      }
    }

    const inner = pathname.slice(basePath.length) || '/';
    const match = /^\/interaction\/([A-Za-z0-9_-]+)(\/login|\/abort)?$/.exec(inner);
    if (match) {
      const [, uid = '', action = ''] = match;
      handleInteraction(req, res, uid, action).catch((err: unknown) => interactionError(res, err, options.log));
      return;
    }
    forwardToProvider(req, res, full, `${inner}${search}`);
  };

  async function handleInteraction(req: IncomingMessage, res: ServerResponse, uid: string, action: string): Promise<void> {
    const method = req.method ?? 'GET';
    const expected = action === '/login' ? 'POST' : 'GET';
    if (method !== expected) {
      res.setHeader('Allow', expected);
      sendText(res, 405, 'Method not allowed');
      return;
    }

    const details = await provider.interactionDetails(req, res);
    if (details.uid !== uid) {
      sendHtml(res, 400, errorPage('This sign-in link does not match the current sign-in attempt. Return to the application and start again.'));
      return;
    }

    if (action === '/abort') {
      await provider.interactionFinished(req, res, {
        error: 'access_denied',
        error_description: 'End-User aborted interaction',
      }, { mergeWithLastSubmission: false });
      return;
    }

    if (action === '/login') {
      if (details.prompt.name !== 'login') {
        sendHtml(res, 400, errorPage('This sign-in attempt is not waiting for a user name.'));
        return;
      }
      const body = await readUrlEncoded(req);
      const login = (body.get('login') ?? '').trim();
      if (!login || login.length > MAX_LOGIN_LENGTH) {
        const message = login ? `The user name must be at most ${MAX_LOGIN_LENGTH} characters.` : 'Enter a user name.';
        sendHtml(res, 400, loginPage(details, basePath, login, message));
        return;
      }
      await provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
      return;
    }

    switch (details.prompt.name) {
      case 'login':
        sendHtml(res, 200, loginPage(details, basePath, typeof details.params.login_hint === 'string' ? details.params.login_hint : '', undefined));
        return;
      case 'consent':
        await autoConsent(details, req, res);
        return;
      default:
        sendHtml(res, 400, errorPage(`Unsupported interaction prompt "${details.prompt.name}".`));
    }
  }

  async function autoConsent(details: Interaction, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const accountId = details.session?.accountId;
    const clientId = details.params.client_id;
    if (!accountId || typeof clientId !== 'string') {
      sendHtml(res, 400, errorPage('This sign-in attempt has no signed-in user. Return to the application and start again.'));
      return;
    }
    const existing = details.grantId ? await provider.Grant.find(details.grantId) : undefined;
    const grant = existing ?? new provider.Grant({ accountId, clientId });
    const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = details.prompt.details;
    if (missingOIDCScope?.length) grant.addOIDCScope(missingOIDCScope.join(' '));
    if (missingOIDCClaims?.length) grant.addOIDCClaims(missingOIDCClaims);
    if (missingResourceScopes) {
      for (const [indicator, scopes] of Object.entries(missingResourceScopes)) {
        grant.addResourceScope(indicator, scopes.join(' '));
      }
    }
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }

  async function mintAccessToken(claims: MintAccessTokenClaims): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ client_id: claims.clientId ?? defaultClientId, scope: claims.scope ?? RESOURCE_SCOPE, ...(claims.nonce !== undefined ? { nonce: claims.nonce } : {}) })
      .setProtectedHeader({ alg: 'RS256', kid, typ: claims.typ ?? 'at+jwt' })
      .setIssuer(claims.iss ?? issuer)
      .setSubject(claims.sub)
      .setAudience(claims.aud ?? resource)
      .setIssuedAt(claims.issuedAt ?? now)
      .setExpirationTime(now + (claims.expiresInSeconds ?? 300))
      .setJti(randomUUID())
      .sign(privateKey);
  }

  return {
    provider,
    callback: () => listener,
    mintAccessToken,
  };
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers and pages (no inline script or style, everything escaped).

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}

function setSecurityHeaders(res: ServerResponse): void {
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  // No form-action: the login POST is answered with redirects that end at the client's redirect URI.
  res.setHeader('Content-Security-Policy', "default-src 'none'; base-uri 'none'; frame-ancestors 'none'");
}

function sendHtml(res: ServerResponse, status: number, html: string): void {
  if (res.headersSent) return;
  setSecurityHeaders(res);
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/html; charset=utf-8');
  res.end(html);
}

function sendText(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent) return;
  setSecurityHeaders(res);
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  res.end(text);
}

function layout(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}

function loginPage(details: Interaction, basePath: string, value: string, error: string | undefined): string {
  const uid = encodeURIComponent(details.uid);
  const clientId = typeof details.params.client_id === 'string' ? details.params.client_id : '';
  return layout('Development sign-in', `<h1>Development sign-in</h1>
<p role="note"><strong>Development sign-in — any user name is accepted; do not use in production.</strong></p>
${clientId ? `<p>Signing in to <code>${escapeHtml(clientId)}</code>.</p>\n` : ''}${error ? `<p role="alert">${escapeHtml(error)}</p>\n` : ''}<form method="post" action="${escapeHtml(`${basePath}/interaction/${uid}/login`)}">
<label for="login">User name</label>
<input id="login" name="login" type="text" autocomplete="username" autofocus required maxlength="${MAX_LOGIN_LENGTH}" value="${escapeHtml(value)}">
<button type="submit">Sign in</button>
</form>
<p><a href="${escapeHtml(`${basePath}/interaction/${uid}/abort`)}">Cancel</a></p>`);
}

function errorPage(message: string): string {
  return layout('Sign-in problem', `<h1>Sign-in problem</h1>
<p role="alert">${escapeHtml(message)}</p>`);
}

function interactionError(res: ServerResponse, err: unknown, log: Logger | undefined): void {
  if (err instanceof errors.OIDCProviderError && err.expose) {
    // Typically SessionNotFound: the interaction cookie is missing or the interaction expired.
    sendHtml(res, err.statusCode, errorPage('This sign-in attempt has expired or is no longer valid. Return to the application and start again.'));
    return;
  }
  if (err instanceof BodyTooLarge) {
    sendText(res, 413, 'Request body too large');
    return;
  }
  log?.error('dev_idp_interaction_error', { message: err instanceof Error ? err.message : String(err) });
  sendHtml(res, 500, errorPage('Something went wrong while signing in.'));
}

class BodyTooLarge extends Error {}

async function readUrlEncoded(req: IncomingMessage): Promise<URLSearchParams> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
    size += buf.length;
    if (size > MAX_BODY_BYTES) throw new BodyTooLarge();
    chunks.push(buf);
  }
  if (type !== 'application/x-www-form-urlencoded') return new URLSearchParams();
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}
