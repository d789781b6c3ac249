import type { Config } from './config/env.js';
import { AccessTokenVerifier } from './auth/bearer.js';
import { IdentityProviderHealth } from './auth/idp-health.js';
import { OidcClient } from './auth/oidc-client.js';
import { Sessions } from './auth/sessions.js';
import { CompletionWatcher } from './connections/completion-watcher.js';
import { ConnectionService } from './connections/index.js';
import { ConnectLinks } from './connections/links.js';
import { deriveKey, Sealer } from './crypto/index.js';
import { ApprovalGates } from './approvals/index.js';
import type { ApprovalGate } from './policy/index.js';
import { createApp } from './app.js';
import type { Logger } from './log.js';
import { UpstreamStates, verifyToolState, type UpstreamState } from './gateway/relay/upstream-state.js';
import { createMcpEndpointHandler, createToolStateCodec, SERVER_INFO, type BuiltinState, type ToolDeps } from './mcp/index.js';
import { builtinToolNames } from './mcp/server.js';
import { Gateway } from './gateway/index.js';
import { clientDocumentRoutes } from './providers/mcp-auth/index.js';
import { buildProviders } from './providers/registry.js';
import { relaySeams } from './gateway/relay/seams.js';
import { GitHubApi } from './providers/github/api.js';
import { auditChainKey, openStore, type Store } from './store/index.js';
import { EgressRule } from './net/egress-rule.js';
import { createWebhooks, type DeliveryOptions, type WebhookDelivery } from './webhooks/index.js';
import type { Express } from 'express';
import { metrics } from './observability/metrics.js';
import { startAuditRetention, type AuditRetentionOptions } from './audit/retention.js';
import { startAuditHeadLog } from './audit/heads.js';
import { backgroundFailure } from './observability/process-guards.js';
import { ReconciledCounters } from './http/reconciled-counters.js';

export interface Broker {
  app: Express;
  store: Store;
  watcher: CompletionWatcher;
  /** The IdP's reachability; `startBroker` starts its checks once the server listens (the dev IdP is served by it). */
  idpHealth: IdentityProviderHealth;
  /** What the MCP tools are built with (the gateway's forwarder takes the same). */
  toolDeps: ToolDeps;
  /** Sends the webhook outbox (running from creation, idle without endpoints). */
  webhooks: WebhookDelivery;
  /** The approval gate (src/approvals/): what the policy's `approve` effect calls, and the /approvals pages' state. */
  approvals: ApprovalGates;
  /**
   * Resolves once the `upstream_call` audit rows of the calls forwarded so far, written after their
   * answers (src/gateway/audit.ts), are in the store. Other rows are written before the answer or
   * with their turn's batch (SECURITY.md, guarantee 83).
   */
  forwardedCallsAudited(): Promise<void>;
  close(): Promise<void>;
}

export interface BrokerOptions {
  /**
   * Stands in for the approval gate the edges call (tests of how the MCP edge, the gateway and the
   * exchange translate each outcome); the /approvals pages keep the real one.
   */
  approvalGate?: ApprovalGate;
  /** Routes served by the same app ahead of the broker's own (development mode). */
  mount?: (app: Express, store: Store) => void;
  /** The GitHub the broker talks to is the built-in sandbox: say so on pages and in tool results. */
  sandboxGitHub?: boolean;
  /** Webhook delivery timing (tests shorten the retries; the defaults are the documented ones). */
  webhookDelivery?: DeliveryOptions;
  /** When the audit trail is pruned to AUDIT_RETENTION_DAYS (tests shorten it; default hourly, first a minute after start). */
  auditRetention?: AuditRetentionOptions;
}

/** Wires configuration into the store, the crypto, the providers, the MCP handler and the pages. */
export async function createBroker(config: Config, log: Logger, options: BrokerOptions = {}): Promise<Broker> {
  // Every row this instance audits is chained in its own stream (src/store/audit-chain.ts, docs/audit.md).
  const store = await openStore(config.database, (event, detail) => log.warn(event, detail), {
    auditChain: auditChainKey(config.brokerSecret),
  });
  const sealer = new Sealer(config.tokenKeys);
  // The same set `npm run admin` builds (src/providers/registry.ts), so the admin can revoke what the broker connected.
  const { providers, mcpAuthProviders } = buildProviders(config, {
    store,
    sealer,
    log,
    sandboxGitHub: options.sandboxGitHub ?? false,
  });
  const github = { provider: providers.get('github')!, api: new GitHubApi(config.github.apiUrl, config.providerTimeoutMs) };
  const idp = new OidcClient({
    issuer: config.oidc.issuer,
    clientId: config.oidc.clientId,
    clientSecret: config.oidc.clientSecret,
    authMethod: config.oidc.authMethod,
  });
  const verifier = new AccessTokenVerifier(idp, config.audience, config.accessTokenTypes, {
    resource: config.resource,
    subjectClaim: config.subjectClaim,
    pageClientId: config.oidc.clientId,
  });
  const idpHealth = new IdentityProviderHealth(idp, verifier, config.oidc.issuerId, log);
  const sessions = new Sessions(store, { secure: config.secureCookies }, config.brokerSecret);
  const watcher = new CompletionWatcher(store);
  const links = new ConnectLinks(store, config.publicUrl, config.brokerSecret, config.connectLinkTtlSeconds, {
    maxOpenPerUser: config.pendingConnectionsPerUser,
    onCancelled: (pendingId) => {
      watcher.notify(pendingId).catch(backgroundFailure('completion_wake'));
    },
  });
  const webhooks = createWebhooks(store, config.webhooks, log, { egress: EgressRule.from(config.egress), ...options.webhookDelivery });
  const connections = new ConnectionService(store, sealer, log, { providerTimeoutMs: config.providerTimeoutMs, events: webhooks.events });
  const approvals = new ApprovalGates({
    store,
    events: webhooks.events,
    publicUrl: config.publicUrl,
    // The policy compiled at start-up: its approve rules by id, and its version (no policy: no request applies).
    approvalRule: (ruleId) => config.policy?.approvalRule(ruleId),
    policyVersion: config.policy?.version ?? '',
    sealer: new Sealer([deriveKey(config.brokerSecret, 'approval-call')]),
  });
  const approvalGate: ApprovalGate = options.approvalGate ?? approvals;
  // One key signs the built-in tools' states and the gateway's.
  const codec = createToolStateCodec<BuiltinState | UpstreamState>(config.brokerSecret, config.connectLinkTtlSeconds);
  // Seals an upstream's requestState inside ours (src/gateway/relay/); the gateway's forwarder takes it too.
  const upstreamStates = new UpstreamStates(config.brokerSecret);
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
          seams: relaySeams({ codec, upstreamStates }),
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
  const toolDeps: ToolDeps = {
    publicUrl: config.publicUrl,
    repeatHoldMs: config.repeatHoldMs,
    store,
    links,
    connections,
    watcher,
    codec,
    verifyRequestState: verifyToolState({ codec, upstreamStates }),
    log,
    github,
    providers,
    disabledTools: new Set(builtinToolNames({}).filter((name) => !builtins.has(name))),
    ...(gateway ? { router: gateway } : {}),
    ...(config.policy ? { policy: config.policy, approvals: approvalGate } : {}),
  };
  const mcpHandler = createMcpEndpointHandler(toolDeps);
  const loadCounters = new ReconciledCounters(store, backgroundFailure('rate_limit_flush'));
  const app = createApp({
    config,
    store,
    loadCounters,
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
    approvals,
    approvalGate,
    ...(mcpAuthProviders.length > 0 ? { publicRoutes: [clientDocumentRoutes(mcpAuthProviders)] } : {}),
    ...(options.mount ? { mount: (app: Express) => options.mount!(app, store) } : {}),
  });

  // Discover the OIDC providers now, so pages name their authorization origins in their CSP from the
  // first request on (failures are retried on first use); the IdP's discovery is idpHealth's first check.
  for (const provider of providers.values()) void provider.prepare().catch(() => undefined);

  const pruneTimer = setInterval(() => {
    store.pending.prune().catch((err: unknown) => log.warn('prune_failed', { message: err instanceof Error ? err.message : String(err) }));
    approvals.prune().catch((err: unknown) => log.warn('prune_failed', { message: err instanceof Error ? err.message : String(err) }));
  }, 60_000);
  pruneTimer.unref();
  const auditRetention = startAuditRetention(store.audit, config.auditRetentionDays, log, options.auditRetention);
  const auditHeads = startAuditHeadLog(store.audit, log);
  const stopCountingPending = metrics.countPendingFrom(() => store.pending.countInFlight());
  webhooks.delivery.start();

  return {
    app,
    store,
    watcher,
    idpHealth,
    toolDeps,
    webhooks: webhooks.delivery,
    approvals,
    forwardedCallsAudited: async () => {
      await gateway?.auditSettled();
    },
    async close() {
      clearInterval(pruneTimer);
      await auditRetention.close();
      stopCountingPending();
      idpHealth.close();
      watcher.close();
      approvals.close();
      // A refresh GitHub already answered must be stored, or its rotated refresh token is lost.
      await connections.drain();
      // Attempts in flight are settled before the database closes (a cut one would only be sent again).
      await webhooks.delivery.close();
      await mcpHandler.close();
      // The forwarded calls' audit rows still queued are written before the database closes.
      await gateway?.close();
      // The hits counted in this process are added to the shared counters the other instances read.
      await loadCounters.close().catch(backgroundFailure('rate_limit_flush'));
      await auditHeads.close();
      await store.close();
    },
  };
}
