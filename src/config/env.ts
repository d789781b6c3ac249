import { z } from 'zod';
import { keyIdFor } from '../crypto/seal.js';

import { ConfigError } from './errors.js';
import { loadProviders, type ConfiguredProvider } from './providers.js';

export { ConfigError } from './errors.js';

export interface Config {
  port: number;
  host: string;
  publicUrl: URL;
  /** The MCP endpoint, `<PUBLIC_URL>/mcp`. */
  mcpUrl: URL;
  /** The resource (token audience) the MCP access tokens must carry. */
  audience: string;
  /** Scopes every MCP access token must carry, advertised in the resource metadata and 401 challenges. */
  mcpScopes: string[];
  /** The store: PostgreSQL when `url` is set (shared by every instance), else SQLite at `path`. */
  database: { url: string | undefined; path: string; poolMax: number; statementTimeoutMs: number };
  /** `issuerId` is OIDC_ISSUER exactly as configured: the identifier, compared as a string. */
  oidc: { issuer: URL; issuerId: string; clientId: string; clientSecret: string; authMethod: 'client_secret_basic' | 'client_secret_post' };
  github: { clientId: string; clientSecret: string; webUrl: URL; apiUrl: URL; appType: 'oauth-app' | 'github-app' };
  /** Every provider this instance connects to (GitHub first), with its credentials. */
  providers: ConfiguredProvider[];
  /** When one upstream account is already linked to another principal: refuse (default) or allow. */
  sharedAccountPolicy: 'refuse' | 'allow';
  brokerSecret: Buffer;
  /** The key that seals new rows (the first of `tokenKeys`). */
  tokenEncryptionKey: Buffer;
  /** Ordered key ring: the first key seals, every key opens. */
  tokenKeys: Array<{ id: string; key: Buffer }>;
  /** How long a repeated tool call waits for the browser flow to finish before asking again. */
  repeatHoldMs: number;
  /** How long a call to a provider (token endpoint, API) may take before it counts as down. */
  providerTimeoutMs: number;
  /** Lifetime of a connect link. */
  connectLinkTtlSeconds: number;
  /** Host names accepted in `Host`/`Origin` besides PUBLIC_URL's own. */
  allowedHosts: string[];
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
}

const LOOPBACK_HOSTNAMES = new Set(['localhost', '[::1]', '::1']);

export function isLoopbackHostname(hostname: string): boolean {
  return LOOPBACK_HOSTNAMES.has(hostname) || /^127(\.\d{1,3}){3}$/.test(hostname);
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

/** Drops one trailing slash so `new URL('mcp', base)`-style joins and comparisons stay exact. */
function withoutTrailingSlash(url: URL): string {
  return url.href.endsWith('/') ? url.href.slice(0, -1) : url.href;
}

const rawSchema = z.object({
  PORT: z.string().optional(),
  HOST: z.string().optional(),
  PUBLIC_URL: z.string(),
  MCP_AUDIENCE: z.string().optional(),
  MCP_SCOPES: z.string().optional(),
  DATABASE_PATH: z.string().optional(),
  DATABASE_URL: z.string().optional(),
  DATABASE_POOL_MAX: z.string().optional(),
  DATABASE_STATEMENT_TIMEOUT_MS: z.string().optional(),
  OIDC_ISSUER: z.string(),
  OIDC_CLIENT_ID: z.string().min(1),
  OIDC_CLIENT_SECRET: z.string().min(1),
  OIDC_CLIENT_AUTH_METHOD: z.string().optional(),
  GITHUB_CLIENT_ID: z.string().min(1),
  GITHUB_CLIENT_SECRET: z.string().min(1),
  GITHUB_WEB_URL: z.string().optional(),
  GITHUB_API_URL: z.string().optional(),
  GITHUB_APP_TYPE: z.string().optional(),
  PROVIDERS_FILE: z.string().optional(),
  SHARED_ACCOUNT_POLICY: z.string().optional(),
  BROKER_SECRET: z.string(),
  TOKEN_ENCRYPTION_KEY: z.string().optional(),
  TOKEN_ENCRYPTION_KEYS: z.string().optional(),
  REPEAT_HOLD_SECONDS: z.string().optional(),
  CONNECT_LINK_TTL_SECONDS: z.string().optional(),
  PROVIDER_TIMEOUT_SECONDS: z.string().optional(),
  ALLOWED_HOSTS: z.string().optional(),
  PRODUCT_NAME: z.string().optional(),
  LOGO_URL: z.string().optional(),
  RATE_LIMIT_PER_MINUTE: z.string().optional(),
  MCP_RATE_LIMIT_PER_MINUTE: z.string().optional(),
  PENDING_CONNECTIONS_PER_USER: z.string().optional(),
  TRUST_PROXY: z.string().optional(),
});

function integer(name: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max} (got "${value}")`);
  }
  return n;
}

function number(name: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be a number between ${min} and ${max} (got "${value}")`);
  }
  return n;
}

/** `postgres://` or `postgresql://` with a host; the value itself (with its password) is never echoed. */
function parseDatabaseUrl(value: string | undefined): string | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    throw new ConfigError('DATABASE_URL must be a URL such as postgres://user:password@host:5432/database');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') throw new ConfigError(`DATABASE_URL must start with postgres:// (got "${url.protocol}//…"); leave it unset for SQLite`);
  if (!url.hostname && !url.searchParams.get('host')) throw new ConfigError('DATABASE_URL must name a host');
  return value.trim();
}

function oneOf<const T extends readonly string[]>(name: string, value: string | undefined, allowed: T, fallback: T[number]): T[number] {
  if (value === undefined || value === '') return fallback;
  if ((allowed as readonly string[]).includes(value)) return value as T[number];
  throw new ConfigError(`${name} must be one of ${allowed.join(', ')} (got "${value}")`);
}

function decodeKey(name: string, value: string): Buffer {
  const key = /^[A-Za-z0-9+/_-]+={0,2}$/.test(value) ? Buffer.from(value, 'base64') : Buffer.alloc(0);
  if (key.length !== 32) throw new ConfigError(`${name} must be the base64 encoding of exactly 32 bytes (got ${key.length} bytes)`);
  return key;
}

/**
 * TOKEN_ENCRYPTION_KEYS is `id:base64,id:base64,...` (the first seals); TOKEN_ENCRYPTION_KEY alone is
 * a one-key ring, and beside TOKEN_ENCRYPTION_KEYS it stays readable until `npm run rotate-keys`.
 */
function parseKeyRing(ring: string | undefined, single: string | undefined): Array<{ id: string; key: Buffer }> {
  const keys: Array<{ id: string; key: Buffer }> = [];
  for (const entry of (ring ?? '').split(',').map((p) => p.trim()).filter(Boolean)) {
    const colon = entry.indexOf(':');
    const id = colon > 0 ? entry.slice(0, colon) : '';
    if (!/^[A-Za-z0-9_-]{1,32}$/.test(id)) throw new ConfigError('TOKEN_ENCRYPTION_KEYS must be a comma-separated list of id:base64 entries (ids of letters, digits, - and _)');
    if (keys.some((k) => k.id === id)) throw new ConfigError(`TOKEN_ENCRYPTION_KEYS names the key id "${id}" twice`);
    keys.push({ id, key: decodeKey(`TOKEN_ENCRYPTION_KEYS (key "${id}")`, entry.slice(colon + 1)) });
  }
  if (single !== undefined) {
    const key = decodeKey('TOKEN_ENCRYPTION_KEY', single);
    if (!keys.some((k) => k.key.equals(key))) keys.push({ id: keyIdFor(key), key });
  }
  if (keys.length === 0) throw new ConfigError(ring === undefined && single === undefined ? 'TOKEN_ENCRYPTION_KEY is required' : 'TOKEN_ENCRYPTION_KEY must not be empty');
  return keys;
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
 * @throws {ConfigError} naming the first variable that is missing or malformed.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = rawSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0]);
    throw new ConfigError(env[name] === undefined ? `${name} is required` : `${name} must not be empty`);
  }
  const e = parsed.data;

  const port = integer('PORT', e.PORT, 3000, 0, 65535);
  const host = e.HOST?.trim() || '127.0.0.1';
  const publicUrl = parseUrl('PUBLIC_URL', e.PUBLIC_URL, { allowPath: false });
  const mcpUrl = new URL('/mcp', publicUrl);
  const audience = e.MCP_AUDIENCE ? withoutTrailingSlash(parseUrl('MCP_AUDIENCE', e.MCP_AUDIENCE, { allowPath: true })) : mcpUrl.href;

  const brokerSecret = Buffer.from(e.BROKER_SECRET, 'utf8');
  if (brokerSecret.length < 32) throw new ConfigError(`BROKER_SECRET must be at least 32 bytes (got ${brokerSecret.length})`);

  const github = {
    clientId: e.GITHUB_CLIENT_ID,
    clientSecret: e.GITHUB_CLIENT_SECRET,
    webUrl: parseUrl('GITHUB_WEB_URL', e.GITHUB_WEB_URL ?? 'https://github.com', { allowPath: true }),
    apiUrl: parseUrl('GITHUB_API_URL', e.GITHUB_API_URL ?? 'https://api.github.com', { allowPath: true }),
    appType: oneOf('GITHUB_APP_TYPE', e.GITHUB_APP_TYPE, ['oauth-app', 'github-app'] as const, 'oauth-app'),
  };
  const tokenKeys = parseKeyRing(e.TOKEN_ENCRYPTION_KEYS, e.TOKEN_ENCRYPTION_KEY);

  const allowedHosts = (e.ALLOWED_HOSTS ?? '').split(',').map((h) => h.trim().toLowerCase()).filter(Boolean);

  return {
    port,
    host,
    publicUrl,
    mcpUrl,
    audience,
    mcpScopes: (e.MCP_SCOPES ?? '').split(/[\s,]+/).filter(Boolean),
    database: {
      url: parseDatabaseUrl(e.DATABASE_URL),
      path: e.DATABASE_PATH?.trim() || './data/broker.db',
      poolMax: integer('DATABASE_POOL_MAX', e.DATABASE_POOL_MAX, 10, 1, 1000),
      statementTimeoutMs: integer('DATABASE_STATEMENT_TIMEOUT_MS', e.DATABASE_STATEMENT_TIMEOUT_MS, 5000, 100, 600_000),
    },
    oidc: {
      issuer: parseUrl('OIDC_ISSUER', e.OIDC_ISSUER, { allowPath: true }),
      issuerId: e.OIDC_ISSUER,
      clientId: e.OIDC_CLIENT_ID,
      clientSecret: e.OIDC_CLIENT_SECRET,
      authMethod: authMethod(e.OIDC_CLIENT_AUTH_METHOD),
    },
    github,
    providers: loadProviders(env, { githubWebUrl: github.webUrl, githubApiUrl: github.apiUrl, githubAppType: github.appType }),
    sharedAccountPolicy: oneOf('SHARED_ACCOUNT_POLICY', e.SHARED_ACCOUNT_POLICY, ['refuse', 'allow'] as const, 'refuse'),
    brokerSecret,
    tokenEncryptionKey: tokenKeys[0]!.key,
    tokenKeys,
    repeatHoldMs: Math.round(number('REPEAT_HOLD_SECONDS', e.REPEAT_HOLD_SECONDS, 20, 0, 50) * 1000),
    providerTimeoutMs: Math.round(number('PROVIDER_TIMEOUT_SECONDS', e.PROVIDER_TIMEOUT_SECONDS, 10, 0.1, 120) * 1000),
    connectLinkTtlSeconds: integer('CONNECT_LINK_TTL_SECONDS', e.CONNECT_LINK_TTL_SECONDS, 600, 30, 3600),
    allowedHosts,
    productName: e.PRODUCT_NAME?.trim() || 'MCP Connect Broker',
    logoUrl: e.LOGO_URL ? parseUrl('LOGO_URL', e.LOGO_URL, { allowPath: true }) : undefined,
    rateLimitPerMinute: integer('RATE_LIMIT_PER_MINUTE', e.RATE_LIMIT_PER_MINUTE, 60, 0, 100_000),
    mcpRateLimitPerMinute: integer('MCP_RATE_LIMIT_PER_MINUTE', e.MCP_RATE_LIMIT_PER_MINUTE, 600, 0, 1_000_000),
    pendingConnectionsPerUser: integer('PENDING_CONNECTIONS_PER_USER', e.PENDING_CONNECTIONS_PER_USER, 20, 1, 1000),
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    secureCookies: publicUrl.protocol === 'https:',
  };
}

/**
 * For command-line entry points: the configuration, or one line naming the bad variable on stderr
 * and exit code 1 (no stack trace).
 */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`Configuration error: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}
