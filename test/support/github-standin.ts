// A loopback stand-in for GitHub (OAuth web flow + a sliver of the REST API), used by tests
// because the real GitHub is unreachable. It follows /work/shared/reference/github.md:
// token-endpoint errors come back as HTTP 200 with an `error` field, the token response is
// form-encoded unless `Accept: application/json`, PKCE is S256-only and optional, and the
// REST API lives under /api/v3 (GitHub Enterprise Server layout). It never logs tokens.
import { createHash, randomBytes, randomInt } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import type { NextFunction, Request, Response } from 'express';

export interface StandInOptions {
  clientId?: string; // default 'Iv1.standin'
  clientSecret?: string; // default: 40 random hex characters
  now?: () => number; // clock in ms, for code expiry and rate-limit windows (default Date.now)
}

/** Faults are sticky: they apply to every matching request until cleared (set the field to undefined). */
export interface StandInFaults {
  token?: 'http500' | 'timeout' | 'malformed' | 'error200';
  api?: 401 | 403 | 429 | 500;
}

export interface StandInIssue {
  owner: string; repo: string; number: number; title: string; body: string | null;
  labels: string[]; author: string; html_url: string;
}

export interface GitHubStandIn {
  webUrl: string;
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  requests: Array<{ method: string; path: string; at: number }>;
  issues: StandInIssue[];
  faults: StandInFaults;
  users: Map<string, { id: number; login: string; name: string }>;
  revokedGrants: Array<{ clientId: string; login: string }>;
  activeTokenCount(login?: string): number;
  close(): Promise<void>;
}

interface CodeGrant {
  clientId: string; redirectUri: string; challenge: string | undefined;
  scopes: string[]; login: string; expiresAt: number;
}
interface TokenRecord { clientId: string; login: string; scopes: string[]; issuedAt: number; seq: number }

const CODE_TTL_MS = 10 * 60 * 1000;
const MAX_TOKENS_PER_USER_APP_SCOPE = 10; // GitHub: older tokens stop working beyond this
const RATE_LIMIT = 5000;
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

const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const base64url = (buf: Buffer): string => buf.toString('base64url');
const parseScopes = (raw: string | undefined): string[] =>
  [...new Set((raw ?? '').split(/[\s,]+/).filter(Boolean))];

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

function page(res: Response, status: number, title: string, bodyHtml: string): void {
  res.status(status)
    .set('Content-Security-Policy', "default-src 'none'")
    .type('html')
    .send(`<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head>\n` +
      `<body>\n<h1>${escapeHtml(title)}</h1>\n${bodyHtml}\n</body></html>\n`);
}

export async function startGitHubStandIn(options: StandInOptions = {}): Promise<GitHubStandIn> {
  const clientId = options.clientId ?? 'Iv1.standin';
  const clientSecret = options.clientSecret ?? randomBytes(20).toString('hex');
  const now = options.now ?? Date.now;
  const codes = new Map<string, CodeGrant>();
  const tokens = new Map<string, TokenRecord>();
  const issueCounters = new Map<string, number>();
  const rate = new Map<string, { used: number; resetAt: number }>(); // per login
  let nextUserId = 1000;
  let nextIssueId = 1;
  let tokenSeq = 0;

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const server: Server = await new Promise((resolve, reject) => {
    const s = app.listen(0, '127.0.0.1', (err?: Error) => (err ? reject(err) : resolve(s)));
  });
  const webUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const standIn: GitHubStandIn = {
    webUrl,
    apiUrl: `${webUrl}/api/v3`,
    clientId,
    clientSecret,
    requests: [],
    issues: [],
    faults: {},
    users: new Map([
      ['octocat', { id: 583231, login: 'octocat', name: 'The Octocat' }],
      ['hubot', { id: 2, login: 'hubot', name: 'Hubot' }],
      ['monalisa', { id: 3, login: 'monalisa', name: 'Mona Lisa Octocat' }],
    ]),
    revokedGrants: [],
    activeTokenCount: (login) =>
      [...tokens.values()].filter((t) => login === undefined || t.login.toLowerCase() === login.toLowerCase()).length,
    close: () => new Promise<void>((resolve, reject) => {
      server.close((err) => (err ? reject(err) : resolve()));
      server.closeAllConnections(); // also ends requests parked by the 'timeout' fault
    }),
  };

  const findUser = (login: string) =>
    standIn.users.get(login) ?? [...standIn.users.values()].find((u) => u.login.toLowerCase() === login.toLowerCase());

  // Record every request before anything else handles it (path only: never the query, never tokens).
  app.use((req, _res, next) => {
    standIn.requests.push({ method: req.method, path: req.originalUrl.split('?')[0]!, at: now() });
    next();
  });
  app.use(express.urlencoded({ extended: false }), express.json());

  // ---------------------------------------------------------------- web flow: authorize
  app.get('/login/oauth/authorize', (req, res) => {
    const params = new URL(req.originalUrl, webUrl).searchParams;
    if (params.get('client_id') !== clientId) {
      return page(res, 404, 'Page not found', '<p>No application is registered with this client_id.</p>');
    }
    if (!params.get('redirect_uri')) {
      return page(res, 400, 'Bad request', '<p>The redirect_uri parameter is missing.</p>');
    }
    const hidden = [...params.entries()]
      .filter(([name]) => name !== 'login' && name !== 'decision')
      .map(([name, value]) => `  <input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
      .join('\n');
    const scopes = parseScopes(params.get('scope') ?? undefined);
    page(res, 200, 'GitHub stand-in — Authorize application', [
      `<p>Application <code>${escapeHtml(clientId)}</code> requests access` +
        (scopes.length ? ` with scopes: <code>${escapeHtml(scopes.join(', '))}</code>.` : ' (no scopes).') + '</p>',
      '<form method="post" action="/login/oauth/authorize">',
      hidden,
      '  <label for="login">Sign in as</label>',
      `  <input type="text" id="login" name="login" value="${escapeHtml(params.get('login') || 'octocat')}">`,
      '  <button type="submit" name="decision" value="authorize">Authorize</button>',
      '  <button type="submit" name="decision" value="cancel">Cancel</button>',
      '</form>',
    ].join('\n'));
  });

  app.post('/login/oauth/authorize', (req, res) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (str(body.client_id) !== clientId) {
      return page(res, 404, 'Page not found', '<p>No application is registered with this client_id.</p>');
    }
    const redirectUri = str(body.redirect_uri);
    let target: URL;
    try { target = new URL(redirectUri ?? ''); } catch {
      return page(res, 400, 'Bad request', '<p>The redirect_uri parameter is missing or invalid.</p>');
    }
    const state = str(body.state);
    const redirect = (params: Record<string, string>) => {
      for (const [k, v] of Object.entries(params)) target.searchParams.set(k, v);
      if (state !== undefined) target.searchParams.set('state', state);
      res.redirect(302, target.href);
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
    if (!/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/.test(login)) {
      return page(res, 400, 'Bad request', '<p>That is not a valid GitHub login.</p>');
    }
    let user = findUser(login);
    if (!user) {
      user = { id: nextUserId++, login, name: login };
      standIn.users.set(login, user);
    }
    const code = randomBytes(10).toString('hex');
    codes.set(code, {
      clientId, redirectUri: redirectUri!, challenge: str(body.code_challenge) || undefined,
      scopes: parseScopes(str(body.scope)), login: user.login, expiresAt: now() + CODE_TTL_MS,
    });
    redirect({ code });
  });

  // ---------------------------------------------------------------- web flow: token exchange
  app.post('/login/oauth/access_token', (req, res) => {
    const wantsJson = (req.get('accept') ?? '').includes('application/json');
    const answer = (fields: Record<string, string>) => {
      if (wantsJson) res.status(200).json(fields);
      else res.status(200).type('application/x-www-form-urlencoded; charset=utf-8').send(new URLSearchParams(fields).toString());
    };
    const fail = (error: string) => answer({
      error, error_description: TOKEN_ERRORS[error]!, error_uri: `${TOKEN_ERROR_URI}#${error.replace(/_/g, '-')}`,
    });

    switch (standIn.faults.token) {
      case 'http500': return void res.status(500).type('html').send('<!doctype html><title>500</title><h1>Whoa there!</h1><p>Server error.</p>');
      case 'timeout': return; // never answer; close() tears the socket down
      case 'malformed': return void res.status(200).type('application/json').send('{"access_token": ');
      case 'error200': return fail('bad_verification_code');
    }

    const body = (req.body ?? {}) as Record<string, unknown>;
    const basic = basicCredentials(req);
    const id = basic?.id ?? str(body.client_id);
    const secret = basic?.secret ?? str(body.client_secret);
    if (id !== clientId || secret !== clientSecret) return fail('incorrect_client_credentials');
    const grantType = str(body.grant_type);
    if (grantType !== undefined && grantType !== 'authorization_code') return fail('unsupported_grant_type');

    const code = str(body.code) ?? '';
    const grant = codes.get(code);
    if (!grant) return fail('bad_verification_code');
    // A code is burned by the first exchange attempt that presents it, successful or not.
    codes.delete(code);
    if (grant.expiresAt <= now() || grant.clientId !== id) return fail('bad_verification_code');
    const redirectUri = str(body.redirect_uri);
    if (redirectUri && redirectUri !== grant.redirectUri) return fail('redirect_uri_mismatch');
    if (grant.challenge !== undefined) {
      const verifier = str(body.code_verifier);
      if (!verifier || base64url(createHash('sha256').update(verifier).digest()) !== grant.challenge) {
        return fail('bad_verification_code');
      }
    }

    const accessToken = `gho_${randomAlnum(36)}`;
    tokens.set(accessToken, { clientId, login: grant.login, scopes: grant.scopes, issuedAt: now(), seq: tokenSeq++ });
    // GitHub keeps at most 10 tokens per user/app/scope set; the oldest stop working.
    const sameKind = [...tokens.entries()]
      .filter(([, t]) => t.login === grant.login && t.clientId === clientId && t.scopes.join() === grant.scopes.join())
      .sort(([, a], [, b]) => a.seq - b.seq);
    for (const [old] of sameKind.slice(0, Math.max(0, sameKind.length - MAX_TOKENS_PER_USER_APP_SCOPE))) tokens.delete(old);
    answer({ access_token: accessToken, token_type: 'bearer', scope: grant.scopes.join(',') });
  });

  // ---------------------------------------------------------------- REST API under /api/v3
  const api = express.Router();

  const rateHeaders = (res: Response, login: string | undefined, count: boolean) => {
    const key = login ?? '';
    let r = rate.get(key);
    if (!r || r.resetAt * 1000 <= now()) rate.set(key, (r = { used: 0, resetAt: Math.ceil(now() / 1000) + 3600 }));
    if (count) r.used = Math.min(RATE_LIMIT, r.used + 1);
    res.set({
      'X-RateLimit-Limit': String(RATE_LIMIT), 'X-RateLimit-Remaining': String(RATE_LIMIT - r.used),
      'X-RateLimit-Reset': String(r.resetAt), 'X-RateLimit-Used': String(r.used), 'X-RateLimit-Resource': 'core',
    });
  };

  api.use((_req, res, next) => {
    switch (standIn.faults.api) {
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
    if (!basic || basic.id !== clientId || basic.secret !== clientSecret) return void res.status(401).json(BAD_CREDENTIALS);
    if (req.params.client_id !== clientId) return void res.status(404).json(NOT_FOUND);
    const accessToken = str(((req.body ?? {}) as Record<string, unknown>).access_token);
    const record = accessToken === undefined ? undefined : tokens.get(accessToken);
    if (!record || record.clientId !== clientId) return void res.status(404).json(NOT_FOUND);
    if (scope === 'token') {
      tokens.delete(accessToken!);
    } else {
      for (const [t, r] of tokens) if (r.login === record.login && r.clientId === clientId) tokens.delete(t);
      for (const [c, g] of codes) if (g.login === record.login && g.clientId === clientId) codes.delete(c);
      standIn.revokedGrants.push({ clientId, login: record.login });
    }
    res.status(204).end();
  };
  api.delete('/applications/:client_id/grant', revoke('grant'));
  api.delete('/applications/:client_id/token', revoke('token'));

  // Everything else needs a user token.
  api.use((req, res, next) => {
    const m = /^(?:Bearer|token)\s+(\S+)$/i.exec(req.get('authorization') ?? '');
    const record = m ? tokens.get(m[1]!) : undefined;
    const user = record && findUser(record.login);
    if (!record || !user) return void res.status(401).json(BAD_CREDENTIALS);
    res.locals.user = user;
    rateHeaders(res, user.login, true);
    res.set('X-OAuth-Scopes', record.scopes.join(', '));
    next();
  });

  api.get('/user', (_req, res) => {
    const { id, login, name } = res.locals.user as { id: number; login: string; name: string };
    res.json({
      login, id, node_id: Buffer.from(`04:User${id}`).toString('base64'), name,
      html_url: `${webUrl}/${login}`, type: 'User',
    });
  });

  api.post('/repos/:owner/:repo/issues', (req, res) => {
    const owner = String(req.params.owner);
    const repo = String(req.params.repo);
    const user = res.locals.user as { id: number; login: string };
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

    const key = `${owner.toLowerCase()}/${repo.toLowerCase()}`;
    const number = (issueCounters.get(key) ?? 0) + 1;
    issueCounters.set(key, number);
    const id = nextIssueId++;
    const issue: StandInIssue = {
      owner, repo, number, title: body.title, body: (body.body as string | null | undefined) ?? null,
      labels: [...labels], author: user.login, html_url: `${webUrl}/${owner}/${repo}/issues/${number}`,
    };
    standIn.issues.push(issue);
    res.status(201).set('Location', `${standIn.apiUrl}/repos/${owner}/${repo}/issues/${number}`).json({
      id, node_id: Buffer.from(`05:Issue${id}`).toString('base64'), number, title: issue.title, body: issue.body,
      state: 'open', url: `${standIn.apiUrl}/repos/${owner}/${repo}/issues/${number}`, html_url: issue.html_url,
      labels: issue.labels.map((name) => ({ name })), user: { login: user.login, id: user.id },
      created_at: new Date(now()).toISOString(),
    });
  });

  api.use((_req, res) => void res.status(404).json(NOT_FOUND));
  app.use('/api/v3', api);

  // ---------------------------------------------------------------- fallbacks
  app.use((_req, res) => page(res, 404, 'Page not found', '<p>Not Found</p>'));
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const status = (err as { status?: number }).status ?? 500;
    if (req.originalUrl.startsWith('/api/v3')) {
      res.status(status).json({ message: status === 400 ? 'Problems parsing JSON' : 'Server Error' });
    } else {
      page(res, status, status === 400 ? 'Bad request' : 'Server error', '<p>The request could not be processed.</p>');
    }
  });

  return standIn;
}
