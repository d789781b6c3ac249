// A loopback stand-in for the broker's RFC 8693 token endpoint (issue 12 § "The exchange"), for
// the helper's tests while the real endpoint lives on another branch. It follows the wire
// format: Basic or private_key_jwt client authentication, the subject token verified against the
// IdP's JWKS and the service's audiences, `interaction_required` with a principal-bound
// `connect_request`, and the held repeat with `connect_request` + `wait`.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import { idpTokenVerifier } from '../../examples/issue-service/bearer.js';

export type Settlement = 'completed' | 'cancelled' | 'denied' | 'account_linked_elsewhere';

interface Pending {
  id: string;
  principal: string;
  service: string;
  scopes: string[];
  status: 'open' | Settlement;
  waiters: Array<() => void>;
}

export interface StandInService {
  id: string;
  secret?: string;
  /** For private_key_jwt: the service's public keys. */
  jwks?: JSONWebKeySet;
  audiences: string[];
  allow: Record<string, string[]>;
}

export interface TokenRequestSeen {
  service: string;
  fields: Record<string, string>;
}

export interface BrokerTokenStandIn {
  url: string;
  tokenEndpoint: string;
  /** Each authenticated request's form fields, with subject_token, client_assertion redacted. */
  requests: TokenRequestSeen[];
  /** Connects `principal` (iss\0sub) to GitHub with `token`. */
  connect(principal: string, connection: { token: string; scopes: string[]; login: string }): void;
  /** Settles a pending connect request, as the user's browser flow would. */
  settle(connectRequest: string, outcome: Settlement, connection?: { token: string; login: string }): void;
  pendingIds(): string[];
  /** Force the next answer for any request (e.g. a 429 or an odd body). */
  override?: { status: number; body: unknown; headers?: Record<string, string> } | undefined;
  close(): Promise<void>;
}

const GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS = 'urn:ietf:params:oauth:token-type:access_token';
const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

export async function startBrokerTokenStandIn(opts: { issuer: string; services: StandInService[] }): Promise<BrokerTokenStandIn> {
  const connections = new Map<string, { token: string; scopes: string[]; login: string }>();
  const pending = new Map<string, Pending>();
  const usedJti = new Set<string>();
  const verifiers = new Map(opts.services.map((s) => [s.id, s.audiences.map((a) => idpTokenVerifier(opts.issuer, a))]));
  let base = '';

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
    res.end(JSON.stringify(body));
  };
  const oauthError = (error: string, description?: string) => ({ error, ...(description ? { error_description: description } : {}) });

  const authenticate = async (
    header: string | undefined,
    form: URLSearchParams,
  ): Promise<{ service: StandInService } | { basic: boolean; error: string }> => {
    if (header?.startsWith('Basic ')) {
      const [rawId, rawSecret] = Buffer.from(header.slice(6), 'base64').toString('utf8').split(':');
      const id = decodeURIComponent((rawId ?? '').replace(/\+/g, ' '));
      const secret = decodeURIComponent((rawSecret ?? '').replace(/\+/g, ' '));
      const service = opts.services.find((s) => s.id === id);
      const a = Buffer.from(secret);
      const b = Buffer.from(service?.secret ?? '');
      if (service?.secret && a.length === b.length && timingSafeEqual(a, b)) return { service };
      return { basic: true, error: 'client authentication failed' };
    }
    if (form.get('client_assertion_type') === ASSERTION_TYPE) {
      const id = form.get('client_id') ?? '';
      const service = opts.services.find((s) => s.id === id && s.jwks);
      if (!service) return { basic: false, error: 'unknown client' };
      try {
        const { payload } = await jwtVerify(form.get('client_assertion') ?? '', createLocalJWKSet(service.jwks!), {
          issuer: id,
          subject: id,
          audience: [`${base}/oauth/token`, base],
          requiredClaims: ['exp', 'jti'],
        });
        if (usedJti.has(payload.jti!)) return { basic: false, error: 'assertion replayed' };
        usedJti.add(payload.jti!);
        return { service };
      } catch {
        return { basic: false, error: 'assertion not valid' };
      }
    }
    return { basic: false, error: 'no client authentication' };
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        if (req.method !== 'POST' || req.url !== '/oauth/token') return send(res, 404, { error: 'not_found' });
        const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
        if (standIn.override) {
          // Still recorded, unauthenticated, so a test can see what the helper sent.
          standIn.requests.push({ service: '(override)', fields: redacted(form) });
          return send(res, standIn.override.status, standIn.override.body, standIn.override.headers);
        }
        const who = await authenticate(req.headers.authorization, form);
        if (!('service' in who))
          return send(res, 401, oauthError('invalid_client', who.error), who.basic ? { 'www-authenticate': 'Basic' } : {});
        const { service } = who;
        const fields = redacted(form);
        standIn.requests.push({ service: service.id, fields });

        if (form.get('grant_type') !== GRANT) return send(res, 400, oauthError('unsupported_grant_type'));
        if (form.get('subject_token_type') !== ACCESS || !form.get('subject_token'))
          return send(res, 400, oauthError('invalid_request', 'subject_token and subject_token_type are required'));
        let principal: string | undefined;
        for (const v of verifiers.get(service.id) ?? []) {
          try {
            const info = await v.verifyAccessToken(form.get('subject_token')!);
            principal = `${String(info.extra!.iss)}\0${String(info.extra!.sub)}`;
            break;
          } catch {
            // try the next audience
          }
        }
        if (!principal) return send(res, 400, oauthError('invalid_grant', 'the subject token is not valid for this service'));
        const provider = form.get('audience') ?? '';
        const allowed = service.allow[provider];
        if (!allowed) return send(res, 400, oauthError('invalid_target', `unknown or not allowed provider: ${provider}`));
        const scopes = (form.get('scope') ?? '').split(' ').filter(Boolean);
        if (scopes.some((s) => !allowed.includes(s)))
          return send(res, 400, oauthError('invalid_scope', 'beyond what this service may obtain'));

        const success = () => {
          const c = connections.get(principal!)!;
          return send(res, 200, {
            access_token: c.token,
            issued_token_type: ACCESS,
            token_type: 'Bearer',
            expires_in: 3600,
            scope: c.scopes.join(' '),
            account_login: c.login,
          });
        };
        const ask = (p: Pending) =>
          send(res, 400, {
            error: 'interaction_required',
            reason: 'not_connected',
            missing_scopes: p.scopes,
            connect_uri: `${base}/connect/github?req=${p.id}`,
            connect_request: p.id,
          });

        const cr = form.get('connect_request');
        if (cr) {
          const p = pending.get(cr);
          if (!p || p.principal !== principal || p.service !== service.id)
            return send(res, 400, oauthError('invalid_grant', 'unknown connect_request'));
          const wait = Math.min(50, Math.max(0, Number(form.get('wait') ?? 0) || 0));
          if (p.status === 'open' && wait > 0) {
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, wait * 1000);
              p.waiters.push(() => {
                clearTimeout(timer);
                resolve();
              });
            });
          }
          if (p.status === 'completed') return success();
          if (p.status === 'open') return ask(p);
          return send(res, 400, { error: 'access_denied', reason: p.status });
        }
        const c = connections.get(principal);
        if (c && scopes.every((s) => c.scopes.includes(s))) return success();
        const p: Pending = {
          id: randomBytes(16).toString('base64url'),
          principal,
          service: service.id,
          scopes,
          status: 'open',
          waiters: [],
        };
        pending.set(p.id, p);
        return ask(p);
      })().catch(() => send(res, 500, { error: 'server_error' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const standIn: BrokerTokenStandIn = {
    url: base,
    tokenEndpoint: `${base}/oauth/token`,
    requests: [],
    connect: (principal, connection) => connections.set(principal, connection),
    settle(id, outcome, connection) {
      const p = pending.get(id);
      if (!p) throw new Error(`no pending connect request ${id}`);
      p.status = outcome;
      if (outcome === 'completed') connections.set(p.principal, { token: connection!.token, scopes: p.scopes, login: connection!.login });
      for (const w of p.waiters.splice(0)) w();
    },
    pendingIds: () => [...pending.keys()],
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  return standIn;
}

/** A request's form fields as a test may see them: the tokens and assertions replaced. */
function redacted(form: URLSearchParams): Record<string, string> {
  const fields = Object.fromEntries(form);
  for (const k of ['subject_token', 'client_assertion']) if (k in fields) fields[k] = '[redacted]';
  return fields;
}
