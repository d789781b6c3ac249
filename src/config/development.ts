import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/**
 * The settings `npm run dev` gives the broker, in one place: the development broker (src/dev/, not
 * part of the build) starts with them, and `npm run admin` reads the same database with them when
 * nothing is configured (`npm run admin` after `npm run dev`, with no variables set).
 */

/** The broker pages' client at the embedded IdP. */
export const DEV_PAGES_CLIENT_ID = 'connect-broker-pages';
/** The broker's OAuth app at the sandbox GitHub. */
export const SANDBOX_GITHUB_CLIENT_ID = 'Iv1.sandbox-broker';

/** The generated secrets the broker's own settings take from `dev-secrets.json` (src/dev/secrets.ts writes it). */
export interface DevelopmentSecrets {
  brokerSecret: string;
  tokenEncryptionKey: string;
  pagesClientSecret: string;
  sandboxGitHubClientSecret: string;
  exampleServiceSecret: string;
}

/** Where development mode keeps its files: the SQLite database, and beside it the secrets and the generated PROVIDERS_FILE. */
export interface DevelopmentFiles {
  databasePath: string;
  secretsPath: string;
  servicesPath: string;
}

export function developmentFiles(env: NodeJS.ProcessEnv): DevelopmentFiles {
  const databasePath = resolve(env.DATABASE_PATH?.trim() || './data/broker.db');
  return {
    databasePath,
    secretsPath: join(dirname(databasePath), 'dev-secrets.json'),
    servicesPath: join(dirname(databasePath), 'dev-services.yaml'),
  };
}

export interface DevelopmentSettings {
  port: string;
  host: string;
  publicUrl: string;
  issuer: string;
  sandboxBase: string;
  /** GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET are both set: the real GitHub instead of the sandbox. */
  realGitHub: boolean;
  /** The example issue service's MCP URL, unless PROVIDERS_FILE is the operator's. */
  exampleUrl: URL | undefined;
}

/** PORT, HOST, PUBLIC_URL and EXAMPLE_SERVICE_PORT as development mode reads them (its loopback checks are the dev broker's). */
export function developmentSettings(env: NodeJS.ProcessEnv): DevelopmentSettings {
  const port = env.PORT ?? '3000';
  const publicUrl = (env.PUBLIC_URL ?? `http://127.0.0.1:${port}`).replace(/\/+$/, '');
  const hostname = URL.parse(publicUrl)?.hostname ?? '127.0.0.1';
  const examplePort = env.EXAMPLE_SERVICE_PORT ?? String(Number(port) + 1);
  return {
    port,
    host: env.HOST ?? '127.0.0.1',
    publicUrl,
    issuer: `${publicUrl}/idp`,
    sandboxBase: `${publicUrl}/sandbox/github`,
    realGitHub: !!(env.GITHUB_CLIENT_ID && env.GITHUB_CLIENT_SECRET),
    exampleUrl: env.PROVIDERS_FILE ? undefined : new URL(`http://${hostname}:${examplePort}/mcp`),
  };
}

/** The environment the development broker's configuration is loaded from: `env`, with what development mode fills in. */
export function developmentEnv(
  env: NodeJS.ProcessEnv,
  settings: DevelopmentSettings,
  files: DevelopmentFiles,
  secrets: DevelopmentSecrets,
): NodeJS.ProcessEnv {
  const { port, host, publicUrl, issuer, sandboxBase, realGitHub, exampleUrl } = settings;
  return {
    ...env,
    PORT: port,
    HOST: host,
    PUBLIC_URL: publicUrl,
    DATABASE_PATH: files.databasePath,
    OIDC_ISSUER: issuer,
    OIDC_CLIENT_ID: DEV_PAGES_CLIENT_ID,
    OIDC_CLIENT_SECRET: secrets.pagesClientSecret,
    OIDC_CLIENT_AUTH_METHOD: 'client_secret_basic',
    // The embedded IdP issues the `mcp` scope for the /mcp resource; clients learn it from the metadata.
    MCP_SCOPES: env.MCP_SCOPES ?? 'mcp',
    BROKER_SECRET: env.BROKER_SECRET ?? secrets.brokerSecret,
    TOKEN_ENCRYPTION_KEY: env.TOKEN_ENCRYPTION_KEY ?? secrets.tokenEncryptionKey,
    ...(exampleUrl ? { PROVIDERS_FILE: files.servicesPath, SERVICE_ISSUE_SERVICE_SECRET: secrets.exampleServiceSecret } : {}),
    ...(realGitHub
      ? {}
      : {
          GITHUB_CLIENT_ID: SANDBOX_GITHUB_CLIENT_ID,
          GITHUB_CLIENT_SECRET: secrets.sandboxGitHubClientSecret,
          GITHUB_WEB_URL: sandboxBase,
          GITHUB_API_URL: `${sandboxBase}/api/v3`,
        }),
  };
}

/**
 * Variables only a configured (production-style) broker has: when any is set, `npm run admin`
 * reads that configuration and never the development files.
 */
const CONFIGURED = [
  'OIDC_ISSUER',
  'OIDC_CLIENT_ID',
  'OIDC_CLIENT_SECRET',
  'BROKER_SECRET',
  'TOKEN_ENCRYPTION_KEY',
  'TOKEN_ENCRYPTION_KEYS',
  'DATABASE_URL',
];

/** The line `npm run admin` writes on stderr when it uses the development files. */
export const USING_DEVELOPMENT_FILES = (databasePath: string) =>
  `Using the development database and secrets (npm run dev): ${databasePath}`;

/**
 * For `npm run admin` with nothing configured: the development broker's environment, when
 * NODE_ENV is not `production`, none of the configured broker's variables is set, and `npm run dev`
 * left its database and `dev-secrets.json` (its PROVIDERS_FILE too, unless PROVIDERS_FILE is set).
 * Undefined otherwise: the environment is then read as it is, and its problems reported.
 */
export function developmentEnvForAdmin(env: NodeJS.ProcessEnv): { env: NodeJS.ProcessEnv; databasePath: string } | undefined {
  if (env.NODE_ENV === 'production') return undefined;
  if (CONFIGURED.some((name) => env[name] !== undefined)) return undefined;
  const files = developmentFiles(env);
  if (!existsSync(files.databasePath) || !existsSync(files.secretsPath)) return undefined;
  let secrets: Partial<DevelopmentSecrets>;
  try {
    secrets = JSON.parse(readFileSync(files.secretsPath, 'utf8')) as Partial<DevelopmentSecrets>;
  } catch {
    return undefined;
  }
  const fields = ['brokerSecret', 'tokenEncryptionKey', 'pagesClientSecret', 'sandboxGitHubClientSecret', 'exampleServiceSecret'] as const;
  if (fields.some((name) => typeof secrets[name] !== 'string')) return undefined;
  const settings = developmentSettings(env);
  // The example service's entry (and the sandbox upstream) live in the file npm run dev writes: without it, none.
  const usable = settings.exampleUrl && !existsSync(files.servicesPath) ? { ...settings, exampleUrl: undefined } : settings;
  return { env: developmentEnv(env, usable, files, secrets as DevelopmentSecrets), databasePath: files.databasePath };
}
