// The sandbox GitHub: a simulated GitHub (OAuth web flow + a sliver of the REST API) that
// `npm run dev` serves on the broker's own server when no real GitHub OAuth app is configured, and
// that the tests use as their GitHub stand-in. It behaves as GitHub's "Authorizing OAuth apps" and
// REST API documentation describe: token-endpoint errors come back as HTTP 200 with an `error`
// field, the token answer is form-encoded unless `Accept: application/json`, PKCE is S256-only and optional, codes are single
// use and live 10 minutes, and the REST API lives under /api/v3 (GitHub Enterprise Server layout).
// Its state (users, codes, tokens, grants, repositories, issues) lives in SQLite through
// SandboxGitHubStore; codes and tokens are stored hashed. It never logs, and every response says
// `X-Sandbox: github`. At /mcp it also plays GitHub's remote MCP server (./mcp/), over the same
// store and behind the same bearer check as the REST API.
//
// Each registered client is either an OAuth App (the default: non-expiring `gho_` tokens with
// scopes that accumulate per user/app grant, see `grantScopesAfter`) or a GitHub App (user-to-server
// tokens: `ghu_` access tokens that expire, no scopes, and single-use `ghr_` refresh tokens that
// rotate: "Once you use a refresh token, that refresh token and the old user access token will no
// longer work").
import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { constantTimeEqual, randomBelow, randomText, sha256Base64url } from '../../crypto/index.js';
import type { SandboxGitHubStore, SandboxToken, SandboxUser } from '../store/index.js';
import { STYLESHEET, contentSecurityPolicy, cspOrigin, html, sendPage } from './html.js';
import { createSandboxMcp, type SandboxMcpCall, type SandboxMcpFault } from './mcp/index.js';
import { administers } from './mcp/tools.js';
import { scopeList } from '../../providers/scopes.js';

export { SANDBOX_LABEL } from './html.js';
export { CONFIRM_FIELD, CONFIRM_KEY, MAX_RECORDED_CALLS, TOOL_SCOPES, type SandboxMcpCall, type SandboxMcpFault } from './mcp/index.js';

/** Faults are sticky: they apply to every matching request until cleared (set the field to undefined). */
export interface SandboxFaults {
  token?: 'http500' | 'timeout' | 'malformed' | 'error200';
  api?: 401 | 403 | 429 | 500;
  /**
   * Delays the answer to every refresh request (grant_type=refresh_token) by this many ms. The
   * refresh itself (burning the old pair, storing the new one) happens when the request arrives.
   */
  refreshDelayMs?: number;
  /** The same for the code exchange (grant_type=authorization_code): the code is spent on arrival. */
  exchangeDelayMs?: number;
  /** The MCP endpoint's faults (see {@link SandboxMcpFault}): 401, a 403 scope challenge on every scoped tool, 500, 'timeout'. */
  mcp?: SandboxMcpFault;
}

/** 'oauth-app': gho_ tokens that never expire, with scopes. 'github-app': user-to-server tokens. */
export type SandboxAppKind = 'oauth-app' | 'github-app';

export interface SandboxClient {
  clientId: string;
  clientSecret: string;
  /** The application's name, as GitHub shows it on a user's authorized applications (default: its client id). */
  name?: string;
  /** Default 'oauth-app'. */
  kind?: SandboxAppKind;
  /** Lifetime of a github-app access token in seconds (default 28800, GitHub's 8 hours). */
  accessTokenTtlSeconds?: number;
}

/** A token pair minted by {@link SandboxGitHub.issueToken}. */
export interface SandboxIssuedToken {
  accessToken: string;
  /** github-app tokens only. */
  refreshToken?: string;
  /** When the access token expires (ms); absent for a non-expiring oauth-app token. */
  expiresAt?: number;
  scopes: string[];
}

export interface SandboxGitHubOptions {
  store: SandboxGitHubStore;
  /** The OAuth apps registered at the sandbox. */
  clients: SandboxClient[];
  /** Absolute URL where the router is mounted, e.g. http://127.0.0.1:3000/sandbox/github. */
  publicBase: string;
  /** Read on every request; mutate its fields to switch faults on and off. */
  faults?: SandboxFaults;
  /** Called first for every request, with the path relative to publicBase and without the query. */
  onRequest?: (method: string, path: string) => void;
  /**
   * The login the authorize page pre-fills when the request names none (`login`), e.g. one derived
   * from who is signed in at the broker (development mode's wiring); `octocat` when undefined.
   */
  suggestLogin?: (req: Request, res: Response) => string | undefined;
  /**
   * Called for every token request with grant_type=refresh_token, as it arrives: `ok` says whether
   * it rotated the pair (false for a fault, bad client credentials or a bad refresh token).
   */
  onRefresh?: (ok: boolean) => void;
  /** Clock in ms, for code expiry, rate-limit windows and timestamps (default Date.now). */
  now?: () => number;
  /** Name in page titles and headings (default 'Sandbox GitHub'); every page also carries SANDBOX_LABEL. */
  siteName?: string;
  /**
   * The HMAC key (at least 32 bytes) of the MCP endpoint's own requestState (delete_repository's
   * confirmation); never the broker's. Default: a random key per process.
   */
  mcpStateKey?: string | Uint8Array;
}

export interface SandboxGitHub {
  router: express.Router;
  /** = publicBase: the "github.com" of the sandbox (authorize page, html_url of users and issues). */
  webUrl: string;
  /** = publicBase + '/api/v3'. */
  apiUrl: string;
  /** = publicBase + '/mcp': the stand-in for GitHub's remote MCP server (see ./mcp/). */
  mcpUrl: string;
  /**
   * The last requests to the MCP endpoint, oldest first, each with the sandbox user whose token
   * came in (never the token): for isolation tests.
   */
  mcpCalls(): SandboxMcpCall[];
  /**
   * Mints a token for `login` (created if new) as if the user had just authorized the app
   * `clientId`: github-app → ghu_ + ghr_ pair expiring after `expiresInSeconds` (default: the
   * client's TTL), no scopes; oauth-app → gho_ with `scopes` (default none) that never expires unless
   * `expiresInSeconds` is given. The grant is recorded like after a web flow.
   */
  issueToken(clientId: string, login: string, opts?: { expiresInSeconds?: number; scopes?: string[] }): SandboxIssuedToken;
  /** Makes the current access tokens (of `login`, or everybody's; of `clientId`, or every app's) expired. */
  expireAccessTokens(login?: string, clientId?: string): number;
}

const CODE_TTL_MS = 10 * 60 * 1000;
const ACCESS_TOKEN_TTL_SECONDS = 28_800; // GitHub App user access tokens: 8 hours
const REFRESH_TOKEN_TTL_SECONDS = 15_897_600; // ~6 months
const MAX_TOKENS_PER_USER_APP_SCOPE = 10; // GitHub: older tokens stop working beyond this
const RATE_LIMIT = 5000;
const LOGIN_PATTERN = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/;
const DOCS = 'https://docs.github.com';
const TOKEN_ERROR_URI = `${DOCS}/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors`;
const TOKEN_ERRORS: Record<string, string> = {
  incorrect_client_credentials: 'The client_id and/or client_secret passed are incorrect.',
  redirect_uri_mismatch: 'The redirect_uri MUST match the registered callback URL for this application.',
  bad_verification_code: 'The code passed is incorrect or expired.',
  unsupported_grant_type: 'The grant type is not supported.',
  bad_refresh_token: 'The refresh token passed is incorrect or expired.',
};
const BAD_CREDENTIALS = { message: 'Bad credentials', documentation_url: `${DOCS}/rest`, status: '401' };
const NOT_FOUND = { message: 'Not Found', documentation_url: `${DOCS}/rest`, status: '404' };

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const parseScopes = (raw: string | undefined): string[] => [...new Set(scopeList(raw, { commas: true }))];

/** Scopes another scope includes (github/docs "Scopes for OAuth apps", table of available scopes). */
const IMPLIED_BY: Record<string, string> = {
  'repo:status': 'repo',
  repo_deployment: 'repo',
  public_repo: 'repo',
  'repo:invite': 'repo',
  security_events: 'repo',
  'write:repo_hook': 'admin:repo_hook',
  'read:repo_hook': 'admin:repo_hook',
  'write:org': 'admin:org',
  'read:org': 'admin:org',
  'write:public_key': 'admin:public_key',
  'read:public_key': 'admin:public_key',
  'read:user': 'user',
  'user:email': 'user',
  'user:follow': 'user',
  'read:project': 'project',
  'write:gpg_key': 'admin:gpg_key',
  'read:gpg_key': 'admin:gpg_key',
  'manage_runners:enterprise': 'admin:enterprise',
  'manage_billing:enterprise': 'admin:enterprise',
  'read:enterprise': 'admin:enterprise',
};

/**
 * GitHub's "normalized scopes": a scope implicitly included by another one in the list is dropped
 * ("requesting `user,gist,user:email` will result in a token with `user` and `gist` scopes only").
 * Order is kept, duplicates go.
 */
export function normalizeScopes(scopes: string[]): string[] {
  const set = new Set(scopes);
  return [...set].filter((s) => !(IMPLIED_BY[s] !== undefined && set.has(IMPLIED_BY[s]!)));
}

/**
 * The scopes a user has authorized for an OAuth App accumulate across authorizations (github/docs
 * "Authorizing OAuth apps", `scope`: a user who "has authorized one token with `user` scope and
 * another token with `repo` scope" has authorized `user` and `repo`).
 */
export const grantScopesAfter = (previous: string[] | undefined, granted: string[]): string[] =>
  normalizeScopes([...(previous ?? []), ...granted]);

/**
 * Where the sandbox refuses new issues, as GitHub would: an organisation the user cannot see (404)
 * and a repository whose issues are switched off (410). The REST API and the MCP endpoint both ask.
 */
function issueRefusal(owner: string, repo: string): { status: number; message: string } | undefined {
  if (owner === 'private-org') return { status: 404, message: 'Not Found' };
  if (repo === 'disabled-issues') return { status: 410, message: 'Issues are disabled for this repo' };
  return undefined;
}

function randomAlnum(length: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[randomBelow(alphabet.length)];
  return out;
}

/** Parses `Authorization: Basic` per RFC 6749 §2.3.1 (each part form-urlencoded before base64). */
function basicCredentials(req: Request): { id: string; secret: string } | undefined {
  const m = /^Basic\s+(\S+)$/i.exec(req.get('authorization') ?? '');
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  const dec = (s: string): string => {
    try {
      return decodeURIComponent(s.replace(/\+/g, ' '));
    } catch {
      return s;
    }
  };
  return { id: dec(decoded.slice(0, colon)), secret: dec(decoded.slice(colon + 1)) };
}

/** A web URL an OAuth client may be sent back to: absolute http(s) only. */
function redirectTarget(raw: string | undefined | null): URL | undefined {
  if (!raw) return undefined;
  try {
    const url = new URL(raw);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : undefined;
  } catch {
    return undefined;
  }
}

export function createSandboxGitHub(options: SandboxGitHubOptions): SandboxGitHub {
  const { store } = options;
  const webUrl = options.publicBase.replace(/\/+$/, '');
  const apiUrl = `${webUrl}/api/v3`;
  const basePath = new URL(webUrl).pathname.replace(/\/+$/, '');
  const siteName = options.siteName ?? 'Sandbox GitHub';
  const faults = options.faults ?? {};
  const now = options.now ?? Date.now;
  const rate = new Map<string, { used: number; resetAt: number }>(); // per login; not persisted

  const findClient = (clientId: string | undefined | null): SandboxClient | undefined =>
    clientId == null ? undefined : options.clients.find((c) => c.clientId === clientId);
  const clientSecret = (clientId: string | undefined): string | undefined => findClient(clientId)?.clientSecret;
  const kindOf = (client: SandboxClient | undefined): SandboxAppKind => client?.kind ?? 'oauth-app';

  /**
   * Stores a new token for `login` at `client` and records the grant. github-app: ghu_ + ghr_,
   * expiring, no scopes. oauth-app: gho_ with `scopes` (normalized), expiring only if asked to.
   */
  const mint = (client: SandboxClient, login: string, scopes: string[], expiresInSeconds?: number) => {
    const issuedAt = now();
    if (kindOf(client) === 'github-app') {
      const ttl = expiresInSeconds ?? client.accessTokenTtlSeconds ?? ACCESS_TOKEN_TTL_SECONDS;
      const accessToken = `ghu_${randomAlnum(36)}`;
      const refreshToken = `ghr_${randomAlnum(76)}`;
      const expiresAt = issuedAt + ttl * 1000;
      store.issueToken(accessToken, { clientId: client.clientId, login, scopes: [], issuedAt, expiresAt }, MAX_TOKENS_PER_USER_APP_SCOPE, {
        refresh: { token: refreshToken, expiresAt: issuedAt + REFRESH_TOKEN_TTL_SECONDS * 1000 },
        grantScopes: () => [],
      });
      return {
        issued: { accessToken, refreshToken, expiresAt, scopes: [] } satisfies SandboxIssuedToken,
        wire: {
          access_token: accessToken,
          expires_in: ttl,
          refresh_token: refreshToken,
          refresh_token_expires_in: REFRESH_TOKEN_TTL_SECONDS,
          scope: '',
          token_type: 'bearer',
        } as Record<string, string | number>,
      };
    }
    const granted = normalizeScopes(scopes);
    const accessToken = `gho_${randomAlnum(36)}`;
    const expiresAt = expiresInSeconds === undefined ? undefined : issuedAt + expiresInSeconds * 1000;
    const record: SandboxToken = { clientId: client.clientId, login, scopes: granted, issuedAt, expiresAt };
    store.issueToken(accessToken, record, MAX_TOKENS_PER_USER_APP_SCOPE, {
      grantScopes: (previous) => grantScopesAfter(previous, granted),
    });
    return {
      issued: { accessToken, ...(expiresAt === undefined ? {} : { expiresAt }), scopes: granted } satisfies SandboxIssuedToken,
      wire: { access_token: accessToken, token_type: 'bearer', scope: granted.join(',') } as Record<string, string | number>,
    };
  };
  const expired = (token: { expiresAt?: number | undefined }): boolean => token.expiresAt !== undefined && token.expiresAt <= now();
  /** The one bearer check, of the REST API and the MCP endpoint: `Bearer` (or `token`) + a working token of an existing user. */
  const authenticate = (authorization: string | undefined): { token: SandboxToken; user: SandboxUser } | undefined => {
    const m = /^(?:Bearer|token)\s+(\S+)$/i.exec(authorization ?? '');
    const token = m ? store.findToken(m[1]!) : undefined;
    const user = token && !expired(token) ? store.findUser(token.login) : undefined;
    return token && user ? { token, user } : undefined;
  };
  const authenticClient = (id: string | undefined, secret: string | undefined): boolean => {
    const expected = clientSecret(id);
    return expected !== undefined && secret !== undefined && constantTimeEqual(secret, expected);
  };
  const page = (res: Response, status: number, title: string, body: ReturnType<typeof html>, formActionOrigin?: string) =>
    sendPage(res, { basePath, title: `${siteName} — ${title}`, body, status, ...(formActionOrigin ? { formActionOrigin } : {}) });
  const notFoundPage = (res: Response, message = 'Not Found') => page(res, 404, 'Page not found', html`<p>${message}</p>`);

  const router = express.Router();

  // Record every request before anything else handles it (path only: never the query, never tokens).
  router.use((req, res, next) => {
    options.onRequest?.(req.method, req.path);
    res
      .set('X-Sandbox', 'github')
      .set('Content-Security-Policy', contentSecurityPolicy())
      .set('X-Content-Type-Options', 'nosniff')
      .set('Referrer-Policy', 'no-referrer');
    next();
  });
  // Before the body parsers: the MCP endpoint reads (and bounds) its own bodies.
  const mcp = createSandboxMcp({
    store,
    webUrl,
    now,
    faults,
    stateKey: options.mcpStateKey,
    authenticate,
    isOAuthApp: (clientId) => kindOf(findClient(clientId)) === 'oauth-app',
    hasScope: (granted, scope) => granted.includes(scope) || (IMPLIED_BY[scope] !== undefined && granted.includes(IMPLIED_BY[scope]!)),
    issueRefusal,
  });
  router.use(mcp.router);
  router.use(express.urlencoded({ extended: false, limit: '64kb' }), express.json({ limit: '1mb' }));

  router.get('/style.css', (_req, res) => {
    res.set('Cache-Control', 'public, max-age=300').type('text/css').send(STYLESHEET);
  });

  // ---------------------------------------------------------------- web flow: authorize
  router.get('/login/oauth/authorize', (req, res) => {
    const params = new URL(req.originalUrl, 'http://sandbox.invalid').searchParams;
    const clientId = params.get('client_id');
    if (clientSecret(clientId ?? undefined) === undefined) {
      return notFoundPage(res, 'No application is registered with this client_id.');
    }
    const target = redirectTarget(params.get('redirect_uri'));
    if (!target) return page(res, 400, 'Bad request', html`<p>The redirect_uri parameter is missing or invalid.</p>`);
    const hidden = [...params.entries()]
      .filter(([name]) => name !== 'login' && name !== 'decision')
      .map(([name, value]) => html`  <input type="hidden" name="${name}" value="${value}">\n`);
    const scopes = normalizeScopes(parseScopes(params.get('scope') ?? undefined));
    const request =
      kindOf(findClient(clientId)) === 'github-app'
        ? html`<p>GitHub App <code>${clientId!}</code> requests to act on your behalf (GitHub Apps have permissions, not scopes).</p>`
        : html`<p>Application <code>${clientId!}</code> requests access${
            scopes.length
              ? html` with scopes: <code>${scopes.join(', ')}</code>.`
              : params.get('scope')?.trim()
                ? ' (no scopes).'
                : ' with the scopes you have already authorized for it (none if this is your first authorization).'
          }</p>`;
    page(
      res,
      200,
      'Authorize application',
      html`${request}
<p class="meta">Authorizing will redirect to <code>${target.origin}</code>.</p>
<form method="post" action="${basePath}/login/oauth/authorize">
${hidden}  <label for="login">Sign in as</label>
  <input type="text" id="login" name="login" value="${params.get('login') || options.suggestLogin?.(req, res) || 'octocat'}">
  <button type="submit" name="decision" value="authorize">Authorize</button>
  <button type="submit" name="decision" value="cancel">Cancel</button>
</form>`,
      cspOrigin(target.href),
    );
  });

  router.post('/login/oauth/authorize', (req, res) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const clientId = str(body.client_id);
    if (clientSecret(clientId) === undefined) return notFoundPage(res, 'No application is registered with this client_id.');
    const redirectUri = str(body.redirect_uri);
    const target = redirectTarget(redirectUri);
    if (!target) return page(res, 400, 'Bad request', html`<p>The redirect_uri parameter is missing or invalid.</p>`);
    const state = str(body.state);
    const redirect = (params: Record<string, string>) => {
      for (const [k, v] of Object.entries(params)) target.searchParams.set(k, v);
      if (state !== undefined) target.searchParams.set('state', state);
      res.set('Cache-Control', 'no-store').redirect(302, target.href);
    };
    if (body.decision !== 'authorize') {
      return redirect({
        error: 'access_denied',
        error_description: 'The user has denied your application access.',
        error_uri: `${DOCS}/apps/managing-oauth-apps/troubleshooting-authorization-request-errors/#access-denied`,
      });
    }
    const method = str(body.code_challenge_method);
    if (method !== undefined && method !== 'S256') {
      return redirect({
        error: 'invalid_request',
        error_description: 'Only the S256 code_challenge_method is supported.',
        error_uri: `${DOCS}/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps`,
      });
    }
    const login = (str(body.login) ?? '').trim() || 'octocat';
    if (!LOGIN_PATTERN.test(login)) return page(res, 400, 'Bad request', html`<p>That is not a valid GitHub login.</p>`);
    const user = store.ensureUser(login);
    const code = randomText(10, 'hex');
    store.pruneCodes(now());
    // GitHub Apps have no scopes (the parameter is ignored). An OAuth App authorization without a
    // `scope` "will automatically complete with the set of scopes the user has authorized for the
    // application" (none for a first authorization); with one, it asks for exactly those.
    const requested = str(body.scope)?.trim() ? normalizeScopes(parseScopes(str(body.scope))) : undefined;
    const scopes = kindOf(findClient(clientId)) === 'github-app' ? [] : (requested ?? store.findGrant(clientId!, user.login)?.scopes ?? []);
    store.putCode(code, {
      clientId: clientId!,
      redirectUri: redirectUri!,
      codeChallenge: str(body.code_challenge) || undefined,
      scopes,
      login: user.login,
      expiresAt: now() + CODE_TTL_MS,
    });
    redirect({ code });
  });

  // ---------------------------------------------------------------- web flow: token exchange
  router.post('/login/oauth/access_token', (req, res) => {
    const wantsJson = (req.get('accept') ?? '').includes('application/json');
    const body = (req.body ?? {}) as Record<string, unknown>;
    const grantType = str(body.grant_type);
    const isRefresh = grantType === 'refresh_token';
    const answer = (fields: Record<string, string | number>) => {
      const send = () => {
        if (res.headersSent || !res.socket || res.socket.destroyed) return; // the client (or close()) gave up
        res.status(200).set('Cache-Control', 'no-store');
        if (wantsJson) res.json(fields);
        else
          res
            .type('application/x-www-form-urlencoded; charset=utf-8')
            .send(new URLSearchParams(Object.entries(fields).map(([k, v]) => [k, String(v)])).toString());
      };
      const delay = (isRefresh ? faults.refreshDelayMs : grantType === 'authorization_code' ? faults.exchangeDelayMs : 0) ?? 0;
      if (delay > 0) setTimeout(send, delay).unref();
      else send();
    };
    const fail = (error: string) =>
      answer({
        error,
        error_description: TOKEN_ERRORS[error]!,
        error_uri: `${TOKEN_ERROR_URI}#${error.replace(/_/g, '-')}`,
      });
    const refreshed = (ok: boolean) => {
      if (isRefresh) options.onRefresh?.(ok);
    };

    switch (faults.token) {
      case 'http500':
        refreshed(false);
        return void res.status(500).type('html').send('<!doctype html><title>500</title><h1>Whoa there!</h1><p>Server error.</p>');
      case 'timeout':
        refreshed(false);
        return; // never answer (the client's own timeout, or closing the server, ends it)
      case 'malformed':
        refreshed(false);
        return void res.status(200).type('application/json').send('{"access_token": ');
      case 'error200':
        refreshed(false);
        return fail(isRefresh ? 'bad_refresh_token' : 'bad_verification_code');
    }

    const basic = basicCredentials(req);
    const id = basic?.id ?? str(body.client_id);
    const secret = basic?.secret ?? str(body.client_secret);
    if (!authenticClient(id, secret)) {
      refreshed(false);
      return fail('incorrect_client_credentials');
    }
    const client = findClient(id)!;

    if (isRefresh) {
      // Rotation: the presented refresh token and its access token are burned at once (also when
      // the answer is delayed), so a second use, or a concurrent one, gets bad_refresh_token.
      const issuedAt = now();
      const ttl = client.accessTokenTtlSeconds ?? ACCESS_TOKEN_TTL_SECONDS;
      const next = { accessToken: `ghu_${randomAlnum(36)}`, refreshToken: `ghr_${randomAlnum(76)}` };
      const rotated =
        kindOf(client) === 'github-app'
          ? store.rotateRefreshToken(str(body.refresh_token) ?? '', client.clientId, issuedAt, {
              ...next,
              issuedAt,
              accessExpiresAt: issuedAt + ttl * 1000,
              refreshExpiresAt: issuedAt + REFRESH_TOKEN_TTL_SECONDS * 1000,
            })
          : undefined; // an OAuth App here never issues refresh tokens
      refreshed(rotated !== undefined);
      if (!rotated) return fail('bad_refresh_token');
      return answer({
        access_token: next.accessToken,
        expires_in: ttl,
        refresh_token: next.refreshToken,
        refresh_token_expires_in: REFRESH_TOKEN_TTL_SECONDS,
        scope: '',
        token_type: 'bearer',
      });
    }
    if (grantType !== undefined && grantType !== 'authorization_code') return fail('unsupported_grant_type');

    // A code is burned by the first exchange attempt that presents it, successful or not.
    const grant = store.takeCode(str(body.code) ?? '');
    if (!grant) return fail('bad_verification_code');
    if (grant.expiresAt <= now() || grant.clientId !== id) return fail('bad_verification_code');
    const redirectUri = str(body.redirect_uri);
    if (redirectUri && redirectUri !== grant.redirectUri) return fail('redirect_uri_mismatch');
    if (grant.codeChallenge !== undefined) {
      const verifier = str(body.code_verifier);
      if (!verifier || sha256Base64url(verifier) !== grant.codeChallenge) {
        return fail('bad_verification_code');
      }
    }

    answer(mint(client, grant.login, grant.scopes).wire);
  });

  // ---------------------------------------------------------------- REST API under /api/v3
  const api = express.Router();

  const rateHeaders = (res: Response, login: string | undefined, count: boolean) => {
    const key = (login ?? '').toLowerCase();
    let r = rate.get(key);
    if (!r || r.resetAt * 1000 <= now()) rate.set(key, (r = { used: 0, resetAt: Math.ceil(now() / 1000) + 3600 }));
    if (count) r.used = Math.min(RATE_LIMIT, r.used + 1);
    res.set({
      'X-RateLimit-Limit': String(RATE_LIMIT),
      'X-RateLimit-Remaining': String(RATE_LIMIT - r.used),
      'X-RateLimit-Reset': String(r.resetAt),
      'X-RateLimit-Used': String(r.used),
      'X-RateLimit-Resource': 'core',
    });
  };

  api.use((_req, res, next) => {
    res.set('Cache-Control', 'no-store');
    switch (faults.api) {
      case 401:
        return void res.status(401).json(BAD_CREDENTIALS);
      case 403:
        rateHeaders(res, undefined, false);
        res.set({ 'X-RateLimit-Remaining': '0', 'X-RateLimit-Used': String(RATE_LIMIT) });
        return void res.status(403).json({
          message: 'API rate limit exceeded for user ID 1.',
          documentation_url: `${DOCS}/rest/overview/resources-in-the-rest-api#rate-limiting`,
        });
      case 429:
        return void res
          .status(429)
          .set('Retry-After', '60')
          .json({
            message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
            documentation_url: `${DOCS}/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits`,
          });
      case 500:
        return void res.status(500).json({ message: 'Server Error' });
    }
    next();
  });

  // App-authenticated (Basic client_id:client_secret) revocation endpoints.
  const revoke = (scope: 'grant' | 'token') => (req: Request, res: Response) => {
    const basic = basicCredentials(req);
    if (!basic || !authenticClient(basic.id, basic.secret)) return void res.status(401).json(BAD_CREDENTIALS);
    if (req.params.client_id !== basic.id) return void res.status(404).json(NOT_FOUND);
    const accessToken = str(((req.body ?? {}) as Record<string, unknown>).access_token);
    const record = accessToken === undefined ? undefined : store.findToken(accessToken);
    // "You must provide a valid OAuth access_token": an expired one is not.
    if (!record || record.clientId !== basic.id || expired(record)) return void res.status(404).json(NOT_FOUND);
    if (scope === 'token') store.deleteToken(accessToken!);
    else store.revokeGrant(basic.id, record.login, now());
    res.status(204).end();
  };
  api.delete('/applications/:client_id/grant', revoke('grant'));
  api.delete('/applications/:client_id/token', revoke('token'));

  // Everything else needs a user token.
  api.use((req, res, next) => {
    const auth = authenticate(req.get('authorization'));
    if (!auth) return void res.status(401).json(BAD_CREDENTIALS);
    res.locals.user = auth.user;
    rateHeaders(res, auth.user.login, true);
    res.set('X-OAuth-Scopes', auth.token.scopes.join(', '));
    next();
  });

  api.get('/user', (_req, res) => {
    const { id, login, name } = res.locals.user as SandboxUser;
    res.json({
      login,
      id,
      node_id: Buffer.from(`04:User${id}`).toString('base64'),
      name,
      html_url: `${webUrl}/${login}`,
      type: 'User',
    });
  });

  api.post('/repos/:owner/:repo/issues', (req, res) => {
    const owner = String(req.params.owner);
    const repo = String(req.params.repo);
    const user = res.locals.user as SandboxUser;
    const refused = issueRefusal(owner, repo);
    if (refused?.status === 404) return void res.status(404).json(NOT_FOUND);
    if (refused)
      return void res
        .status(refused.status)
        .json({ message: refused.message, documentation_url: `${DOCS}/rest/issues/issues#create-an-issue` });
    const body = (req.body ?? {}) as Record<string, unknown>;
    const invalid = (field: string, code: string) =>
      res.status(422).json({
        message: 'Validation Failed',
        errors: [{ resource: 'Issue', field, code }],
        documentation_url: `${DOCS}/rest/issues/issues#create-an-issue`,
      });
    if (body.title === undefined || body.title === null || body.title === '') return void invalid('title', 'missing_field');
    if (typeof body.title !== 'string') return void invalid('title', 'invalid');
    if (body.body !== undefined && body.body !== null && typeof body.body !== 'string') return void invalid('body', 'invalid');
    const labels = body.labels ?? [];
    if (!Array.isArray(labels) || !labels.every((l): l is string => typeof l === 'string')) return void invalid('labels', 'invalid');

    const issue = store.createIssue({
      owner,
      repo,
      title: body.title,
      body: (body.body as string | null | undefined) ?? null,
      labels: [...labels],
      author: user.login,
      createdAt: now(),
    });
    const url = `${apiUrl}/repos/${owner}/${repo}/issues/${issue.number}`;
    res
      .status(201)
      .set('Location', url)
      .json({
        id: issue.id,
        node_id: Buffer.from(`05:Issue${issue.id}`).toString('base64'),
        number: issue.number,
        title: issue.title,
        body: issue.body,
        state: 'open',
        url,
        html_url: `${webUrl}/${owner}/${repo}/issues/${issue.number}`,
        labels: issue.labels.map((name) => ({ name })),
        user: { login: user.login, id: user.id },
        created_at: new Date(issue.createdAt).toISOString(),
      });
  });

  api.use((_req, res) => void res.status(404).json(NOT_FOUND));
  router.use('/api/v3', api);

  // ---------------------------------------------------------------- web pages
  router.get('/', (_req, res) => {
    const issues = store.listIssues().slice(-20).reverse();
    page(
      res,
      200,
      'Home',
      html`<p>This is a simulated GitHub for development. The broker's GitHub connection talks to it instead of github.com:
sign in here under any login, and issues created through the broker land here.</p>
<p class="meta">Web: <code>${webUrl}</code> · API: <code>${apiUrl}</code></p>
<h2>Recent issues</h2>
${
  issues.length
    ? html`<ul>\n${issues.map((i) => html`<li><a href="${basePath}/${i.owner}/${i.repo}/issues/${i.number}">${i.owner}/${i.repo}#${i.number}</a> ${i.title}</li>\n`)}</ul>`
    : html`<p>No issues yet.</p>`
}`,
    );
  });

  router.get('/:owner/:repo/issues/:number', (req, res) => {
    const number = /^[1-9][0-9]{0,9}$/.test(String(req.params.number)) ? Number(req.params.number) : NaN;
    const issue = Number.isSafeInteger(number) ? store.getIssue(String(req.params.owner), String(req.params.repo), number) : undefined;
    if (!issue) return notFoundPage(res, 'There is no such issue in the sandbox.');
    page(
      res,
      200,
      `${issue.owner}/${issue.repo}#${issue.number}`,
      html`<h2>${issue.title}</h2>
<p class="meta">Opened by <a href="${basePath}/${issue.author}">${issue.author}</a> on ${new Date(issue.createdAt).toISOString()} in the sandbox repository <code>${issue.owner}/${issue.repo}</code>.</p>
${issue.labels.length ? html`<p>${issue.labels.map((l) => html`<span class="label">${l}</span>`)}</p>\n` : ''}${
        issue.body ? html`<pre>${issue.body}</pre>` : html`<p class="meta">No description provided.</p>`
      }`,
    );
  });

  router.get('/:login', (req, res) => {
    const login = String(req.params.login);
    const user = LOGIN_PATTERN.test(login) ? store.findUser(login) : undefined;
    if (!user) return notFoundPage(res, 'There is no such user in the sandbox.');
    const grants = store.listGrants(user.login);
    const repositories = store.listRepositories().filter((r) => administers(r, user.login));
    const revokeAction = (clientId: string) =>
      `${basePath}/${encodeURIComponent(user.login)}/applications/${encodeURIComponent(clientId)}/revoke`;
    page(
      res,
      200,
      user.login,
      html`<p>${user.name} · user id <code>${user.id}</code></p>
<h2>Authorized applications</h2>
${
  grants.length
    ? html`<ul class="grants">\n${grants.map((g) => {
        const client = findClient(g.clientId);
        const what = kindOf(client) === 'github-app' ? 'GitHub App' : `scopes: ${g.scopes.join(', ') || 'none'}`;
        return html`<li><strong>${client?.name ?? g.clientId}</strong> <span class="meta">(${what})</span>
<form method="post" action="${revokeAction(g.clientId)}" class="inline"><button type="submit">Revoke</button></form></li>\n`;
      })}</ul>
<p class="meta">Revoking ends the application's access at once: its next call is refused, and the broker asks you to reconnect.</p>`
    : html`<p>None.</p>`
}
<h2>Repositories you administer</h2>
${
  repositories.length
    ? html`<ul>\n${repositories.map((r) => html`<li><code>${r.owner}/${r.name}</code>${sameLogin(r.owner, user.login) ? '' : html` <span class="meta">(you created it)</span>`}</li>\n`)}</ul>`
    : html`<p>None yet.</p>`
}
<p class="meta">Any <code>owner/repo</code> works for issues: the first issue filed creates the repository, and its creator administers it (and may delete it).</p>`,
    );
  });

  // A revoke from the user's own page: a form of this origin only (no cross-site request revokes anything).
  router.post('/:login/applications/:client_id/revoke', (req, res) => {
    if (!sameOriginForm(req, webUrl)) return page(res, 403, 'Forbidden', html`<p>That form did not come from this page.</p>`);
    const login = String(req.params.login);
    const user = LOGIN_PATTERN.test(login) ? store.findUser(login) : undefined;
    const clientId = String(req.params.client_id);
    if (!user || !store.findGrant(clientId, user.login)) return notFoundPage(res, 'There is no such authorization.');
    store.revokeGrant(clientId, user.login, now());
    res.redirect(303, `${basePath}/${encodeURIComponent(user.login)}`);
  });

  // ---------------------------------------------------------------- fallbacks
  router.use((_req, res) => notFoundPage(res));
  router.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const raw = (err as { status?: unknown }).status;
    const status = typeof raw === 'number' && raw >= 400 && raw <= 599 ? raw : 500;
    if (res.headersSent) return void res.end();
    if (req.path.startsWith('/api/v3/') || req.path === '/api/v3') {
      res.status(status).json({ message: status === 400 ? 'Problems parsing JSON' : 'Server Error' });
    } else {
      page(res, status, status === 400 ? 'Bad request' : 'Server error', html`<p>The request could not be processed.</p>`);
    }
  });

  return {
    router,
    webUrl,
    apiUrl,
    mcpUrl: mcp.url,
    mcpCalls: () => mcp.calls(),
    issueToken(clientId, login, opts = {}) {
      const client = findClient(clientId);
      if (!client) throw new Error(`No client ${clientId} is registered at the sandbox GitHub.`);
      if (!LOGIN_PATTERN.test(login)) throw new Error('That is not a valid GitHub login.');
      const user = store.ensureUser(login);
      return mint(client, user.login, opts.scopes ?? [], opts.expiresInSeconds).issued;
    },
    expireAccessTokens: (login, clientId) => store.expireTokens(now(), login, clientId),
  };
}

const sameLogin = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

/** A form posted from a page of this origin: its Origin header, or where a browser sends none, Sec-Fetch-Site. */
function sameOriginForm(req: Request, webUrl: string): boolean {
  const origin = req.get('origin');
  if (origin !== undefined) return origin === new URL(webUrl).origin;
  return req.get('sec-fetch-site') === 'same-origin';
}
