import type { Config } from './config/env.js';
import { AccessTokenVerifier } from './auth/bearer.js';
import { IdentityProviderHealth } from './auth/idp-health.js';
import { OidcClient } from './auth/oidc-client.js';
import { Sessions } from './auth/sessions.js';
import { CompletionWatcher } from './connect/completion-watcher.js';
import { ConnectionService } from './connections/index.js';
import { ConnectLinks } from './connect/links.js';
import { Sealer } from './crypto/index.js';
import { createApp } from './app.js';
import type { Logger } from './log.js';
import { createToolStateCodec } from './mcp/request-state.js';
import { builtinToolNames, createMcpEndpointHandler, SERVER_INFO } from './mcp/server.js';
import { ConfigError } from './config/errors.js';
import { Gateway } from './gateway/index.js';
import { GitHubApi } from './providers/github/api.js';
import { OAuthProvider } from './providers/oauth-provider.js';
import type { Provider } from './providers/provider.js';
import { openStore, type Store } from './store/index.js';
import type { Express } from 'express';

export interface Broker {
  app: Express;
  store: Store;
  watcher: CompletionWatcher;
  /** The IdP's reachability; `startBroker` starts its checks once the server listens (the dev IdP is served by it). */
  idpHealth: IdentityProviderHealth;
  close(): Promise<void>;
}

export interface BrokerOptions {
  /** Routes served by the same app ahead of the broker's own (development mode). */
  mount?: (app: Express, store: Store) => void;
  /** The GitHub the broker talks to is the built-in sandbox: say so on pages and in tool results. */
  sandboxGitHub?: boolean;
}

/** Wires configuration into the store, the crypto, the providers, the MCP handler and the pages. */
export async function createBroker(config: Config, log: Logger, options: BrokerOptions = {}): Promise<Broker> {
  const store = await openStore(config.database, (event, detail) => log.warn(event, detail));
  const sealer = new Sealer(config.tokenKeys);
  const providers = new Map<string, Provider>(
    config.providers.map((p) => [
      p.definition.id,
      new OAuthProvider({
        definition: p.definition,
        clientId: p.clientId,
        clientSecret: p.clientSecret,
        timeoutMs: config.providerTimeoutMs,
        ...(p.scopes ? { scopes: p.scopes } : {}),
        sandbox: p.definition.id === 'github' && (options.sandboxGitHub ?? false),
      }),
    ]),
  );
  // Gateway: an `auth: mcp` upstream is a provider of its own, under the upstream's id (its /connect
  // page, its connections). MERGE(G3): build it here with createMcpAuthProvider from src/gateway/mcp-auth/.
  const mcpUpstream = config.upstreams.find((u) => u.auth.kind === 'mcp');
  if (mcpUpstream) {
    await store.close();
    throw new ConfigError(`PROVIDERS_FILE upstreams.${mcpUpstream.id}.auth: auth: mcp upstreams are not available yet`);
  }
  const github = { provider: providers.get('github')!, api: new GitHubApi(config.github.apiUrl, config.providerTimeoutMs) };
  const idp = new OidcClient({
    issuer: config.oidc.issuer,
    clientId: config.oidc.clientId,
    clientSecret: config.oidc.clientSecret,
    authMethod: config.oidc.authMethod,
  });
  const verifier = new AccessTokenVerifier(idp, config.audience, config.accessTokenTypes);
  const idpHealth = new IdentityProviderHealth(idp, verifier, config.oidc.issuerId, log);
  const sessions = new Sessions(store, { secure: config.secureCookies }, config.brokerSecret);
  const watcher = new CompletionWatcher(store);
  const links = new ConnectLinks(store, config.publicUrl, config.brokerSecret, config.connectLinkTtlSeconds, {
    maxOpenPerUser: config.pendingConnectionsPerUser,
    onCancelled: (pendingId) => void watcher.notify(pendingId),
  });
  const connections = new ConnectionService(store, sealer, log, { providerTimeoutMs: config.providerTimeoutMs });
  const codec = createToolStateCodec(config.brokerSecret, config.connectLinkTtlSeconds);
  const builtins = new Set(builtinToolNames(config.builtinTools));
  const gateway =
    config.upstreams.length > 0
      ? new Gateway({
          upstreams: config.upstreams,
          providers,
          builtins,
          store,
          connections,
          log,
          maxResultBytes: config.upstreamMaxResultBytes,
          clientInfo: SERVER_INFO,
          // MERGE(G2): seams: { onScopeChallenge, relayInputRequired, repeatParams } from src/gateway/relay/.
        })
      : undefined;
  if (gateway) {
    try {
      await gateway.start();
    } catch (err) {
      await store.close();
      throw err;
    }
  }
  const mcpHandler = createMcpEndpointHandler({
    publicUrl: config.publicUrl,
    repeatHoldMs: config.repeatHoldMs,
    store,
    links,
    connections,
    watcher,
    codec,
    log,
    github,
    providers,
    disabledTools: new Set(builtinToolNames({}).filter((name) => !builtins.has(name))),
    ...(gateway ? { gateway } : {}),
  });
  const app = createApp({
    config,
    store,
    sessions,
    idp,
    idpHealth,
    verifier,
    mcpHandler,
    links,
    connections,
    watcher,
    providers,
    log,
    publicUrl: config.publicUrl,
    sharedAccountPolicy: config.sharedAccountPolicy,
    ...(options.mount ? { mount: (app: Express) => options.mount!(app, store) } : {}),
  });

  // Discover the OIDC providers now, so pages name their authorization origins in their CSP from the
  // first request on (failures are retried on first use); the IdP's discovery is idpHealth's first check.
  for (const provider of providers.values()) void provider.prepare().catch(() => undefined);

  const pruneTimer = setInterval(() => {
    store.pending.prune().catch((err: unknown) => log.warn('prune_failed', { message: err instanceof Error ? err.message : String(err) }));
  }, 60_000);
  pruneTimer.unref();

  return {
    app,
    store,
    watcher,
    idpHealth,
    async close() {
      clearInterval(pruneTimer);
      idpHealth.close();
      watcher.close();
      // A refresh GitHub already answered must be stored, or its rotated refresh token is lost.
      await connections.drain();
      await mcpHandler.close();
      gateway?.close();
      await store.close();
    },
  };
}
