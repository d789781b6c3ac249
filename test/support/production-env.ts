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
