// The sandbox GitHub: a simulated GitHub (OAuth web flow + a sliver of the REST API) that
// `npm run dev` serves on the broker's own server when no real GitHub OAuth app is configured, and
// that the tests use as their GitHub stand-in. It follows /work/shared/reference/github.md:
// token-endpoint errors come back as HTTP 200 with an `error` field, the token answer is
// form-encoded unless `Accept: application/json`, PKCE is S256-only and optional, codes are single
// use and live 10 minutes, and the REST API lives under /api/v3 (GitHub Enterprise Server layout).
// Its state (users, codes, tokens, grants, issues) lives in SQLite through SandboxGitHubStore;
// codes and tokens are stored hashed. It never logs, and every response says `X-Sandbox: github`.
import { createHash, randomBytes, randomInt } from 'node:crypto';
import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { constantTimeEqual } from '../../crypto/index.js';
import type { SandboxGitHubStore, SandboxUser } from '../../store/sandbox-github-store.js';
import { STYLESHEET, contentSecurityPolicy, cspOrigin, html, sendPage } from './html.js';

export { SANDBOX_LABEL } from './html.js';

/** Faults are sticky: they apply to every matching request until cleared (set the field to undefined). */
export interface SandboxFaults {
  token?: 'http500' | 'timeout' | 'malformed' | 'error200';
  api?: 401 | 403 | 429 | 500;
}

export interface SandboxClient {
  clientId: string;
  clientSecret: string;
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
  /** Clock in ms, for code expiry, rate-limit windows and timestamps (default Date.now). */
  now?: () => number;
  /** Name in page titles and headings (default 'Sandbox GitHub'); every page also carries SANDBOX_LABEL. */
  siteName?: string;
}

export interface SandboxGitHub {
  router: express.Router;
  /** = publicBase: the "github.com" of the sandbox (authorize page, html_url of users and issues). */
  webUrl: string;
  /** = publicBase + '/api/v3'. */
  apiUrl: string;
}

const CODE_TTL_MS = 10 * 60 * 1000;
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
};
const BAD_CREDENTIALS = { message: 'Bad credentials', documentation_url: `${DOCS}/rest`, status: '401' };
const NOT_FOUND = { message: 'Not Found', documentation_url: `${DOCS}/rest`, status: '404' };

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const parseScopes = (raw: string | undefined): string[] => [...new Set((raw ?? '').split(/[\s,]+/).filter(Boolean))];

function randomAlnum(length: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[randomInt(alphabet.length)];
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
    try { return decodeURIComponent(s.replace(/\+/g, ' ')); } catch { return s; }
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

  const clientSecret = (clientId: string | undefined): string | undefined =>
    clientId === undefined ? undefined : options.clients.find((c) => c.clientId === clientId)?.clientSecret;
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
    res.set('X-Sandbox', 'github')
      .set('Content-Security-Policy', contentSecurityPolicy())
      .set('X-Content-Type-Options', 'nosniff')
      .set('Referrer-Policy', 'no-referrer');
    next();
  });
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
    const scopes = parseScopes(params.get('scope') ?? undefined);
    page(res, 200, 'Authorize application', html`<p>Application <code>${clientId!}</code> requests access${
      scopes.length ? html` with scopes: <code>${scopes.join(', ')}</code>.` : ' (no scopes).'}</p>
<p class="meta">Authorizing will redirect to <code>${target.origin}</code>.</p>
<form method="post" action="${basePath}/login/oauth/authorize">
${hidden}  <label for="login">Sign in as</label>
  <input type="text" id="login" name="login" value="${params.get('login') || 'octocat'}">
  <button type="submit" name="decision" value="authorize">Authorize</button>
  <button type="submit" name="decision" value="cancel">Cancel</button>
</form>`, cspOrigin(target.href));
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
    const code = randomBytes(10).toString('hex');
    store.pruneCodes(now());
    store.putCode(code, {
      clientId: clientId!, redirectUri: redirectUri!, codeChallenge: str(body.code_challenge) || undefined,
      scopes: parseScopes(str(body.scope)), login: user.login, expiresAt: now() + CODE_TTL_MS,
    });
    redirect({ code });
  });

  // ---------------------------------------------------------------- web flow: token exchange
  router.post('/login/oauth/access_token', (req, res) => {
    const wantsJson = (req.get('accept') ?? '').includes('application/json');
    const answer = (fields: Record<string, string>) => {
      res.status(200).set('Cache-Control', 'no-store');
      if (wantsJson) res.json(fields);
      else res.type('application/x-www-form-urlencoded; charset=utf-8').send(new URLSearchParams(fields).toString());
    };
    const fail = (error: string) => answer({
      error, error_description: TOKEN_ERRORS[error]!, error_uri: `${TOKEN_ERROR_URI}#${error.replace(/_/g, '-')}`,
    });

    switch (faults.token) {
      case 'http500': return void res.status(500).type('html').send('<!doctype html><title>500</title><h1>Whoa there!</h1><p>Server error.</p>');
      case 'timeout': return; // never answer (the client's own timeout, or closing the server, ends it)
      case 'malformed': return void res.status(200).type('application/json').send('{"access_token": ');
      case 'error200': return fail('bad_verification_code');
    }

    const body = (req.body ?? {}) as Record<string, unknown>;
    const basic = basicCredentials(req);
    const id = basic?.id ?? str(body.client_id);
    const secret = basic?.secret ?? str(body.client_secret);
    if (!authenticClient(id, secret)) return fail('incorrect_client_credentials');
    const grantType = str(body.grant_type);
    if (grantType !== undefined && grantType !== 'authorization_code') return fail('unsupported_grant_type');

    // A code is burned by the first exchange attempt that presents it, successful or not.
    const grant = store.takeCode(str(body.code) ?? '');
    if (!grant) return fail('bad_verification_code');
    if (grant.expiresAt <= now() || grant.clientId !== id) return fail('bad_verification_code');
    const redirectUri = str(body.redirect_uri);
    if (redirectUri && redirectUri !== grant.redirectUri) return fail('redirect_uri_mismatch');
    if (grant.codeChallenge !== undefined) {
      const verifier = str(body.code_verifier);
      if (!verifier || createHash('sha256').update(verifier).digest('base64url') !== grant.codeChallenge) {
        return fail('bad_verification_code');
      }
    }

    const accessToken = `gho_${randomAlnum(36)}`;
    store.issueToken(accessToken, { clientId: id!, login: grant.login, scopes: grant.scopes, issuedAt: now() }, MAX_TOKENS_PER_USER_APP_SCOPE);
    answer({ access_token: accessToken, token_type: 'bearer', scope: grant.scopes.join(',') });
  });

  // ---------------------------------------------------------------- REST API under /api/v3
  const api = express.Router();

  const rateHeaders = (res: Response, login: string | undefined, count: boolean) => {
    const key = (login ?? '').toLowerCase();
    let r = rate.get(key);
    if (!r || r.resetAt * 1000 <= now()) rate.set(key, (r = { used: 0, resetAt: Math.ceil(now() / 1000) + 3600 }));
    if (count) r.used = Math.min(RATE_LIMIT, r.used + 1);
    res.set({
      'X-RateLimit-Limit': String(RATE_LIMIT), 'X-RateLimit-Remaining': String(RATE_LIMIT - r.used),
      'X-RateLimit-Reset': String(r.resetAt), 'X-RateLimit-Used': String(r.used), 'X-RateLimit-Resource': 'core',
    });
  };

  api.use((_req, res, next) => {
    res.set('Cache-Control', 'no-store');
    switch (faults.api) {
      case 401: return void res.status(401).json(BAD_CREDENTIALS);
      case 403:
        rateHeaders(res, undefined, false);
        res.set({ 'X-RateLimit-Remaining': '0', 'X-RateLimit-Used': String(RATE_LIMIT) });
        return void res.status(403).json({
          message: 'API rate limit exceeded for user ID 1.',
          documentation_url: `${DOCS}/rest/overview/resources-in-the-rest-api#rate-limiting`,
        });
      case 429:
        return void res.status(429).set('Retry-After', '60').json({
          message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
          documentation_url: `${DOCS}/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits`,
        });
      case 500: return void res.status(500).json({ message: 'Server Error' });
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
    if (!record || record.clientId !== basic.id) return void res.status(404).json(NOT_FOUND);
    if (scope === 'token') store.deleteToken(accessToken!);
    else store.revokeGrant(basic.id, record.login, now());
    res.status(204).end();
  };
  api.delete('/applications/:client_id/grant', revoke('grant'));
  api.delete('/applications/:client_id/token', revoke('token'));

  // Everything else needs a user token.
  api.use((req, res, next) => {
    const m = /^(?:Bearer|token)\s+(\S+)$/i.exec(req.get('authorization') ?? '');
    const record = m ? store.findToken(m[1]!) : undefined;
    const user = record && store.findUser(record.login);
    if (!record || !user) return void res.status(401).json(BAD_CREDENTIALS);
    res.locals.user = user;
    rateHeaders(res, user.login, true);
    res.set('X-OAuth-Scopes', record.scopes.join(', '));
    next();
  });

  api.get('/user', (_req, res) => {
    const { id, login, name } = res.locals.user as SandboxUser;
    res.json({
      login, id, node_id: Buffer.from(`04:User${id}`).toString('base64'), name,
      html_url: `${webUrl}/${login}`, type: 'User',
    });
  });

  api.post('/repos/:owner/:repo/issues', (req, res) => {
    const owner = String(req.params.owner);
    const repo = String(req.params.repo);
    const user = res.locals.user as SandboxUser;
    if (owner === 'private-org') return void res.status(404).json(NOT_FOUND);
    if (repo === 'disabled-issues') {
      return void res.status(410).json({ message: 'Issues are disabled for this repo', documentation_url: `${DOCS}/rest/issues/issues#create-an-issue` });
    }
    const body = (req.body ?? {}) as Record<string, unknown>;
    const invalid = (field: string, code: string) => res.status(422).json({
      message: 'Validation Failed', errors: [{ resource: 'Issue', field, code }],
      documentation_url: `${DOCS}/rest/issues/issues#create-an-issue`,
    });
    if (body.title === undefined || body.title === null || body.title === '') return void invalid('title', 'missing_field');
    if (typeof body.title !== 'string') return void invalid('title', 'invalid');
    if (body.body !== undefined && body.body !== null && typeof body.body !== 'string') return void invalid('body', 'invalid');
    const labels = body.labels ?? [];
    if (!Array.isArray(labels) || !labels.every((l): l is string => typeof l === 'string')) return void invalid('labels', 'invalid');

    const issue = store.createIssue({
      owner, repo, title: body.title, body: (body.body as string | null | undefined) ?? null,
      labels: [...labels], author: user.login, createdAt: now(),
    });
    const url = `${apiUrl}/repos/${owner}/${repo}/issues/${issue.number}`;
    res.status(201).set('Location', url).json({
      id: issue.id, node_id: Buffer.from(`05:Issue${issue.id}`).toString('base64'), number: issue.number,
      title: issue.title, body: issue.body, state: 'open', url, html_url: `${webUrl}/${owner}/${repo}/issues/${issue.number}`,
      labels: issue.labels.map((name) => ({ name })), user: { login: user.login, id: user.id },
      created_at: new Date(issue.createdAt).toISOString(),
    });
  });

  api.use((_req, res) => void res.status(404).json(NOT_FOUND));
  router.use('/api/v3', api);

  // ---------------------------------------------------------------- web pages
  router.get('/', (_req, res) => {
    const issues = store.listIssues().slice(-20).reverse();
    page(res, 200, 'Home', html`<p>This is a simulated GitHub for development. The broker's GitHub connection talks to it instead of github.com:
sign in here under any login, and issues created through the broker land here.</p>
<p class="meta">Web: <code>${webUrl}</code> · API: <code>${apiUrl}</code></p>
<h2>Recent issues</h2>
${issues.length
    ? html`<ul>\n${issues.map((i) => html`<li><a href="${basePath}/${i.owner}/${i.repo}/issues/${i.number}">${i.owner}/${i.repo}#${i.number}</a> ${i.title}</li>\n`)}</ul>`
    : html`<p>No issues yet.</p>`}`);
  });

  router.get('/:owner/:repo/issues/:number', (req, res) => {
    const number = /^[1-9][0-9]{0,9}$/.test(String(req.params.number)) ? Number(req.params.number) : NaN;
    const issue = Number.isSafeInteger(number) ? store.getIssue(String(req.params.owner), String(req.params.repo), number) : undefined;
    if (!issue) return notFoundPage(res, 'There is no such issue in the sandbox.');
    page(res, 200, `${issue.owner}/${issue.repo}#${issue.number}`, html`<h2>${issue.title}</h2>
<p class="meta">Opened by <a href="${basePath}/${issue.author}">${issue.author}</a> on ${new Date(issue.createdAt).toISOString()} in the sandbox repository <code>${issue.owner}/${issue.repo}</code>.</p>
${issue.labels.length ? html`<p>${issue.labels.map((l) => html`<span class="label">${l}</span>`)}</p>\n` : ''}${
  issue.body ? html`<pre>${issue.body}</pre>` : html`<p class="meta">No description provided.</p>`}`);
  });

  router.get('/:login', (req, res) => {
    const login = String(req.params.login);
    const user = LOGIN_PATTERN.test(login) ? store.findUser(login) : undefined;
    if (!user) return notFoundPage(res, 'There is no such user in the sandbox.');
    const grants = store.listGrants(user.login);
    page(res, 200, user.login, html`<p>${user.name} · user id <code>${user.id}</code></p>
<h2>Authorized applications</h2>
${grants.length
    ? html`<ul>\n${grants.map((g) => html`<li><code>${g.clientId}</code> (scopes: ${g.scopes.join(', ') || 'none'})</li>\n`)}</ul>`
    : html`<p>None.</p>`}`);
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

  return { router, webUrl, apiUrl };
}
