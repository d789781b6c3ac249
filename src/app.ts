import express, { type Request, type RequestHandler, type Response } from 'express';
import { fileURLToPath } from 'node:url';
import type { Config } from './config/env.js';
import { isLoopbackHostname } from './net/loopback.js';
import { authRoutes } from './auth/routes.js';
import type { Sessions } from './auth/sessions.js';
import type { AccessTokenVerifier } from './auth/bearer.js';
import type { IdentityProviderHealth } from './auth/idp-health.js';
import type { OidcClient } from './auth/oidc-client.js';
import { connectRoutes, type ConnectRouteDeps } from './connect/routes.js';
import { activateRoutes } from './connect/activate.js';
import { tokenRecipientsOf } from './connect/token-recipients.js';
import { approvalRoutes, type ApprovalGates } from './approvals/index.js';
import type { Logger } from './log.js';
import type { McpHttpHandler } from '@modelcontextprotocol/server';
import { deriveKey, Sealer } from './crypto/index.js';
import { exchangeRoutes } from './exchange/endpoint.js';
import type { ApprovalGate } from './policy/index.js';
import { BrokerError } from './http/errors.js';
import { errorHandler } from './http/error-handler.js';
import { formOriginOk, hostGuard, originGuard } from './http/host-guard.js';
import { mcpEndpoint, mcpPrincipalKey } from './mcp/endpoint.js';
import { renderPage, type PageContext } from './http/render.js';
import { mcpRateLimit, pageRateLimit, type CounterStore } from './http/rate-limits.js';
import { readiness } from './http/readiness.js';
import { noStore, securityHeaders } from './http/security-headers.js';
import { StoreUnavailableError } from './store/index.js';
import { requestLog } from './http/request-log.js';
import { metrics } from './observability/metrics.js';
import { metricsFailureLimit, metricsHandler } from './observability/endpoint.js';
import { traceHttpRequests } from './observability/http-tracing.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

export interface AppDeps extends Omit<ConnectRouteDeps, 'requireCsrf' | 'page' | 'limits' | 'verifierSealer'> {
  config: Config;
  sessions: Sessions;
  idp: OidcClient;
  idpHealth: IdentityProviderHealth;
  verifier: AccessTokenVerifier;
  mcpHandler: McpHttpHandler;
  log: Logger;
  /** Extra routes mounted behind the Host guard and security headers (the development IdP and sandbox). */
  mount?: (app: express.Express) => void;
  /** Public documents served before the no-store pages (the client ID metadata documents of `auth: mcp` upstreams). */
  publicRoutes?: RequestHandler[];
  /** The counters of the limits on load (per user on /mcp, per service on the exchange): `store`'s, reconciled. */
  loadCounters: CounterStore;
  /** The approval gate whose /approvals pages this app serves. */
  approvals?: ApprovalGates;
  /** The gate the token exchange asks for an `approve` rule (default: `approvals`). */
  approvalGate?: ApprovalGate;
}

/**
 * Host names this service answers to (in `Host`): PUBLIC_URL's, ALLOWED_HOSTS, and loopback names
 * when local. IPv6 literals in brackets, as the SDK's Host validator compares them.
 */
export function allowedHostnames(config: Config): string[] {
  const bracketed = (h: string) => (h.includes(':') && !h.startsWith('[') ? `[${h}]` : h);
  const names = new Set([config.publicUrl.hostname, ...config.allowedHosts.map(bracketed)]);
  if (isLoopbackHostname(config.publicUrl.hostname)) for (const n of ['localhost', '127.0.0.1', '[::1]']) names.add(n);
  return [...names];
}

/**
 * Origins whose pages may post our forms and call /mcp: PUBLIC_URL's, ALLOWED_ORIGINS, and for a
 * loopback PUBLIC_URL the loopback names with its scheme and port (browsers use any of them).
 */
export function allowedOrigins(config: Config): Set<string> {
  const origins = new Set([config.publicUrl.origin, ...config.allowedOrigins]);
  if (isLoopbackHostname(config.publicUrl.hostname)) {
    const port = config.publicUrl.port ? `:${config.publicUrl.port}` : '';
    for (const name of ['localhost', '127.0.0.1', '[::1]']) origins.add(`${config.publicUrl.protocol}//${name}${port}`);
  }
  return origins;
}

export function createApp(deps: AppDeps): express.Express {
  const { config, sessions, log } = deps;
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustProxy);
  app.set('view engine', 'ejs');
  app.set('views', `${ROOT}views`);
  app.set('query parser', 'simple');
  // One spelling per route: `/Connect/x` or `/connect/x/` would otherwise reach a handler past any
  // path-matched middleware (rate limits, guards) that spells it the documented way.
  app.set('case sensitive routing', true);
  app.set('strict routing', true);

  const hosts = allowedHostnames(config);
  const origins = allowedOrigins(config);
  const page: PageContext = { productName: config.productName, sessions, ...(config.logoUrl ? { logoUrl: config.logoUrl.href } : {}) };
  const resourceMetadataUrl = new URL('/.well-known/oauth-protected-resource/mcp', config.publicUrl).href;

  app.use(
    requestLog(log, {
      onDone: (route, status) => metrics.httpRequest(route, status),
      outsideContext: (req) => req.path === '/mcp' || req.path === '/oauth/token',
    }),
  );
  // Probes first: platforms send them by pod IP or to the bare port, with any Host; they reveal nothing.
  app.get('/healthz', (_req, res) => void res.set('Cache-Control', 'no-store').json({ status: 'ok' }));
  app.get('/readyz', readiness(deps.store, deps.idpHealth));
  // Scraped by pod IP too; behind a bearer. With METRICS_PORT it is served on that port instead.
  if (config.metrics.token !== undefined && config.metrics.port === undefined)
    app.get(
      '/metrics',
      metricsFailureLimit(config.rateLimitPerMinute, deps.store, deriveKey(config.brokerSecret, 'rate-limit')),
      metricsHandler(config.metrics.token),
    );

  app.use(traceHttpRequests());
  app.use(hostGuard(hosts));
  app.use(
    securityHeaders({
      formActionOrigins: () => [deps.idp.authorizationOrigin(), ...[...deps.providers.values()].map((p) => p.authorizationOrigin)],
      imageOrigins: config.logoUrl ? [config.logoUrl.origin] : [],
    }),
  );
  deps.mount?.(app);

  // RFC 9728 metadata, at the path-inserted and the root location.
  const metadata = (_req: Request, res: Response) => {
    res
      .set('Access-Control-Allow-Origin', '*')
      .set('Cache-Control', 'public, max-age=300')
      .json({
        resource: config.resource,
        authorization_servers: [config.oidc.issuerId],
        bearer_methods_supported: ['header'],
        ...(config.mcpScopes.length ? { scopes_supported: config.mcpScopes } : {}),
        resource_name: config.productName,
      });
  };
  app.get('/.well-known/oauth-protected-resource/mcp', metadata);
  app.get('/.well-known/oauth-protected-resource', metadata);

  // The token exchange (src/exchange/): server to server, so no Origin check and no cookies.
  app.use(
    exchangeRoutes({
      publicUrl: config.publicUrl,
      services: config.services,
      providers: deps.providers,
      resources: new Map([[config.github.apiUrl.href.replace(/\/+$/, ''), 'github']]),
      verifier: deps.verifier,
      store: deps.store,
      loadCounters: deps.loadCounters,
      connections: deps.connections,
      watcher: deps.watcher,
      links: deps.links,
      brokerSecret: config.brokerSecret,
      rateLimitPerMinute: config.serviceRateLimitPerMinute,
      authFailuresPerMinute: config.rateLimitPerMinute,
      log,
      ...(config.policy ? { policy: config.policy } : {}),
      ...(deps.approvalGate || deps.approvals ? { approvals: deps.approvalGate ?? deps.approvals } : {}),
    }),
  );

  const limitKey = deriveKey(config.brokerSecret, 'rate-limit');
  const mcp = mcpEndpoint(
    {
      handler: deps.mcpHandler,
      verifier: deps.verifier,
      audience: config.resource,
      requiredScopes: config.mcpScopes,
      resourceMetadataUrl,
      maxBodyBytes: 1024 * 1024,
      log,
      ...(config.mcpRateLimitPerMinute > 0
        ? { rateLimit: mcpRateLimit(config.mcpRateLimitPerMinute, deps.loadCounters, limitKey, mcpPrincipalKey) }
        : {}),
    },
    config.publicUrl,
  );
  app.all('/mcp', originGuard(origins), ...mcp);

  app.use('/static', express.static(`${ROOT}public`, { index: false, maxAge: '1h', fallthrough: false }));

  for (const routes of deps.publicRoutes ?? []) app.use(routes);

  app.use(noStore);
  // Separate budgets, so a burst of callbacks cannot lock a user out of signing in. The routers
  // attach them to their routes, so whatever spelling reaches a handler is counted.
  const limit = (name: string): RequestHandler => pageRateLimit(name, config.rateLimitPerMinute, deps.store, limitKey);
  const limits = { signIn: limit('sign-in'), connect: limit('connect'), callback: limit('callback'), connectStart: limit('connect-start') };
  app.use(sessions.load, express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 20 }));
  const requireCsrf = (req: Request, res: Response) => {
    if (!formOriginOk(req, origins) || !sessions.verifyCsrf(res.locals.session, req.body?.csrf)) {
      throw new BrokerError(403, 'csrf', 'This form has expired or did not come from this site. Go back, reload the page and try again.', {
        heading: 'Form expired',
      });
    }
  };
  const returnToSealer = new Sealer([deriveKey(config.brokerSecret, 'sign-in-return')]);
  app.use(
    authRoutes({
      publicUrl: config.publicUrl,
      store: deps.store,
      sessions,
      idp: deps.idp,
      page,
      log,
      requireCsrf,
      returnToSealer,
      rateLimit: limits.signIn,
      subjectClaim: config.subjectClaim,
    }),
  );
  const verifierSealer = new Sealer([deriveKey(config.brokerSecret, 'connect-pkce-verifier')]);
  const connect = connectRoutes({
    ...deps,
    page,
    requireCsrf,
    verifierSealer,
    serviceNames: new Map(config.services.map((s) => [s.id, s.displayName])),
    tokenRecipients: tokenRecipientsOf(config),
    limits: { connect: limits.connect, callback: limits.callback, connectStart: limits.connectStart },
  });
  app.use(connect);
  app.use(activateRoutes({ ...deps, page, requireCsrf, openLink: connect.openLink, limitKey, pageLimit: limits.connect }));
  if (deps.approvals) {
    const claims = (session: Parameters<Sessions['verifiedClaims']>[0]) => sessions.verifiedClaims(session);
    app.use(approvalRoutes({ gates: deps.approvals, claims, page, log, requireCsrf, rateLimit: limit('approvals') }));
  }
  // The start page: what this is, and the way to one's accounts (signing in on the way).
  const providerNames = [...deps.providers.values()].map((p) => p.displayName);
  const mcpUrl = new URL('/mcp', config.publicUrl).href;
  app.get('/', (_req, res) => renderPage(res, page, 'home', { title: 'Welcome', providers: providerNames, mcpUrl }));

  app.use((req, _res, next) => next(new BrokerError(404, 'not_found', `There is nothing at ${req.path}.`, { heading: 'Page not found' })));
  app.use(errorHandler(page, log, (err): err is StoreUnavailableError => err instanceof StoreUnavailableError));
  return app;
}
