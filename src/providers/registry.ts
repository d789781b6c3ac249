// The providers a configuration describes, built once here for every process that acts on
// connections: the broker (src/broker.ts) and `npm run admin` (src/cli/admin/run.ts). Both must
// agree, or a connection the broker made (an `auth: mcp` upstream's) is one the admin cannot revoke.
import type { Sealer } from '../crypto/index.js';
import type { Logger } from '../log.js';
import { EgressRule } from '../net/egress-rule.js';
import { OAuthProvider } from './oauth-provider.js';
import type { Provider } from './provider.js';
import type { Store } from '../store/index.js';
import type { ProviderDefinition } from './definition.js';
import { createMcpAuthProvider, type McpAuthProvider } from './mcp-auth/index.js';

/**
 * The part of the configuration (src/config/env.ts `Config`) the providers are built from, spelled
 * out here: src/config/ reads provider definitions from src/providers/, so src/providers/ does not
 * import src/config/ back (test/layering.test.ts holds the folders to no cycle).
 */
export interface ProviderSetConfig {
  providers: ReadonlyArray<{ definition: ProviderDefinition; clientId: string; clientSecret: string; scopes?: string[] }>;
  upstreams: ReadonlyArray<{
    id: string;
    displayName: string;
    url: URL;
    scopes: string[];
    auth: { kind: string; clientId?: string; clientSecret?: string };
  }>;
  egress: Parameters<typeof EgressRule.from>[0];
  publicUrl: URL;
  productName: string;
  providerTimeoutMs: number;
}

export interface ProviderSet {
  /** Every provider by id: the configured `providers`, then the `auth: mcp` upstreams under their upstream id. */
  providers: Map<string, Provider>;
  /** The `auth: mcp` upstreams' providers (the broker serves their client ID metadata documents). */
  mcpAuthProviders: McpAuthProvider[];
}

export interface ProviderSetDeps {
  store: Store;
  /** Seals the client secrets of the upstreams' dynamic registrations (the token sealer). */
  sealer: Sealer;
  log: Logger;
  /** The GitHub the broker talks to is the built-in sandbox (development mode). */
  sandboxGitHub?: boolean;
}

/** The providers `config` describes, over `deps.store` and `deps.sealer`. */
export function buildProviders(config: ProviderSetConfig, deps: ProviderSetDeps): ProviderSet {
  const providers = new Map<string, Provider>();
  for (const p of config.providers) {
    providers.set(
      p.definition.id,
      new OAuthProvider({
        definition: p.definition,
        clientId: p.clientId,
        clientSecret: p.clientSecret,
        timeoutMs: config.providerTimeoutMs,
        ...(p.scopes ? { scopes: p.scopes } : {}),
        sandbox: p.definition.id === 'github' && (deps.sandboxGitHub ?? false),
      }),
    );
  }
  // An `auth: mcp` upstream is a provider of its own, under the upstream's id (its /connect page, its
  // connections), whose authorization server is discovered from the upstream.
  const mcpAuthProviders: McpAuthProvider[] = [];
  const egress = EgressRule.from(config.egress);
  for (const upstream of config.upstreams) {
    if (upstream.auth.kind !== 'mcp') continue;
    const { clientId, clientSecret } = upstream.auth;
    const provider = createMcpAuthProvider({
      id: upstream.id,
      displayName: upstream.displayName,
      upstreamUrl: upstream.url,
      ...(upstream.scopes.length > 0 ? { scopes: upstream.scopes } : {}),
      publicUrl: config.publicUrl,
      store: deps.store,
      sealer: deps.sealer,
      clientName: config.productName,
      timeoutMs: config.providerTimeoutMs,
      egress,
      log: deps.log,
      ...(clientId ? { clientId, ...(clientSecret ? { clientSecret } : {}) } : {}),
    });
    mcpAuthProviders.push(provider);
    providers.set(upstream.id, provider);
  }
  return { providers, mcpAuthProviders };
}
