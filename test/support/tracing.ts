import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config/env.js';
import type { TracingSettings } from '../../src/observability/tracing.js';
import { productionEnv } from './production-env.js';

/** What `loadConfig` makes of these OTEL_* variables (beside a valid rest), as src/main.ts hands it to startTracing. */
export function tracingSettingsFor(otel: Record<string, string>): TracingSettings {
  return loadConfig(
    productionEnv({
      PUBLIC_URL: 'http://127.0.0.1:3000',
      OIDC_ISSUER: 'http://127.0.0.1:3001',
      BROKER_SECRET: randomBytes(32).toString('base64url'),
      ...otel,
    }),
  ).tracing;
}
