import { z } from 'zod';
import { keyIdFor } from '../crypto/seal.js';
import { isLoopbackHostname } from '../net/loopback.js';
import { isAudienceIdentifier } from './audience.js';
import { ConfigError, ConfigProblems } from './errors.js';
import { loadServices, type ConfiguredService } from './services.js';
import { envPrefix, loadProviders, type ConfiguredProvider } from './providers.js';
import { loadGateway, type ConfiguredUpstream } from './upstreams.js';
import { loadWebhooks, type ConfiguredWebhook } from './webhooks.js';
import { loadPolicy } from './policy.js';
import type { Policy } from '../policy/engine.js';
import { checkWebhookAddresses, parseEgressAllow } from './egress.js';
import { EgressRule, type EgressAllowList } from '../net/egress-rule.js';
import { otlpEndpoint, sdkDisabled, traceExporters, tracingSettings } from './tracing.js';
import type { TracingSettings } from '../observability/tracing.js';
import { scopeList } from '../providers/scopes.js';

export { ConfigError } from './errors.js';

export interface Config {
  port: number;
  host: string;
  publicUrl: URL;
  /** The MCP endpoint, `<PUBLIC_URL>/mcp`. */
  mcpUrl: URL;
  /** The audience (`aud`) the MCP access tokens must carry: the resource below, or an identifier the IdP writes instead (MCP_AUDIENCE). */
  audience: string;
  /**
   * The broker's resource identifier (RFC 9728 `resource`, RFC 8707): MCP_AUDIENCE when it is a URL,
   * else `<PUBLIC_URL>/mcp` (an identifier such as an Entra ID application id is no resource URL).
   */
  resource: string;
  /** The claim that names a principal's subject in MCP access tokens, subject tokens and ID tokens alike: `sub`, or `oid` (Entra ID). */
  subjectClaim: 'sub' | 'oid';
  /** Scopes every MCP access token must carry, advertised in the resource metadata and 401 challenges. */
  mcpScopes: string[];
  /** JOSE `typ` values an MCP access token may carry (lowercase), `at+jwt` (RFC 9068) by default; `none` = no `typ` header. */
  accessTokenTypes: string[];
  /** The store: PostgreSQL when `url` is set (shared by every instance), else SQLite at `path`. */
  database: { url: string | undefined; path: string; poolMax: number; statementTimeoutMs: number };
  /** `issuerId` is OIDC_ISSUER exactly as configured: the identifier, compared as a string. */
  oidc: { issuer: URL; issuerId: string; clientId: string; clientSecret: string; authMethod: 'client_secret_basic' | 'client_secret_post' };
  github: { webUrl: URL; apiUrl: URL; appType: 'oauth-app' | 'github-app' };
  /** Every provider this instance connects to (GitHub first), with its credentials. */
  providers: ConfiguredProvider[];
  /** The operator's own MCP servers allowed to use the token exchange (PROVIDERS_FILE `services:`). */
  services: ConfiguredService[];
  /** Receivers of the broker's signed events (PROVIDERS_FILE `webhooks:`). */
  webhooks: ConfiguredWebhook[];
  /**
   * Where addresses the configuration does not name may lead (upstream documents, webhooks): the
   * hosts and networks EGRESS_ALLOW adds to the public internet, and loopback in development mode.
   */
  egress: { allow: EgressAllowList; loopback: boolean };
  /** Token exchanges per minute and service; 0 = off. */
  serviceRateLimitPerMinute: number;
  /** Remote MCP servers behind the broker (PROVIDERS_FILE `upstreams:`). */
  upstreams: ConfiguredUpstream[];
  /** Who may call what (PROVIDERS_FILE `policy:`, compiled once); undefined: everything is allowed. */
  policy: Policy | undefined;
  /** Provider id → false: its built-in tools are switched off (PROVIDERS_FILE `builtinTools:`). */
  builtinTools: Record<string, boolean>;
  /** The most bytes one upstream answer may have; past it the call is a tool error. */
  upstreamMaxResultBytes: number;
  /** When one upstream account is already linked to another principal: refuse (default) or allow. */
  sharedAccountPolicy: 'refuse' | 'allow';
  /** Who `npm run admin` audits an operator's action as; unset = the OS user running it. */
  adminActor: string | undefined;
  /** Days an audit row is kept before the periodic prune deletes it; 0 = kept forever. */
  auditRetentionDays: number;
  brokerSecret: Buffer;
  /** Ordered key ring: the first key seals, every key opens. */
  tokenKeys: Array<{ id: string; key: Buffer }>;
  /** How long a repeated tool call waits for the browser flow to finish before asking again. */
  repeatHoldMs: number;
  /** How long a call to a provider (token endpoint, API) may take before it counts as down. */
  providerTimeoutMs: number;
  /** Lifetime of a connect link. */
  connectLinkTtlSeconds: number;
  /** Host names accepted in `Host` besides PUBLIC_URL's own. */
  allowedHosts: string[];
  /** Origins (`scheme://host[:port]`, serialized) accepted in `Origin` besides PUBLIC_URL's own. */
  allowedOrigins: string[];
  productName: string;
  /** Optional operator logo shown in the page header (https URL, or loopback http in development). */
  logoUrl: URL | undefined;
  /** Requests per minute and client IP on each of sign-in, connect pages and provider callbacks; 0 = off. */
  rateLimitPerMinute: number;
  /** MCP requests per minute and principal (`iss` + `sub`); 0 = off. */
  mcpRateLimitPerMinute: number;
  /** Open (unused, unexpired) connect links one principal may hold; past it, the oldest is cancelled. */
  pendingConnectionsPerUser: number;
  /** Express `trust proxy` setting, for deployments behind a reverse proxy. */
  trustProxy: boolean | number | string;
  secureCookies: boolean;
  /**
   * `/metrics`: off unless `token` (a bearer then required) or `port` (a separate listener on
   * 127.0.0.1, which also asks for the bearer when `token` is set) is given.
   */
  metrics: { token: string | undefined; port: number | undefined };
  /** OpenTelemetry traces, from the standard OTEL_* variables (src/config/tracing.ts). */
  tracing: TracingSettings;
}

function parseUrl(name: string, value: string, { allowPath }: { allowPath: boolean }): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`${name} must be an absolute URL (got "${value}")`);
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHostname(url.hostname))) {
    throw new ConfigError(`${name} must use https:// (http:// is accepted only for loopback hosts)`);
  }
  if (url.search || url.hash || url.username || url.password) {
    throw new ConfigError(`${name} must not carry a query, fragment or credentials`);
  }
  if (!allowPath && url.pathname !== '/') throw new ConfigError(`${name} must not have a path`);
  return url;
}

/** A bearer for /metrics: long enough not to be guessed, and sendable in a header as it is. */
function metricsToken(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (value.length < 16 || !/^[\x21-\x7e]+$/.test(value))
    throw new ConfigError('METRICS_TOKEN must be at least 16 printable ASCII characters without spaces');
  return value;
}

/** Drops one trailing slash so `new URL('mcp', base)`-style joins and comparisons stay exact. */
function withoutTrailingSlash(url: URL): string {
  return url.href.endsWith('/') ? url.href.slice(0, -1) : url.href;
}

/** A required variable that may be empty (its own parse step says what is wrong with an empty one). */
const given = z.string();
/** A required variable that must not be empty either. */
const nonEmpty = z.string().min(1);

/** The variables start-up cannot go without, in the order their problems are reported. */
const REQUIRED = {
  PUBLIC_URL: given,
  OIDC_ISSUER: given,
  OIDC_CLIENT_ID: nonEmpty,
  OIDC_CLIENT_SECRET: nonEmpty,
  GITHUB_CLIENT_ID: nonEmpty,
  GITHUB_CLIENT_SECRET: nonEmpty,
  BROKER_SECRET: given,
};

/** Every other variable the broker reads, by what it configures (their parse steps are in loadConfig). */
const OPTIONAL = {
  listen: ['PORT', 'HOST', 'TRUST_PROXY', 'ALLOWED_HOSTS', 'ALLOWED_ORIGINS', 'RATE_LIMIT_PER_MINUTE'],
  mcp: ['MCP_AUDIENCE', 'MCP_SCOPES', 'MCP_ACCESS_TOKEN_TYPES', 'MCP_RATE_LIMIT_PER_MINUTE'],
  database: ['DATABASE_URL', 'DATABASE_PATH', 'DATABASE_POOL_MAX', 'DATABASE_STATEMENT_TIMEOUT_MS'],
  signIn: ['OIDC_CLIENT_AUTH_METHOD', 'OIDC_SUBJECT_CLAIM'],
  github: ['GITHUB_WEB_URL', 'GITHUB_API_URL', 'GITHUB_APP_TYPE'],
  tokenKeys: ['TOKEN_ENCRYPTION_KEY', 'TOKEN_ENCRYPTION_KEYS'],
  providersFile: ['PROVIDERS_FILE', 'UPSTREAM_MAX_RESULT_BYTES', 'SERVICE_RATE_LIMIT_PER_MINUTE', 'SHARED_ACCOUNT_POLICY', 'ADMIN_ACTOR'],
  egress: ['EGRESS_ALLOW'],
  connectFlow: ['REPEAT_HOLD_SECONDS', 'PROVIDER_TIMEOUT_SECONDS', 'CONNECT_LINK_TTL_SECONDS', 'PENDING_CONNECTIONS_PER_USER'],
  pages: ['PRODUCT_NAME', 'LOGO_URL'],
  metrics: ['METRICS_TOKEN', 'METRICS_PORT'],
  auditTrail: ['AUDIT_RETENTION_DAYS'],
  traceExport: ['OTEL_TRACES_EXPORTER', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'],
  traces: ['OTEL_SERVICE_NAME', 'OTEL_SDK_DISABLED'],
  logs: ['LOG_LEVEL'],
} as const;

const optional = z.string().optional();

/** Each name of each group, as an optional string. */
function optionalStrings<N extends string>(groups: Record<string, readonly N[]>): Record<N, typeof optional> {
  return Object.fromEntries(Object.values(groups).flatMap((names) => names.map((name) => [name, optional]))) as Record<N, typeof optional>;
}

/**
 * Every variable, as a string (or absent): docs/configuration.md's table is checked against this
 * list both ways (test/readme-config.test.ts), so it stays the one place that names them all.
 */
const rawSchema = z.object({ ...REQUIRED, ...optionalStrings(OPTIONAL) });

/** Every variable the schema reads (docs/configuration.md's table is checked against it). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(rawSchema.shape);

/** A parse step for a number that `is` (whole, finite) and lies from `min` to `max`; unset or empty gives `fallback`. */
function numberIn(what: string, is: (n: number) => boolean) {
  return (name: string, value: string | undefined, fallback: number, min: number, max: number): number => {
    if (value === undefined || value === '') return fallback;
    const n = Number(value);
    if (!is(n) || n < min || n > max) throw new ConfigError(`${name} must be ${what} between ${min} and ${max} (got "${value}")`);
    return n;
  };
}
const integer = numberIn('an integer', Number.isInteger);
const number = numberIn('a number', Number.isFinite);

/** `postgres://` or `postgresql://` with a host; the value itself (with its password) is never echoed. */
function parseDatabaseUrl(value: string | undefined): string | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    throw new ConfigError('DATABASE_URL must be a URL such as postgres://user:password@host:5432/database');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:')
    throw new ConfigError(`DATABASE_URL must start with postgres:// (got "${url.protocol}//…"); leave it unset for SQLite`);
  if (!url.hostname && !url.searchParams.get('host')) throw new ConfigError('DATABASE_URL must name a host');
  return value.trim();
}

function oneOf<const T extends readonly string[]>(name: string, value: string | undefined, allowed: T, fallback: T[number]): T[number] {
  if (value === undefined || value === '') return fallback;
  if ((allowed as readonly string[]).includes(value)) return value as T[number];
  throw new ConfigError(`${name} must be one of ${allowed.join(', ')} (got "${value}")`);
}

function decodeKey(name: string, value: string): Buffer {
  // 64 hex digits (openssl rand -hex 32) are valid base64 too, of 48 bytes: say what was meant.
  if (/^[0-9a-fA-F]{64}$/.test(value))
    throw new ConfigError(
      `${name} looks like hex (64 hex digits); it must be the base64 encoding of 32 bytes: generate one with openssl rand -base64 32, or convert this one with echo <hex> | xxd -r -p | base64`,
    );
  const key = /^[A-Za-z0-9+/_-]+={0,2}$/.test(value) ? Buffer.from(value, 'base64') : Buffer.alloc(0);
  if (key.length !== 32) throw new ConfigError(`${name} must be the base64 encoding of exactly 32 bytes (got ${key.length} bytes)`);
  return key;
}

/** Values a template leaves for the operator to replace (.env.example's `change-me`), never a real secret. */
const PLACEHOLDER = /^(<.*>|\.\.\.|x{3,8}|example|todo|tbd|placeholder|replace[-_ ]?me|your[-_ ].*)$|change[-_ ]?me/i;

/** The secrets (and client ids) a template fills with placeholders, fixed names first. */
const SECRET_VARIABLES = [
  'OIDC_CLIENT_ID',
  'OIDC_CLIENT_SECRET',
  'GITHUB_CLIENT_ID',
  'GITHUB_CLIENT_SECRET',
  'BROKER_SECRET',
  'TOKEN_ENCRYPTION_KEY',
  'TOKEN_ENCRYPTION_KEYS',
  'METRICS_TOKEN',
];
/** Our own per-entry secrets: SERVICE_<ID>_SECRET and WEBHOOK_<ID>_SECRET. */
const ENTRY_SECRET = /^(SERVICE|WEBHOOK)_[A-Z0-9_]+_SECRET$/;

/** Each of `names` that is set to a placeholder, as one problem line each. */
function placeholderProblems(env: NodeJS.ProcessEnv, names: Iterable<string>): string[] {
  const out: string[] = [];
  for (const name of names) {
    const value = env[name]?.trim();
    if (value && PLACEHOLDER.test(value))
      out.push(`${name} is still a placeholder such as change-me (its value is not shown): set the real value`);
  }
  return out;
}

const TOKEN_KEY_REQUIRED = 'TOKEN_ENCRYPTION_KEY is required (set TOKEN_ENCRYPTION_KEY or the key ring TOKEN_ENCRYPTION_KEYS)';

/**
 * TOKEN_ENCRYPTION_KEYS is `id:base64,id:base64,...` (the first seals); TOKEN_ENCRYPTION_KEY alone is
 * a one-key ring, and beside TOKEN_ENCRYPTION_KEYS it stays readable until `npm run rotate-keys`.
 */
function parseKeyRing(ring: string | undefined, single: string | undefined): Array<{ id: string; key: Buffer }> {
  const keys: Array<{ id: string; key: Buffer }> = [];
  for (const entry of (ring ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const colon = entry.indexOf(':');
    const id = colon > 0 ? entry.slice(0, colon) : '';
    if (!/^[A-Za-z0-9_-]{1,32}$/.test(id))
      throw new ConfigError('TOKEN_ENCRYPTION_KEYS must be a comma-separated list of id:base64 entries (ids of letters, digits, - and _)');
    if (keys.some((k) => k.id === id)) throw new ConfigError(`TOKEN_ENCRYPTION_KEYS names the key id "${id}" twice`);
    keys.push({ id, key: decodeKey(`TOKEN_ENCRYPTION_KEYS (key "${id}")`, entry.slice(colon + 1)) });
  }
  if (single !== undefined) {
    const key = decodeKey('TOKEN_ENCRYPTION_KEY', single);
    if (!keys.some((k) => k.key.equals(key))) keys.push({ id: keyIdFor(key), key });
  }
  if (keys.length === 0)
    throw new ConfigError(ring === undefined && single === undefined ? TOKEN_KEY_REQUIRED : 'TOKEN_ENCRYPTION_KEY must not be empty');
  return keys;
}

/**
 * MCP_AUDIENCE: a URL (https, or http on loopback) is the resource itself, as before; anything else
 * is an identifier the IdP writes in `aud` instead (an Entra ID application id, a GUID, or an
 * `api://…` Application ID URI), accepted in `aud` while the resource stays `<PUBLIC_URL>/mcp`.
 */
function parseAudience(value: string | undefined, mcpUrl: URL): { audience: string; resource: string } {
  const raw = value?.trim();
  if (!raw) return { audience: mcpUrl.href, resource: mcpUrl.href };
  if (/^https?:/i.test(raw)) {
    const url = withoutTrailingSlash(parseUrl('MCP_AUDIENCE', raw, { allowPath: true }));
    return { audience: url, resource: url };
  }
  if (!isAudienceIdentifier(raw))
    throw new ConfigError(
      `MCP_AUDIENCE must be an https URL or the identifier your identity provider writes in aud, such as a GUID or an api:// URI (got "${raw}")`,
    );
  return { audience: raw, resource: mcpUrl.href };
}

/** Comma-separated JOSE `typ` values (media types, `application/` optional), `at+jwt` when unset; `none` = no `typ` header. */
function accessTokenTypes(value: string | undefined): string[] {
  if (value === undefined || value.trim() === '') return ['at+jwt'];
  const types = value
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter(Boolean);
  if (types.length === 0) throw new ConfigError('MCP_ACCESS_TOKEN_TYPES must list at least one typ value, e.g. at+jwt or JWT');
  for (const t of types) {
    if (!/^[a-z0-9!#$&^_.+-]+(\/[a-z0-9!#$&^_.+-]+)?$/.test(t))
      throw new ConfigError(`MCP_ACCESS_TOKEN_TYPES must be a comma-separated list of typ values such as at+jwt or JWT (got "${t}")`);
  }
  return types;
}

/** ALLOWED_ORIGINS: comma-separated `scheme://host[:port]`, https unless loopback, nothing else. */
function parseOrigins(value: string | undefined): string[] {
  const origins: string[] = [];
  for (const entry of (value ?? '')
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean)) {
    const url = /^https?:\/\/[^/?#@\\]+$/i.test(entry) ? URL.parse(entry) : null;
    if (!url)
      throw new ConfigError(
        `ALLOWED_ORIGINS must be a comma-separated list of origins, scheme://host[:port] and nothing else, e.g. https://app.example.com (got "${entry}")`,
      );
    if (url.protocol === 'http:' && !isLoopbackHostname(url.hostname))
      throw new ConfigError(`ALLOWED_ORIGINS must use https:// (http:// is accepted only for loopback hosts) (got "${entry}")`);
    origins.push(url.origin);
  }
  return origins;
}

/** ADMIN_ACTOR: a name for the audit trail (an operator's login or email), visible characters only. */
function adminActor(value: string | undefined): string | undefined {
  const name = value?.trim();
  if (!name) return undefined;
  if (!/^[\p{L}\p{N}\p{P}\p{S} ]{1,64}$/u.test(name))
    throw new ConfigError('ADMIN_ACTOR must be at most 64 letters, digits, spaces and punctuation (a login or an email address)');
  return name;
}

function authMethod(value: string | undefined): 'client_secret_basic' | 'client_secret_post' {
  if (value === undefined || value === '' || value === 'client_secret_basic') return 'client_secret_basic';
  if (value === 'client_secret_post') return value;
  throw new ConfigError(`OIDC_CLIENT_AUTH_METHOD must be client_secret_basic or client_secret_post (got "${value}")`);
}

function parseTrustProxy(value: string | undefined): boolean | number | string {
  if (value === undefined || value === '' || value === 'false') return false;
  if (value === 'true') return true;
  if (/^\d+$/.test(value)) return Number(value);
  return value;
}

/**
 * Reads and validates the service configuration.
 * @throws {ConfigError} naming every variable that is missing or malformed, one line each.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, options: { developmentMode?: boolean } = {}): Config {
  const problems = new ConfigProblems();
  const take = <T>(parse: () => T): T => problems.take(parse);
  // Placeholders first: a `change-me` secret is named as one, not as too short or not base64.
  placeholderProblems(env, [...SECRET_VARIABLES, ...Object.keys(env).filter((name) => ENTRY_SECRET.test(name))]).forEach((p) =>
    problems.add(p),
  );
  const e = readRaw(env, problems);
  take(() => oneOf('LOG_LEVEL', e.LOG_LEVEL, ['debug', 'info', 'warn', 'error'] as const, 'info'));

  const port = take(() => integer('PORT', e.PORT, 3000, 0, 65535));
  const host = e.HOST?.trim() || '127.0.0.1';
  const publicUrl = take(() => parseUrl('PUBLIC_URL', e.PUBLIC_URL, { allowPath: false }));
  const mcpUrl = take(() => new URL('/mcp', publicUrl));
  const audiences = take(() => parseAudience(e.MCP_AUDIENCE, mcpUrl));
  const audience = take(() => audiences.audience);
  // The page client's ID tokens name its client id in aud: as the MCP audience, only a typ or a
  // nonce would stand between an ID token and /mcp (an Entra ID app registration used for both).
  take(() => {
    if (audience !== undefined && audience === e.OIDC_CLIENT_ID)
      throw new ConfigError(
        "MCP_AUDIENCE must not be OIDC_CLIENT_ID: the sign-in client's ID tokens carry that audience. Give the MCP API its own registration at the identity provider",
      );
  });

  const brokerSecret = take(() => {
    const secret = Buffer.from(e.BROKER_SECRET, 'utf8');
    if (secret.length < 32) throw new ConfigError(`BROKER_SECRET must be at least 32 bytes (got ${secret.length})`);
    return secret;
  });

  const github = {
    webUrl: take(() => parseUrl('GITHUB_WEB_URL', e.GITHUB_WEB_URL ?? 'https://github.com', { allowPath: true })),
    apiUrl: take(() => parseUrl('GITHUB_API_URL', e.GITHUB_API_URL ?? 'https://api.github.com', { allowPath: true })),
    appType: take(() => oneOf('GITHUB_APP_TYPE', e.GITHUB_APP_TYPE, ['oauth-app', 'github-app'] as const, 'oauth-app')),
  };
  const tokenKeys = take(() => parseKeyRing(e.TOKEN_ENCRYPTION_KEYS, e.TOKEN_ENCRYPTION_KEY));

  const allowedHosts = (e.ALLOWED_HOSTS ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter(Boolean);

  const providers = take(() =>
    loadProviders(env, { githubWebUrl: github.webUrl, githubApiUrl: github.apiUrl, githubAppType: github.appType }),
  );
  // Every configured provider's credentials, besides GitHub's above.
  placeholderProblems(
    env,
    (providers ?? []).flatMap((p) => [`${envPrefix(p.definition.id)}_CLIENT_ID`, `${envPrefix(p.definition.id)}_CLIENT_SECRET`]),
  ).forEach((p) => problems.add(p));
  // What the services' and the upstreams' allow lists are checked against: each provider's scopes (none: it takes any).
  const providerScopes = new Map(
    (providers ?? []).map((p) => [
      p.definition.id,
      { scopes: p.definition.scopesApply ? p.definition.scopes.map((x) => x.name) : undefined },
    ]),
  );
  const services = take(() => loadServices(env, providerScopes, audience));
  const gateway = take(() => loadGateway(env, providerScopes));
  const egress = { allow: take(() => parseEgressAllow(e.EGRESS_ALLOW)), loopback: options.developmentMode ?? false };
  const webhooks = take(() => loadWebhooks(env));
  const policy = take(() => loadPolicy(env));
  take(() => webhooks && egress.allow && checkWebhookAddresses(webhooks, EgressRule.from(egress)));

  const config: Config = {
    port,
    host,
    publicUrl,
    mcpUrl,
    audience,
    resource: take(() => audiences.resource),
    subjectClaim: take(() => oneOf('OIDC_SUBJECT_CLAIM', e.OIDC_SUBJECT_CLAIM, ['sub', 'oid'] as const, 'sub')),
    mcpScopes: scopeList(e.MCP_SCOPES, { commas: true }),
    accessTokenTypes: take(() => accessTokenTypes(e.MCP_ACCESS_TOKEN_TYPES)),
    database: {
      url: take(() => parseDatabaseUrl(e.DATABASE_URL)),
      path: e.DATABASE_PATH?.trim() || './data/broker.db',
      poolMax: take(() => integer('DATABASE_POOL_MAX', e.DATABASE_POOL_MAX, 10, 1, 1000)),
      statementTimeoutMs: take(() => integer('DATABASE_STATEMENT_TIMEOUT_MS', e.DATABASE_STATEMENT_TIMEOUT_MS, 5000, 100, 600_000)),
    },
    oidc: {
      issuer: take(() => parseUrl('OIDC_ISSUER', e.OIDC_ISSUER, { allowPath: true })),
      issuerId: e.OIDC_ISSUER,
      clientId: e.OIDC_CLIENT_ID,
      clientSecret: e.OIDC_CLIENT_SECRET,
      authMethod: take(() => authMethod(e.OIDC_CLIENT_AUTH_METHOD)),
    },
    github,
    providers,
    services,
    upstreams: gateway?.upstreams ?? [],
    builtinTools: gateway?.builtinTools ?? {},
    policy,
    upstreamMaxResultBytes: take(() =>
      integer('UPSTREAM_MAX_RESULT_BYTES', e.UPSTREAM_MAX_RESULT_BYTES, 4 * 1024 * 1024, 1024, 256 * 1024 * 1024),
    ),
    webhooks,
    egress,
    serviceRateLimitPerMinute: take(() => integer('SERVICE_RATE_LIMIT_PER_MINUTE', e.SERVICE_RATE_LIMIT_PER_MINUTE, 600, 0, 1_000_000)),
    sharedAccountPolicy: take(() => oneOf('SHARED_ACCOUNT_POLICY', e.SHARED_ACCOUNT_POLICY, ['refuse', 'allow'] as const, 'refuse')),
    adminActor: take(() => adminActor(e.ADMIN_ACTOR)),
    auditRetentionDays: take(() => integer('AUDIT_RETENTION_DAYS', e.AUDIT_RETENTION_DAYS, 90, 0, 3650)),
    brokerSecret,
    tokenKeys,
    repeatHoldMs: take(() => Math.round(number('REPEAT_HOLD_SECONDS', e.REPEAT_HOLD_SECONDS, 20, 0, 50) * 1000)),
    providerTimeoutMs: take(() => Math.round(number('PROVIDER_TIMEOUT_SECONDS', e.PROVIDER_TIMEOUT_SECONDS, 10, 0.1, 120) * 1000)),
    connectLinkTtlSeconds: take(() => integer('CONNECT_LINK_TTL_SECONDS', e.CONNECT_LINK_TTL_SECONDS, 600, 30, 3600)),
    allowedHosts,
    allowedOrigins: take(() => parseOrigins(e.ALLOWED_ORIGINS)),
    productName: e.PRODUCT_NAME?.trim() || 'MCP Connect Broker',
    logoUrl: take(() => (e.LOGO_URL ? parseUrl('LOGO_URL', e.LOGO_URL, { allowPath: true }) : undefined)),
    rateLimitPerMinute: take(() => integer('RATE_LIMIT_PER_MINUTE', e.RATE_LIMIT_PER_MINUTE, 60, 0, 100_000)),
    mcpRateLimitPerMinute: take(() => integer('MCP_RATE_LIMIT_PER_MINUTE', e.MCP_RATE_LIMIT_PER_MINUTE, 600, 0, 1_000_000)),
    pendingConnectionsPerUser: take(() => integer('PENDING_CONNECTIONS_PER_USER', e.PENDING_CONNECTIONS_PER_USER, 20, 1, 1000)),
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    secureCookies: take(() => publicUrl.protocol === 'https:'),
    metrics: {
      token: take(() => metricsToken(e.METRICS_TOKEN)),
      port: take(() => (e.METRICS_PORT ? integer('METRICS_PORT', e.METRICS_PORT, 0, 1, 65535) : undefined)),
    },
    tracing: tracingSettings({
      disabled: take(() => sdkDisabled(e.OTEL_SDK_DISABLED)),
      exporters: take(() => traceExporters(e.OTEL_TRACES_EXPORTER)),
      endpoint: take(() => otlpEndpoint('OTEL_EXPORTER_OTLP_ENDPOINT', e.OTEL_EXPORTER_OTLP_ENDPOINT)),
      tracesEndpoint: take(() => otlpEndpoint('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)),
      serviceName: e.OTEL_SERVICE_NAME,
    }),
  };
  problems.throwIfAny();
  return config;
}

/**
 * The variables as `rawSchema` reads them. Missing or empty required ones are recorded and left out
 * (their steps then yield placeholders), so the others are still checked in the same go.
 */
function readRaw(env: NodeJS.ProcessEnv, problems: ConfigProblems): z.infer<typeof rawSchema> {
  const parsed = rawSchema.safeParse(env);
  if (parsed.success) return parsed.data;
  const refused = new Set(parsed.error.issues.map((issue) => String(issue.path[0])));
  for (const name of refused) problems.add(env[name] === undefined ? requiredMessage(name) : `${name} must not be empty`);
  const rest = Object.fromEntries(Object.entries(env).filter(([name]) => !refused.has(name)));
  return rawSchema.partial().parse(rest) as z.infer<typeof rawSchema>;
}

function requiredMessage(name: string): string {
  return name === 'TOKEN_ENCRYPTION_KEY' ? TOKEN_KEY_REQUIRED : `${name} is required`;
}

/**
 * For command-line entry points: the configuration, or one stderr line per bad variable and exit
 * code 1 (no stack trace).
 */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(err.problems.map((p) => `Configuration error: ${p}\n`).join(''));
      process.exit(1);
    }
    throw err;
  }
}
