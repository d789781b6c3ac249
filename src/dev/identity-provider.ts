// A real OpenID Provider (oidc-provider 9) standing in for "the operator's identity provider".
// Tests run it on loopback; `npm run dev` will embed it as the development IdP.
//
// It is deliberately permissive about *who* signs in (any user name is accepted and becomes the
// account id / `sub`) but strict about the protocol: PKCE (S256) for every client, exact
// redirect URIs, and access tokens for the MCP resource are RS256 JWTs whose `aud` is that
// resource (RFC 8707 resource indicators + RFC 9068 JWT access token profile).
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ejs from 'ejs';
import { SignJWT, calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK } from 'jose';
import type { AdapterConstructor, Client, ClientAuthMethod, Configuration, Interaction, ResourceServer, ResponseType } from 'oidc-provider';
import { isLoopbackHostname } from '../net/loopback.js';
import type { Logger } from '../log.js';
import { randomHandle, randomId, sha256Hex } from '../crypto/index.js';
import { errors, inMemoryAdapter, Provider } from './oidc-provider.js';

export interface IdpClient {
  client_id: string;
  client_secret?: string;
  redirect_uris: string[];
  token_endpoint_auth_method?: ClientAuthMethod;
  grant_types?: string[];
  response_types?: ResponseType[];
  /** Where RP-initiated logout may send the browser back to. */
  post_logout_redirect_uris?: string[];
  /** Shown on the sign-in page. */
  client_name?: string;
  /** `pairwise`: this client's ID tokens carry a `sub` of its own (needs `pairwiseSubjects`). */
  subject_type?: 'public' | 'pairwise';
}

export interface IdentityProviderOptions {
  /** Full issuer URL, e.g. http://127.0.0.1:PORT or http://127.0.0.1:PORT/idp (no trailing slash needed). */
  issuer: string;
  /** Statically registered clients (dynamic registration is also enabled). */
  clients: IdpClient[];
  /** The MCP resource URL; access tokens for it are JWTs with aud = resource. */
  resource: string;
  /** More resources (other MCP servers of the operator's) the IdP issues JWT access tokens for. */
  moreResources?: string[];
  /** Keys for signing oidc-provider's cookies; random when omitted. */
  cookieKeys?: string[];
  /** A private RS256 JWK to sign with (persist it to keep tokens valid across restarts); generated when omitted. */
  signingJwk?: Record<string, unknown>;
  /** An oidc-provider storage adapter class; the in-memory one when omitted. */
  adapter?: AdapterConstructor;
  /** Where the provider's own failures are reported; silent when omitted. */
  log?: Logger;
  /** RP-initiated logout (`end_session_endpoint`); on unless false. */
  endSession?: boolean;
  /** Claims of an account beside the defaults (its name is its id); `sub` stays the account id. */
  accountClaims?: (accountId: string) => Record<string, unknown>;
  /** More claims the `profile` scope releases into ID tokens (e.g. Entra ID's `oid`, given by `accountClaims`). */
  profileClaims?: string[];
  /**
   * Offer pairwise subjects (OpenID Connect Core 8.1), as Entra ID does for every application: a
   * client registered with `subject_type: 'pairwise'` sees a `sub` derived from the account and its
   * redirect host, never the account id.
   */
  pairwiseSubjects?: boolean;
  /**
   * Development only: fetch client ID metadata documents from loopback https URLs, which
   * oidc-provider's SSRF guard refuses, so CIMD works offline. Their certificate is not verified:
   * loopback traffic never leaves the machine, and a developer's self-signed one has no CA.
   */
  loopbackMetadataDocuments?: boolean;
}

export interface MintAccessTokenClaims {
  sub: string;
  aud?: string | string[];
  expiresInSeconds?: number;
  iss?: string;
  clientId?: string;
  scope?: string;
  /** JOSE `typ` header, `at+jwt` when omitted; null: no `typ` header at all. */
  typ?: string | null;
  /** More payload claims (e.g. `oid`, `scp`), set before the registered ones; `scope: undefined` leaves scope out. */
  claims?: Record<string, unknown>;
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
const MAX_METADATA_BYTES = 64 * 1024;
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VIEWS = join(ROOT, 'views');
const PRODUCT_NAME = 'Development identity provider';

const SCOPE_DESCRIPTIONS: Record<string, string> = {
  openid: 'Confirm who you are (your user name)',
  profile: 'Your name and user name',
  email: 'Your email address',
  offline_access: 'Keep access while you are away (refresh tokens)',
  [RESOURCE_SCOPE]: 'Use the MCP server as you',
};

/** A name a client gives itself, as shown to a person: no control, format or bidi characters. */
function displayClientName(name: unknown): string | undefined {
  if (typeof name !== 'string') return undefined;
  const clean = name
    .replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, '')
    .trim()
    .slice(0, 100);
  return clean || undefined;
}

function isLoopbackUrl(value: string): boolean {
  const url = URL.parse(value);
  return !!url && (url.protocol === 'http:' || url.protocol === 'https:') && isLoopbackHostname(url.hostname);
}

/** Browser origins allowed to call the token, userinfo and other client endpoints: loopback ones only. */
function isLoopbackOrigin(origin: string | undefined): boolean {
  return !!origin && isLoopbackUrl(origin) && URL.parse(origin)?.origin === origin;
}

/**
 * Takes every Access-Control-* header off `res` as its head goes out. oidc-provider echoes the
 * request's Origin on the token, revocation and introspection endpoints first and takes it back
 * only once it has found the client, so a request that fails before (no client, an unknown one, a
 * wrong secret) would otherwise answer a page elsewhere with its Origin allowed.
 */
function withoutCors(res: ServerResponse): void {
  const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
  res.writeHead = ((...args: unknown[]) => {
    for (const name of res.getHeaderNames()) if (name.startsWith('access-control-')) res.removeHeader(name);
    const headers = args.find((a, i) => i > 0 && typeof a === 'object' && a !== null);
    if (headers && !Array.isArray(headers))
      for (const name of Object.keys(headers))
        if (name.toLowerCase().startsWith('access-control-')) delete (headers as Record<string, unknown>)[name];
    return writeHead(...args);
  }) as ServerResponse['writeHead'];
}

/**
 * oidc-provider's `fetch`, except that loopback https URLs are fetched without its special-use
 * address block (and without certificate verification, see `loopbackMetadataDocuments`).
 */
function loopbackMetadataFetch(url: string | URL | Request, init: RequestInit = {}): Promise<Response> {
  // oidc-provider passes a URL string; a Request is not something it sends, so it goes out as is.
  if (url instanceof Request) return fetch(url, init);
  const target = new URL(url);
  if (target.protocol !== 'https:' || !isLoopbackHostname(target.hostname)) return fetch(url, init);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const req = httpsRequest(
      target,
      { method: init.method ?? 'GET', headers, rejectUnauthorized: false, ...(init.signal ? { signal: init.signal } : {}) },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_METADATA_BYTES) req.destroy(new Error('client metadata document too large'));
          else chunks.push(chunk);
        });
        res.on('end', () => {
          const responseHeaders = new Headers();
          for (const [name, value] of Object.entries(res.headers)) {
            for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) responseHeaders.append(name, v);
          }
          const status = res.statusCode ?? 502;
          const noBody = status === 204 || status === 304 || status < 200;
          resolve(new Response(noBody ? null : Buffer.concat(chunks), { status: noBody ? 502 : status, headers: responseHeaders }));
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

function sameUrl(a: string, b: string): boolean {
  if (a === b) return true;
  const ua = URL.parse(a);
  const ub = URL.parse(b);
  return !!ua && !!ub && ua.href === ub.href;
}

const stringList = (value: unknown): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);

/** What the consent prompt asks for; oidc-provider types a prompt's details as an open object. */
function missingGrants(details: Interaction): {
  missingOIDCScope: string[];
  missingOIDCClaims: string[];
  missingResourceScopes: Record<string, string[]>;
} {
  const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = details.prompt.details;
  return {
    missingOIDCScope: stringList(missingOIDCScope),
    missingOIDCClaims: stringList(missingOIDCClaims),
    missingResourceScopes:
      missingResourceScopes && typeof missingResourceScopes === 'object'
        ? Object.fromEntries(Object.entries(missingResourceScopes).map(([indicator, scopes]) => [indicator, stringList(scopes)]))
        : {},
  };
}

export async function createIdentityProvider(options: IdentityProviderOptions): Promise<IdentityProvider> {
  const issuer = options.issuer.replace(/\/+$/, '');
  const issuerUrl = new URL(issuer);
  const basePath = issuerUrl.pathname.replace(/\/+$/, ''); // '' or e.g. '/idp'
  const { resource } = options;
  // The operator's own clients (the broker's pages) are trusted; so are clients that can only
  // deliver codes to this machine. Anything else, e.g. one a web page registered, must ask.
  const firstParty = new Set(options.clients.map((c) => c.client_id));
  const autoConsents = (client: Client | undefined): boolean => {
    if (!client) return false;
    const redirectUris = client.redirectUris ?? [];
    return firstParty.has(client.clientId) || (redirectUris.length > 0 && redirectUris.every(isLoopbackUrl));
  };
  const assets = new Map([
    [`${basePath}/static/style.css`, { type: 'text/css; charset=utf-8', body: readFileSync(join(ROOT, 'public', 'style.css')) }],
    [`${basePath}/static/favicon.svg`, { type: 'image/svg+xml', body: readFileSync(join(ROOT, 'public', 'favicon.svg')) }],
  ]);
  const render = (view: string, locals: Record<string, unknown> & { title: string }): Promise<string> =>
    ejs.renderFile(join(VIEWS, `${view}.ejs`), { productName: PRODUCT_NAME, assetBase: basePath, ...locals });

  const privateJwk = options.signingJwk
    ? { ...options.signingJwk }
    : await exportJWK((await generateKeyPair('RS256', { extractable: true })).privateKey);
  const privateKey = await importJWK(privateJwk, 'RS256');
  const kid = await calculateJwkThumbprint(privateJwk);
  Object.assign(privateJwk, { kid, use: 'sig', alg: 'RS256' });

  const resourceServerFor = (audience: string): ResourceServer => ({
    scope: RESOURCE_SCOPE,
    audience,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'RS256' } },
  });
  const resourceServers = [resource, ...(options.moreResources ?? [])].map(resourceServerFor);

  const configuration = (cimdAck: string | undefined): Configuration => ({
    clients: options.clients.map((client) => ({ ...client })),
    adapter: options.adapter ?? inMemoryAdapter(),
    jwks: { keys: [privateJwk] },
    cookies: { keys: options.cookieKeys?.length ? options.cookieKeys : [randomHandle()] },
    scopes: SCOPES,
    claims: {
      openid: ['sub'],
      profile: ['name', 'preferred_username', ...(options.profileClaims ?? [])],
      email: ['email'],
    },
    ...(options.pairwiseSubjects
      ? {
          subjectTypes: ['public', 'pairwise'],
          pairwiseIdentifier: (_ctx: unknown, accountId: string, client: Client) =>
            sha256Hex(`${client.sectorIdentifier ?? client.clientId}\n${accountId}`),
        }
      : {}),
    conformIdTokenClaims: false,
    clientBasedCORS: (_ctx, origin) => isLoopbackOrigin(origin),
    renderError: async (ctx, out) => {
      ctx.type = 'html';
      ctx.body = await render('idp-message', {
        title: 'Sign-in problem',
        heading: 'Sign-in problem',
        message: out.error_description ?? out.error ?? 'The sign-in request is not valid.',
      });
    },
    ...(options.loopbackMetadataDocuments ? { fetch: loopbackMetadataFetch } : {}),
    // Development IdP: the user name typed at sign-in is the account id.
    findAccount: (_ctx, id) => ({
      accountId: id,
      claims: () => ({ name: id, preferred_username: id, email: `${id}@example.test`, ...options.accountClaims?.(id), sub: id }),
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
          const known = resourceServers.find((r) => sameUrl(indicator, String(r.audience)));
          if (known) return known;
          throw new errors.InvalidTarget();
        },
        useGrantedResource: () => true,
      },
      registration: { enabled: true },
      clientIdMetadataDocument: { enabled: true, ack: cimdAck },
      revocation: { enabled: true },
      rpInitiatedLogout: {
        enabled: options.endSession !== false,
        logoutSource: async (ctx) => {
          ctx.body = await render('idp-sign-out', {
            title: 'Sign out',
            action: ctx.oidc.urlFor('end_session_confirm'),
            xsrf: ctx.oidc.session?.state?.secret ?? '',
            accountId: ctx.oidc.session?.accountId ?? '',
          });
        },
        postLogoutSuccessSource: async (ctx) => {
          ctx.body = await render('idp-message', {
            title: 'Signed out',
            heading: 'Signed out',
            message: 'You are signed out of the development sign-in.',
          });
        },
      },
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

  const forwardToProvider = (
    req: IncomingMessage & { originalUrl?: string },
    res: ServerResponse,
    fullPath: string,
    innerPath: string,
  ): void => {
    // oidc-provider derives its mount path from originalUrl minus url.
    req.originalUrl = fullPath;
    req.url = innerPath;
    Promise.resolve(providerListener(req, res)).catch((err: unknown) => {
      options.log?.error('dev_idp_server_error', { message: err instanceof Error ? err.message : String(err) });
      if (!res.headersSent) send(res, 500, 'text/plain', 'The development identity provider failed.');
      else res.destroy();
    });
  };

  const listener = (req: IncomingMessage & { originalUrl?: string }, res: ServerResponse): void => {
    const full = req.originalUrl ?? req.url ?? '/';
    const parsed = new URL(full, 'http://idp.invalid');
    const { pathname, search } = parsed;

    // CORS only for loopback pages: a preflight from any other origin gets no Access-Control-* at all.
    const origin = req.headers.origin;
    if (origin && !isLoopbackOrigin(origin)) {
      if (req.method === 'OPTIONS' && req.headers['access-control-request-method']) {
        res.statusCode = 204;
        res.setHeader('Vary', 'Origin');
        res.end();
        return;
      }
      withoutCors(res);
    }
    const asset = req.method === 'GET' || req.method === 'HEAD' ? assets.get(pathname) : undefined;
    if (asset) {
      res.statusCode = 200;
      res.setHeader('Content-Type', asset.type);
      res.setHeader('Cache-Control', 'public, max-age=3600');
      res.setHeader('X-Content-Type-Options', 'nosniff');
      res.end(req.method === 'HEAD' ? undefined : asset.body);
      return;
    }

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
    const match = /^\/interaction\/([A-Za-z0-9_-]+)(\/login|\/abort|\/confirm)?$/.exec(inner);
    if (match) {
      const [, uid = '', action = ''] = match;
      handleInteraction(req, res, uid, action).catch((err: unknown) => interactionError(res, err, options.log, render));
      return;
    }
    forwardToProvider(req, res, full, `${inner}${search}`);
  };

  async function handleInteraction(req: IncomingMessage, res: ServerResponse, uid: string, action: string): Promise<void> {
    const method = req.method ?? 'GET';
    const expected = action === '/login' || action === '/confirm' ? 'POST' : 'GET';
    if (method !== expected) {
      res.setHeader('Allow', expected);
      sendText(res, 405, 'Method not allowed');
      return;
    }

    const details = await provider.interactionDetails(req, res);
    if (details.uid !== uid) {
      sendHtml(
        res,
        400,
        await errorPage(render, 'This sign-in link does not match the current sign-in attempt. Return to the application and start again.'),
      );
      return;
    }
    const client = typeof details.params.client_id === 'string' ? await provider.Client.find(details.params.client_id) : undefined;

    /** Ends the interaction with `access_denied` back to the client. */
    const deny = (description: string) =>
      provider.interactionFinished(
        req,
        res,
        { error: 'access_denied', error_description: description },
        { mergeWithLastSubmission: false },
      );
    /** The posted form, if the attempt waits on `prompt`; otherwise a 400 page saying what it is not waiting for. */
    const formFor = async (prompt: 'consent' | 'login', waitingFor: string): Promise<URLSearchParams | undefined> => {
      if (details.prompt.name === prompt) return readUrlEncoded(req);
      sendHtml(res, 400, await errorPage(render, `This sign-in attempt is not waiting for ${waitingFor}.`));
      return undefined;
    };

    if (action === '/abort') return void (await deny('End-User aborted interaction'));

    if (action === '/confirm') {
      const body = await formFor('consent', 'your consent');
      if (!body) return;
      if (body.get('decision') === 'allow') await grantConsent(details, req, res);
      else await deny('End-User denied the request');
      return;
    }

    if (action === '/login') {
      const body = await formFor('login', 'a user name');
      if (!body) return;
      const login = (body.get('login') ?? '').trim();
      if (!login || login.length > MAX_LOGIN_LENGTH) {
        const message = login ? `The user name must be at most ${MAX_LOGIN_LENGTH} characters.` : 'Enter a user name.';
        sendHtml(res, 400, await loginPage(details, client, login, message));
        return;
      }
      await provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
      return;
    }

    switch (details.prompt.name) {
      case 'login':
        sendHtml(
          res,
          200,
          await loginPage(details, client, typeof details.params.login_hint === 'string' ? details.params.login_hint : '', undefined),
        );
        return;
      case 'consent':
        if (autoConsents(client)) await grantConsent(details, req, res);
        else sendHtml(res, 200, await consentPage(details, client));
        return;
      default:
        sendHtml(res, 400, await errorPage(render, `Unsupported interaction prompt "${details.prompt.name}".`));
    }
  }

  function loginPage(details: Interaction, client: Client | undefined, value: string, error: string | undefined): Promise<string> {
    const uid = encodeURIComponent(details.uid);
    return render('idp-sign-in', {
      title: 'Development sign-in',
      clientName: displayClientName(client?.clientName),
      error,
      value,
      maxLength: MAX_LOGIN_LENGTH,
      action: `${basePath}/interaction/${uid}/login`,
      cancelHref: `${basePath}/interaction/${uid}/abort`,
    });
  }

  function consentPage(details: Interaction, client: Client | undefined): Promise<string> {
    const { missingOIDCScope, missingResourceScopes } = missingGrants(details);
    const names = [...new Set([...missingOIDCScope, ...Object.values(missingResourceScopes).flat()])];
    const redirectUri = typeof details.params.redirect_uri === 'string' ? URL.parse(details.params.redirect_uri) : null;
    return render('idp-consent', {
      title: 'Allow access?',
      clientName: displayClientName(client?.clientName) ?? 'An application',
      accountId: details.session?.accountId ?? '',
      redirectOrigin: redirectUri ? (redirectUri.origin === 'null' ? `${redirectUri.protocol}` : redirectUri.origin) : '',
      scopes: names.map((name) => ({ name, description: SCOPE_DESCRIPTIONS[name] ?? name })),
      resources: Object.keys(missingResourceScopes),
      action: `${basePath}/interaction/${encodeURIComponent(details.uid)}/confirm`,
    });
  }

  async function grantConsent(details: Interaction, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const accountId = details.session?.accountId;
    const clientId = details.params.client_id;
    if (!accountId || typeof clientId !== 'string') {
      sendHtml(res, 400, await errorPage(render, 'This sign-in attempt has no signed-in user. Return to the application and start again.'));
      return;
    }
    const existing = details.grantId ? await provider.Grant.find(details.grantId) : undefined;
    const grant = existing ?? new provider.Grant({ accountId, clientId });
    const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = missingGrants(details);
    if (missingOIDCScope.length) grant.addOIDCScope(missingOIDCScope.join(' '));
    if (missingOIDCClaims.length) grant.addOIDCClaims(missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missingResourceScopes)) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }

  async function mintAccessToken(claims: MintAccessTokenClaims): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const body: Record<string, unknown> = {
      client_id: claims.clientId ?? defaultClientId,
      scope: claims.scope ?? RESOURCE_SCOPE,
      ...(claims.nonce !== undefined ? { nonce: claims.nonce } : {}),
      ...claims.claims,
    };
    for (const [name, value] of Object.entries(body)) if (value === undefined) delete body[name];
    return new SignJWT(body)
      .setProtectedHeader({ alg: 'RS256', kid, ...(claims.typ === null ? {} : { typ: claims.typ ?? 'at+jwt' }) })
      .setIssuer(claims.iss ?? issuer)
      .setSubject(claims.sub)
      .setAudience(claims.aud ?? resource)
      .setIssuedAt(claims.issuedAt ?? now)
      .setExpirationTime(now + (claims.expiresInSeconds ?? 300))
      .setJti(randomId())
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

function setSecurityHeaders(res: ServerResponse): void {
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('X-Frame-Options', 'DENY');
  // No form-action: the login POST is answered with redirects that end at the client's redirect URI.
  res.setHeader(
    'Content-Security-Policy',
    "default-src 'none'; script-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; frame-ancestors 'none'",
  );
}

function send(res: ServerResponse, status: number, type: 'text/html' | 'text/plain', body: string): void {
  if (res.headersSent) return;
  setSecurityHeaders(res);
  res.statusCode = status;
  res.setHeader('Content-Type', `${type}; charset=utf-8`);
  res.end(body);
}

const sendHtml = (res: ServerResponse, status: number, html: string) => send(res, status, 'text/html', html);
const sendText = (res: ServerResponse, status: number, text: string) => send(res, status, 'text/plain', text);

type Render = (view: string, locals: Record<string, unknown> & { title: string }) => Promise<string>;

function errorPage(render: Render, message: string): Promise<string> {
  return render('idp-message', { title: 'Sign-in problem', heading: 'Sign-in problem', message });
}

function interactionError(res: ServerResponse, err: unknown, log: Logger | undefined, render: Render): void {
  if (err instanceof errors.OIDCProviderError && err.expose) {
    // Typically SessionNotFound: the interaction cookie is missing or the interaction expired.
    const status = err.statusCode;
    void errorPage(render, 'This sign-in attempt has expired or is no longer valid. Return to the application and start again.').then(
      (html) => sendHtml(res, status, html),
      () => sendText(res, status, 'Sign-in problem'),
    );
    return;
  }
  if (err instanceof BodyTooLarge) {
    sendText(res, 413, 'Request body too large');
    return;
  }
  log?.error('dev_idp_interaction_error', { message: err instanceof Error ? err.message : String(err) });
  sendText(res, 500, 'Something went wrong while signing in.');
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
