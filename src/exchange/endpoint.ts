import express, { type ErrorRequestHandler, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { OAuthError } from '@modelcontextprotocol/server';
import { decodeJwt } from 'jose';
import {
  ASYMMETRIC_ALGORITHMS,
  claimsFromAuthInfo,
  IdentityProviderUnavailable,
  principalFromAuthInfo,
  type AccessTokenVerifier,
} from '../auth/bearer.js';
import { samePrincipal, type Principal } from '../auth/principal.js';
import type { CompletionWatcher } from '../connections/completion-watcher.js';
import { UsageMarks, type ConnectionService, type OpenConnection } from '../connections/index.js';
import type { ConnectLinks } from '../connections/links.js';
import { ConnectionRead, resolveConnection, type AskReason, type Resolution } from '../connections/resolve.js';
import { deriveKey, sha256Base64url } from '../crypto/index.js';
import type { ApprovalGate, Policy, PolicyInput } from '../policy/index.js';
import { changeWithEvent } from '../events/index.js';
import { clientAddress, failedAuthenticationLimit, serviceRateLimit, type CounterStore } from '../http/rate-limits.js';
import { clientLeft } from '../http/web-adapter.js';
import type { Logger } from '../log.js';
import { ProviderError, type Provider } from '../providers/provider.js';
import { StoreUnavailableError, type PendingConnection, type Store } from '../store/index.js';
import { claimedClientId, ClientAuthenticator, JWT_BEARER_ASSERTION } from './client-auth.js';
import { ConnectRequests } from './connect-request.js';
import { ExchangeError } from './errors.js';
import { M } from './messages.js';
import { metrics } from '../observability/metrics.js';
import type { ConfiguredService } from '../config/services.js';
import { scopeList } from '../providers/scopes.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
export const TOKEN_PATH = '/oauth/token';
const MAX_WAIT_SECONDS = 50;

export interface ExchangeDeps {
  publicUrl: URL;
  services: readonly ConfiguredService[];
  providers: ReadonlyMap<string, Provider>;
  /** A provider's API base URL → its id, for `resource=`. */
  resources: ReadonlyMap<string, string>;
  verifier: AccessTokenVerifier;
  store: Store;
  /** The per-service limit's counters: `store`'s, counted in this process first (src/http/reconciled-counters.ts). */
  loadCounters: CounterStore;
  connections: ConnectionService;
  watcher: CompletionWatcher;
  links: ConnectLinks;
  brokerSecret: Buffer;
  rateLimitPerMinute: number;
  /**
   * Failed client authentications per minute (the page limit, RATE_LIMIT_PER_MINUTE; 0 = off), per
   * declared service and client address, and per client address for every other client id.
   */
  authFailuresPerMinute: number;
  log: Logger;
  /** Who may get whose token (PROVIDERS_FILE `policy:`): a service's request is a call too (docs/policy.md). */
  policy?: Policy;
  /** Holds an exchange an `approve` rule names until people agree; without it such exchanges are refused. */
  approvals?: ApprovalGate;
}

/** The arguments digest an exchange's approval is bound to: an exchange has no arguments. */
const NO_ARGS_DIGEST = sha256Base64url('{}');

/** What one exchange request asks for, once parsed, authenticated and checked. */
interface Ask {
  service: ConfiguredService;
  principal: Principal;
  /** The verified subject token's claims (policy conditions read them as `principal.claims`). */
  claims: Record<string, unknown>;
  provider: Provider;
  scopes: string[];
  connectRequest: string | undefined;
  waitSeconds: number;
}

/** The issuer identifier of the broker as an authorization server (RFC 8414): PUBLIC_URL without its slash. */
export function issuerIdentifier(publicUrl: URL): string {
  return publicUrl.origin;
}

/**
 * `POST /oauth/token` (RFC 8693) and its RFC 8414 metadata. Server to server: no cookies, no Origin
 * check (the Host guard in front still applies). Each step below either fills in the request or
 * throws an {@link ExchangeError} that becomes the RFC 6749 §5.2 JSON answer.
 */
export function exchangeRoutes(deps: ExchangeDeps): express.Router {
  const router = express.Router({ caseSensitive: true, strict: true });
  const tokenEndpoint = new URL(TOKEN_PATH, deps.publicUrl).href;
  const issuer = issuerIdentifier(deps.publicUrl);
  const services = new Map(deps.services.map((s) => [s.id, s]));
  const clients = new ClientAuthenticator({
    services,
    store: deps.store,
    assertionAudiences: [tokenEndpoint, issuer, `${issuer}/`],
  });
  const connectRequests = new ConnectRequests(deriveKey(deps.brokerSecret, 'exchange-connect-request'));
  const usage = new UsageMarks();
  const auditFailed = (event: string) => (err: unknown) =>
    deps.log.warn('audit_write_failed', { event, message: err instanceof Error ? err.message : String(err) });
  const audit = (event: 'token_exchanged', p: Principal, provider: string, detail: string) =>
    deps.store.audit.record(event, p, provider, detail).catch(auditFailed(event));
  /**
   * A refusal of an authenticated service: its audit row, and `exchange.refused` in the same
   * transaction when a webhook endpoint wants it (src/events/). Never reached before the client
   * authenticated, so an anonymous flood writes no row; an authenticated one is held to the
   * service's rate limit first.
   */
  const refused = (service: string, reason: string, p: Principal | undefined, provider: string | undefined) =>
    changeWithEvent(deps.store, deps.connections.events, 'exchange.refused', async (repositories, emit) => {
      await repositories.audit.record('token_exchange_refused', p, provider, `service=${service} reason=${reason}`);
      await emit?.('exchange.refused', { service, reason, ...(p ? { principal: { issuer: p.issuer, subject: p.subject } } : {}) });
    }).catch(auditFailed('token_exchange_refused'));

  router.get('/.well-known/oauth-authorization-server', (_req, res) => {
    res
      .set('Access-Control-Allow-Origin', '*')
      .set('Cache-Control', 'public, max-age=300')
      .json({
        issuer,
        token_endpoint: tokenEndpoint,
        grant_types_supported: [TOKEN_EXCHANGE_GRANT],
        token_endpoint_auth_methods_supported: ['client_secret_basic', 'private_key_jwt'],
        token_endpoint_auth_signing_alg_values_supported: [...ASYMMETRIC_ALGORITHMS],
        response_types_supported: [],
      });
  });

  // Step 1: the form, exactly once per parameter.
  const readForm: RequestHandler = (req, res, next) => {
    if (!req.is('application/x-www-form-urlencoded')) throw new ExchangeError('invalid_request', M.contentType);
    const form = new Map<string, string>();
    for (const [name, value] of new URLSearchParams(typeof req.body === 'string' ? req.body : '')) {
      if (form.has(name)) throw new ExchangeError('invalid_request', M.duplicate(name));
      form.set(name, value);
    }
    res.locals.form = form;
    next();
  };

  // Step 2: a bound on guessing, counted before any credential is checked. A declared service's
  // failures count per service and address, so a guesser elsewhere (or guessing another id) never
  // spends a working service's budget; every other id shares its address's one budget, so made-up
  // ids neither multiply the guesses nor the counters.
  const failures = failedAuthenticationLimit(
    'client-auth-failures',
    deps.authFailuresPerMinute,
    deps.store,
    deriveKey(deps.brokerSecret, 'rate-limit'),
    (retryAfter) => ({
      error: 'rate_limited',
      error_description: `${M.authFailuresLimited} Retry after ${retryAfter} s.`,
    }),
    (req, res) => {
      const claimed = claimedClientId(req.headers.authorization, res.locals.form as Map<string, string>);
      return JSON.stringify(claimed !== undefined && services.has(claimed) ? [claimed, clientAddress(req)] : [clientAddress(req)]);
    },
  );

  // Step 3: the grant type, then who is calling.
  const authenticate: RequestHandler = async (req, res, next) => {
    const form = res.locals.form as Map<string, string>;
    const grant = form.get('grant_type');
    if (grant === undefined) throw new ExchangeError('invalid_request', M.missing('grant_type'));
    if (grant !== TOKEN_EXCHANGE_GRANT) throw new ExchangeError('unsupported_grant_type', M.grantType);
    res.locals.service = await clients.authenticate(req.headers.authorization, form);
    // Not waited for (it joins the next write batch, with the audit row): until it is written the
    // address's count is one too high, which errs only towards refusing.
    failures
      .authenticated(req, res)
      .catch((err: unknown) => deps.log.warn('rate_limit_write_failed', { message: err instanceof Error ? err.message : String(err) }));
    next();
  };

  // Step 4: the per-service budget.
  const limit = serviceRateLimit(
    deps.rateLimitPerMinute,
    deps.loadCounters,
    deriveKey(deps.brokerSecret, 'rate-limit'),
    (res) => (res.locals.service as ConfiguredService | undefined)?.id,
    (retryAfter) => ({
      error: 'rate_limited',
      error_description: `${M.rateLimited(deps.rateLimitPerMinute)} Retry after ${retryAfter} s.`,
    }),
  );

  // Steps 5–7: the request, the subject token, the answer.
  const exchange: RequestHandler = async (_req, res) => {
    const service = res.locals.service as ConfiguredService;
    let ask: Ask | undefined;
    try {
      ask = await parseAsk(service, res.locals.form as Map<string, string>);
      const signal = clientLeft(res);
      const allowed = deps.policy ? await policyAllows(res, ask, deps.policy, signal) : {};
      if (!allowed) return;
      const resolution = await resolve(ask, signal, allowed.read);
      if (resolution.kind === 'aborted') return;
      await answer(res, ask, resolution);
    } catch (err) {
      if (err instanceof ExchangeError) await refused(service.id, err.code, ask?.principal, ask?.provider.id);
      throw err;
    }
  };

  async function parseAsk(service: ConfiguredService, form: Map<string, string>): Promise<Ask> {
    // Delegation (an actor acting for the user) is not something this broker does: refused, never
    // served as if the service had asked for the user's own token.
    if (form.has('actor_token') || form.has('actor_token_type')) throw new ExchangeError('invalid_request', M.actorToken);
    const subjectToken = form.get('subject_token');
    if (!subjectToken) throw new ExchangeError('invalid_request', M.missing('subject_token'));
    if (form.get('subject_token_type') !== ACCESS_TOKEN_TYPE) throw new ExchangeError('invalid_request', M.subjectTokenType);
    const requested = form.get('requested_token_type');
    if (requested !== undefined && requested !== ACCESS_TOKEN_TYPE) throw new ExchangeError('invalid_request', M.requestedTokenType);
    const waitText = form.get('wait');
    if (waitText !== undefined && !/^\d{1,2}$/.test(waitText)) throw new ExchangeError('invalid_request', M.wait);
    const waitSeconds = waitText === undefined ? 0 : Number(waitText);
    if (waitSeconds > MAX_WAIT_SECONDS) throw new ExchangeError('invalid_request', M.wait);

    const provider = target(service, form.get('audience'), form.get('resource'));
    const allowed = service.allow[provider.id]!;
    const scopes = scopeList(form.get('scope'));
    if (provider.scopesApply) {
      const beyond = provider.missingScopes(allowed, scopes);
      if (beyond.length > 0) throw new ExchangeError('invalid_scope', M.beyondAllow(beyond));
    }
    const { principal, claims } = await subjectPrincipal(subjectToken, service);
    const connectRequest = form.get('connect_request');
    return { service, principal, claims, provider, scopes: provider.scopesApply ? scopes : [], connectRequest, waitSeconds };
  }

  /**
   * The policy's word on this exchange (docs/policy.md): allow passes; deny (and hide) is
   * `access_denied` with the rule's reason; approve asks the approval gate, holding up to `wait`,
   * and answers `interaction_required` with the requester's `approval_uri` while it is undecided.
   * False when it answered; else the connection as the decision read it (when it did, and the
   * exchange goes on at once), for the exchange's first look at it (one read, not two).
   */
  async function policyAllows(res: Response, ask: Ask, policy: Policy, signal: AbortSignal): Promise<false | { read?: ConnectionRead }> {
    const { service, principal, provider } = ask;
    const read = policy.readsAccount
      ? new ConnectionRead(principal, provider.id, await deps.store.connections.find(principal, provider.id))
      : undefined;
    const row = read?.row;
    const input: PolicyInput = {
      principal: { iss: principal.issuer, sub: principal.subject, claims: ask.claims },
      client: { id: '', name: '' },
      tool: { name: '', upstream: '', annotations: {} },
      args: {},
      provider: provider.id,
      account: row ? { login: row.account_login, scopes: scopeList(row.scopes) } : { login: '', scopes: [] },
      service: { id: service.id },
      now: new Date(),
    };
    const decision = policy.decide(input);
    if (decision.effect === 'allow') return read ? { read } : {};
    const detail = `rule=${decision.ruleId} effect=${decision.effect}${'unevaluated' in decision ? ' unevaluated' : ''} service=${service.id}`;
    deps.store.audit.record('policy_decision', principal, provider.id, detail).catch(auditFailed('policy_decision'));
    if (decision.effect === 'deny' || decision.effect === 'hide') {
      const reason = decision.effect === 'deny' ? decision.reason : `Refused by policy rule ${decision.ruleId}.`;
      throw new ExchangeError('access_denied', reason);
    }
    if (!deps.approvals) {
      deps.log.warn('policy_approval_unavailable', { rule: decision.ruleId, service: service.id });
      throw new ExchangeError('access_denied', M.approvalsUnavailable);
    }
    // An approval is bound to the account the token would come from, whether or not a rule reads it.
    const bound = row ?? (await deps.store.connections.find(principal, provider.id));
    const outcome = await deps.approvals.check(
      {
        requester: principal,
        requesterClaims: ask.claims,
        clientName: service.displayName,
        tool: '',
        upstream: '',
        args: {},
        argsDigest: NO_ARGS_DIGEST,
        provider: provider.id,
        account: bound?.account_login ?? '',
        policyVersion: policy.version,
        serviceId: service.id,
      },
      decision.approval,
      ask.waitSeconds * 1000,
      signal,
    );
    // Approved after a hold, maybe: the exchange reads the connection afresh.
    if (outcome.kind === 'approved') return {};
    if (outcome.kind === 'denied') throw new ExchangeError('access_denied', M.approvalDenied(outcome.reason));
    if (signal.aborted) return false;
    await refused(service.id, `interaction_required:approval`, principal, provider.id);
    metrics.tokenExchange(service.id, 'interaction_required');
    noStore(res);
    res.status(400).json({
      error: 'interaction_required',
      error_description: M.approvalPending,
      reason: 'approval_required',
      approval_uri: outcome.statusUrl,
      expires_in: Math.max(0, Math.floor((outcome.expiresAt - Date.now()) / 1000)),
    });
    return false;
  }

  /** `audience=<provider id>` or `resource=<its API base URL>`; it must be in the service's `allow`. */
  function target(service: ConfiguredService, audience: string | undefined, resource: string | undefined): Provider {
    if (audience === undefined && resource === undefined) throw new ExchangeError('invalid_target', M.noTarget);
    const byResource = resource === undefined ? undefined : (deps.resources.get(resource.replace(/\/+$/, '')) ?? '');
    if (audience !== undefined && byResource !== undefined && audience !== byResource)
      throw new ExchangeError('invalid_target', M.targetMismatch);
    const id = audience ?? byResource!;
    const provider = deps.providers.get(id);
    if (!provider) throw new ExchangeError('invalid_target', M.unknownTarget);
    if (!Object.hasOwn(service.allow, provider.id)) throw new ExchangeError('invalid_target', M.notAllowed(provider.id));
    return provider;
  }

  /**
   * The user: (`iss`, `sub`) of a token verified like an MCP token, for one of this service's
   * audiences, that speaks for the user alone: one that says someone acts for them (`act`) or may
   * (`may_act`) asks for delegation, which is refused.
   */
  async function subjectPrincipal(
    token: string,
    service: ConfiguredService,
  ): Promise<{ principal: Principal; claims: Record<string, unknown> }> {
    try {
      const info = await deps.verifier.verifyForAudiences(token, service.audiences);
      const principal = principalFromAuthInfo(info);
      if (!principal) throw new ExchangeError('invalid_grant', M.subjectToken('no principal'));
      // The very token just verified, read again for the claims the verifier does not keep.
      const claims = decodeJwt(token);
      for (const claim of ['act', 'may_act'])
        if (claims[claim] !== undefined) throw new ExchangeError('invalid_request', M.delegatedSubject(claim));
      return { principal, claims: claimsFromAuthInfo(info) };
    } catch (err) {
      if (err instanceof IdentityProviderUnavailable)
        throw new ExchangeError('temporarily_unavailable', M.idpDown, { retryAfterSeconds: 5 });
      if (err instanceof OAuthError) throw new ExchangeError('invalid_grant', M.subjectToken(err.message.replace(/\.$/, '')));
      throw err;
    }
  }

  /** The connect_request's pending connection: this service's, this user's, this provider's, or invalid_grant. */
  async function ownPending(ask: Ask): Promise<PendingConnection | undefined> {
    if (ask.connectRequest === undefined) return undefined;
    const id = connectRequests.open(ask.connectRequest, ask.service.id, ask.principal);
    const row = id ? await deps.store.pending.byId(id) : undefined;
    if (!row || row.service_id !== ask.service.id || !samePrincipal(row, ask.principal) || row.provider !== ask.provider.id)
      throw new ExchangeError('invalid_grant', M.connectRequest);
    return row;
  }

  /** `read`: the connection as the policy read it in this request (src/connections/resolve.ts, ConnectionRead). */
  async function resolve(ask: Ask, signal: AbortSignal, read?: ConnectionRead): Promise<Resolution> {
    const pending = await ownPending(ask);
    const request = {
      principal: ask.principal,
      provider: ask.provider,
      requiredScopes: ask.scopes,
      baseScopes: baseScopes(ask),
      holdMs: ask.waitSeconds * 1000,
      signal,
    };
    let resolution: Resolution;
    try {
      resolution = await resolveConnection(deps, { ...request, pending, read });
      // Replaced by newer links before it was opened: nothing was refused, so ask again.
      if (resolution.kind === 'settled' && resolution.outcomeReason === 'superseded')
        resolution = await resolveConnection(deps, { ...request, holdMs: 0 });
    } catch (err) {
      if (err instanceof ProviderError)
        throw new ExchangeError('temporarily_unavailable', M.providerDown(ask.provider.displayName), { retryAfterSeconds: 5 });
      throw err;
    }
    return resolution;
  }

  async function answer(res: Response, ask: Ask, resolution: Exclude<Resolution, { kind: 'aborted' }>): Promise<void> {
    const { service, principal, provider } = ask;
    noStore(res);
    if (resolution.kind === 'ok') {
      await granted(ask, resolution.connection);
      metrics.tokenExchange(service.id, 'granted');
      const { tokens, row } = resolution.connection;
      res.status(200).json({
        access_token: tokens.accessToken,
        issued_token_type: ACCESS_TOKEN_TYPE,
        token_type: 'Bearer',
        ...(tokens.expiresAt !== undefined ? { expires_in: Math.max(0, Math.floor((tokens.expiresAt - Date.now()) / 1000)) } : {}),
        scope: row.scopes,
        // RFC 6749 §5.1 allows extra members: the provider account's login (not a secret), so a
        // service can say whose account acted without a call to the provider.
        ...(row.account_login ? { account_login: row.account_login } : {}),
      });
      return;
    }
    if (resolution.kind === 'settled') {
      const reason = resolution.outcomeReason === 'refused_shared_account' ? 'account_linked_elsewhere' : resolution.status;
      await refused(service.id, `access_denied:${reason}`, principal, provider.id);
      metrics.tokenExchange(service.id, 'denied');
      res.status(400).json({ error: 'access_denied', error_description: M.denied[reason], reason });
      return;
    }
    const reason: AskReason = resolution.reason;
    const pending =
      resolution.pending ??
      (await deps.links.create(
        principal,
        provider.id,
        service.displayName,
        provider.scopesApply ? resolution.scopes : undefined,
        undefined,
        service.id,
      ));
    await refused(service.id, `interaction_required:${reason}`, principal, provider.id);
    metrics.tokenExchange(service.id, 'interaction_required');
    res.status(400).json({
      error: 'interaction_required',
      error_description: M.interaction[reason](provider.displayName),
      reason,
      missing_scopes: resolution.scopes,
      connect_uri: deps.links.url(pending),
      // The same link's short form for another device, under RFC 8628's names: open verification_uri, type user_code.
      user_code: deps.links.activationCode(pending),
      verification_uri: deps.links.activateUrl(),
      connect_request: connectRequests.issue(pending.id, service.id, principal),
    });
  }

  async function granted(ask: Ask, connection: OpenConnection): Promise<void> {
    const { principal, provider, service } = ask;
    const mark = usage.due(principal, provider.id, service.id)
      ? deps.store.serviceUsage.touch(principal, provider.id, service.id).catch((err: unknown) => {
          usage.forget(principal, provider.id, service.id);
          throw err;
        })
      : undefined;
    await Promise.all([mark, audit('token_exchanged', principal, provider.id, `service=${service.id} scopes=${connection.row.scopes}`)]);
  }

  router.post(
    TOKEN_PATH,
    express.text({ type: () => true, limit: '64kb' }),
    wrap(readForm),
    failures,
    wrap(authenticate),
    limit,
    wrap(exchange),
  );
  router.use(TOKEN_PATH, oauthErrors(deps.log));
  return router;
}

/**
 * What a new connection asks for besides the requested scopes: the provider's defaults this service
 * may have, else everything it may have there (never the provider's defaults beyond its `allow`).
 */
function baseScopes(ask: Ask): string[] {
  const allowed = ask.service.allow[ask.provider.id]!;
  const defaults = ask.provider.defaultScopes.filter((s) => allowed.includes(s));
  return defaults.length > 0 ? defaults : allowed;
}

function noStore(res: Response): void {
  res.set('Cache-Control', 'no-store').set('Pragma', 'no-cache');
}

/** Express 5 passes rejected promises on; this also covers synchronous throws the same way. */
function wrap(handler: RequestHandler): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    try {
      const r = handler(req, res, next) as unknown;
      if (r instanceof Promise) r.catch(next);
    } catch (err) {
      next(err);
    }
  };
}

/** Every failure of the token endpoint as RFC 6749 §5.2 JSON: never a page, never a stack trace. */
function oauthErrors(log: Logger): ErrorRequestHandler {
  return (err, _req, res, _next) => {
    noStore(res);
    // A service that has not authenticated yet is `unknown`: its claimed id is anyone's to choose.
    metrics.tokenExchange(
      (res.locals.service as ConfiguredService | undefined)?.id ?? 'unknown',
      err instanceof ExchangeError ? err.code : 'error',
    );
    if (err instanceof ExchangeError) {
      if (err.code === 'invalid_client' && err.options.detail) log.warn('client_authentication_failed', { reason: err.options.detail });
      if (err.options.basicChallenge) res.set('WWW-Authenticate', 'Basic realm="token-exchange", charset="UTF-8"');
      if (err.options.retryAfterSeconds) res.set('Retry-After', String(err.options.retryAfterSeconds));
      res.status(err.status).json({ error: err.code, error_description: err.description });
      return;
    }
    if (err instanceof StoreUnavailableError) {
      res.set('Retry-After', '5').status(503).json({ error: 'temporarily_unavailable', error_description: M.storeDown });
      return;
    }
    const status = (err as { status?: unknown })?.status;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      // Body-parser refusals (too large, bad encoding).
      res.status(status === 413 ? 413 : 400).json({ error: 'invalid_request', error_description: (err as Error).message });
      return;
    }
    log.error('token_exchange_failed', { message: err instanceof Error ? err.message : String(err) });
    res.status(500).json({ error: 'server_error', error_description: M.internal });
  };
}

export { JWT_BEARER_ASSERTION };
