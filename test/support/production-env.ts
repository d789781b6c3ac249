import { randomBytes } from 'node:crypto';

/**
 * A complete, valid production-shaped environment with nothing optional set, then `overrides`
 * (a name set to `undefined` is removed): what `loadConfig` accepts without a dev mode.
 */
export function productionEnv(overrides: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PUBLIC_URL: 'https://broker.example.com',
    OIDC_ISSUER: 'https://idp.example.com',
    OIDC_CLIENT_ID: 'connect-broker',
    OIDC_CLIENT_SECRET: 'oidc-client-secret',
    GITHUB_CLIENT_ID: 'Iv1.0123456789abcdef',
    GITHUB_CLIENT_SECRET: 'github-client-secret',
    BROKER_SECRET: 'b'.repeat(32),
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
  };
  for (const [name, value] of Object.entries(overrides)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

/** The variables the broker cannot start without. */
export const REQUIRED = [
  'PUBLIC_URL',
  'OIDC_ISSUER',
  'OIDC_CLIENT_ID',
  'OIDC_CLIENT_SECRET',
  'GITHUB_CLIENT_ID',
  'GITHUB_CLIENT_SECRET',
  'BROKER_SECRET',
  'TOKEN_ENCRYPTION_KEY',
] as const;

/** The configuration error naming a missing required variable. */
export function missing(name: (typeof REQUIRED)[number]): string {
  return name === 'TOKEN_ENCRYPTION_KEY'
    ? 'TOKEN_ENCRYPTION_KEY is required (set TOKEN_ENCRYPTION_KEY or the key ring TOKEN_ENCRYPTION_KEYS)'
    : `${name} is required`;
}
