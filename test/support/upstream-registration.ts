// Test helper: the broker's client registration at an `auth: mcp` upstream's authorization server,
// made and read by the broker's own code (src/providers/mcp-auth/registration.ts: dynamic registration,
// the secret sealed with the key ring of `env`) over the database `env` names.
import { loadConfig } from '../../src/config/env.js';
import { Sealer } from '../../src/crypto/index.js';
import { discoverUpstreamAuthorization } from '../../src/providers/mcp-auth/index.js';
import { becomeClient, type UpstreamClient } from '../../src/providers/mcp-auth/registration.js';
import { createLogger } from '../../src/log.js';
import { openStore } from '../../src/store/index.js';
import type { ProtectedUpstream } from './mcp-auth-upstream.js';
import { LOOPBACK_EGRESS } from './egress.js';

/**
 * Becomes `upstream`'s client as the broker does for its `tracker` upstream: the registration stored
 * in the database when it is usable (its secret opens under the ring), else a new one (RFC 7591).
 */
export async function upstreamRegistration(env: Record<string, string>, upstream: ProtectedUpstream): Promise<UpstreamClient> {
  const config = loadConfig(env);
  const store = await openStore(config.database);
  try {
    const auth = await discoverUpstreamAuthorization(new URL(upstream.url), { name: 'Tracker', timeoutMs: 5_000, egress: LOOPBACK_EGRESS });
    return await becomeClient(auth, {
      name: 'Tracker',
      variablePrefix: 'TRACKER',
      redirectUri: `${env.PUBLIC_URL}/connect/tracker/callback`,
      scopes: ['mcp', 'openid', 'profile', 'offline_access'],
      documentUrl: undefined,
      clientName: 'MCP Connect Broker',
      store,
      sealer: new Sealer(config.tokenKeys),
      timeoutMs: 5_000,
      egress: LOOPBACK_EGRESS,
      log: createLogger('error'),
    });
  } finally {
    await store.close();
  }
}

/** How many dynamic registrations the upstream's authorization server received. */
export function registrations(upstream: ProtectedUpstream): number {
  return upstream.asRequests.filter((r) => r.method === 'POST' && r.path === '/reg').length;
}
