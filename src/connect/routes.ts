import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { Principal } from '../auth/principal.js';
import { samePrincipal } from '../auth/principal.js';
import { randomHandle, sha256Hex, type Sealer } from '../crypto/index.js';
import { BrokerError } from '../http/errors.js';
import { renderMessage, renderPage, type PageContext } from '../http/render.js';
import { allowFormAction, allowScriptNonce } from '../http/security-headers.js';
import type { Logger } from '../log.js';
import { pkcePair } from '../providers/oauth-client.js';
import { ProviderError, type Provider, type ProviderAccount, type ProviderTokens } from '../providers/provider.js';
import { scopeList } from '../providers/scopes.js';
import {
  OAUTH_FLOW_TTL_MS,
  StoreUnavailableError,
  type ConnectionRow,
  type OAuthFlow,
  type PendingConnection,
  type Store,
} from '../store/index.js';
import type { CompletionWatcher } from '../connections/completion-watcher.js';
import { summarizeConnection, type ConnectionService } from '../connections/index.js';
import { DECLINED_IN_CLIENT, type ConnectLinks } from '../connections/links.js';
import { CODE_EXCHANGE_FAILED, providerErrorReason } from '../connections/failure-reasons.js';
import { M } from './messages.js';
import { metrics } from '../observability/metrics.js';
import { backgroundFailure } from '../observability/process-guards.js';

export interface ConnectRouteDeps {
  publicUrl: URL;
  store: Store;
  links: ConnectLinks;
  connections: ConnectionService;
  watcher: CompletionWatcher;
  providers: ReadonlyMap<string, Provider>;
  page: PageContext;
  log: Logger;
  /** When the upstream account is already linked to another principal. */
  sharedAccountPolicy: 'refuse' | 'allow';
  requireCsrf: (req: Request, res: Response) => void;
  /** Rate limits of the connect pages and of the provider callbacks, run by the routes themselves. */
  limits: { connect: RequestHandler; callback: RequestHandler; connectStart: RequestHandler };
  /** Seals the PKCE verifier of an authorization under way, so a copy of the database cannot finish it. */
  verifierSealer: Sealer;
  /** Service id → display name, for "used by" on /connections (token exchange, src/exchange/). */
  serviceNames?: ReadonlyMap<string, string>;
  /** Provider id → who besides this server receives its tokens (the consent page names them). */
  tokenRecipients?: ReadonlyMap<string, TokenRecipients>;
}

/** Who the configuration sends a provider's tokens to: upstream MCP servers and the operator's services, by name. */
export interface TokenRecipients {
  upstreams: string[];
  services: string[];
}

/** Shows a link's consent page to its principal (see `openLink` in {@link connectRoutes}). */
export type OpenLink = (res: Response, providerId: string, handle: string | undefined, returnTo: string) => Promise<void>;

function verifierContext(flow: { pending_id: string; session_hash: string }) {
  return { issuer: 'connect', subject: `${flow.pending_id} ${flow.session_hash}`, provider: 'code_verifier' };
}

/** What a pending connection asks the person for (the consent page lists exactly these), none implied by another. */
function askedScopes(pending: PendingConnection, provider: Provider): string[] {
  return provider.withoutImplied(pending.scopes ? scopeList(pending.scopes) : provider.defaultScopes);
}

/** What goes into the authorization request: for added scopes, the provider decides whether to resend the granted ones. */
function scopesForAuthorization(pending: PendingConnection, provider: Provider, existing: ConnectionRow | undefined): string[] {
  const asked = askedScopes(pending, provider);
  return existing && existing.status === 'active' && pending.scopes
    ? provider.withoutImplied(provider.scopesToRequest(asked, scopeList(existing.scopes)))
    : asked;
}

/** A query or form value that must appear exactly once; duplicates and arrays are refused. */
function single(value: unknown): string | undefined {
  return typeof value === 'string' && value.length <= 4096 ? value : undefined;
}

/**
 * The connect pages: check the link, insist on the principal who asked, consent, hand over to the
 * provider with state + PKCE, and take the callback. Each step re-checks what the previous one
 * established, since every request can be forged on its own.
 */
export function connectRoutes(deps: ConnectRouteDeps): Router & { openLink: OpenLink } {
  const { publicUrl, store, links, connections, watcher, providers, page, log } = deps;
  const router = Router({ caseSensitive: true, strict: true });

  function providerFor(req: Request): Provider {
    return providerById(String(req.params.provider));
  }

  function providerById(id: string): Provider {
    const provider = providers.get(id);
    if (!provider) {
      throw new BrokerError(404, 'unknown_provider', 'This service does not connect to that provider.', { heading: 'Unknown provider' });
    }
    return provider;
  }

  async function settle(
    pending: PendingConnection,
    status: 'completed' | 'cancelled' | 'denied' | 'failed',
    reason?: string,
  ): Promise<void> {
    if (await store.pending.settle(pending.id, status, reason)) watcher.notify(pending.id).catch(backgroundFailure('completion_wake'));
  }

  /** Loads the pending connection behind a link and refuses anything but a live link for `provider`. */
  async function loadLink(handle: string | undefined, provider: Provider): Promise<PendingConnection> {
    const pending = handle ? await links.resolve(handle) : undefined;
    if (!pending || pending.provider !== provider.id) {
      throw new BrokerError(404, 'unknown_link', M.unknownLink, {
        heading: 'Link not found',
      });
    }
    if (pending.status === 'cancelled' && pending.outcome_reason === DECLINED_IN_CLIENT) {
      throw new BrokerError(410, 'link_declined', M.declinedInClient, {
        heading: 'This request was cancelled',
        action: { href: '/connections', label: 'See your connected accounts' },
      });
    }
    if (pending.status !== 'open' || pending.expires_at <= Date.now()) {
      const expired = pending.status === 'open';
      throw new BrokerError(410, expired ? 'link_expired' : 'link_used', expired ? M.linkExpired : M.linkUsed, {
        heading: expired ? 'This link has expired' : 'This link was already used',
        action: { href: '/connections', label: 'See your connected accounts' },
      });
    }
    return pending;
  }

  /**
   * The browser user must be the principal the link was made for: an anonymous browser is sent to
   * sign in (and back to `returnTo`), anyone else gets 403 and nothing else.
   */
  function requireOwner(res: Response, pending: PendingConnection, provider: Provider, returnTo: string): Principal | undefined {
    const viewer = res.locals.session?.principal;
    if (!viewer) {
      res.redirect(303, `/auth/login?returnTo=${encodeURIComponent(returnTo)}`);
      return undefined;
    }
    if (!samePrincipal(viewer, pending)) {
      log.warn('connect_principal_mismatch', { provider: provider.id, pending: pending.id });
      metrics.connectFlow(provider.id, 'refused');
      renderPage(
        res,
        page,
        'wrong-account',
        { title: 'Wrong account', providerName: provider.displayName, switchAction: '/auth/switch', returnTo },
        403,
      );
      return undefined;
    }
    return viewer;
  }

  /** A provider we cannot reach (e.g. OIDC discovery): the link is not used up, the page can be reloaded. */
  function unavailable(err: unknown, provider: Provider): BrokerError {
    if (!(err instanceof ProviderError)) throw err;
    return new BrokerError(503, 'provider_unavailable', M.providerUnavailable(err.message), {
      heading: `${provider.displayName} is unavailable`,
    });
  }

  /**
   * The consent page of the link `handle` for `providerId`, to its principal only: what a link opens,
   * and what an activation code opens (src/connect/activate.ts, which passes `/activate` as
   * `returnTo`). Every check of the link is made here, for both.
   */
  async function openLink(res: Response, providerId: string, handle: string | undefined, returnTo: string): Promise<void> {
    const provider = providerById(providerId);
    const pending = await loadLink(handle, provider);
    const viewer = requireOwner(res, pending, provider, returnTo);
    if (!viewer) return;
    // The consent form's redirect goes to the provider's authorization endpoint: know it before
    // this page's CSP is written (discovery, for OIDC providers).
    await provider.prepare().catch((err: unknown) => {
      throw unavailable(err, provider);
    });
    allowFormAction(res, provider.authorizationOrigin);
    const existing = await connections.find(viewer, provider.id);
    const asked = askedScopes(pending, provider);
    renderPage(res, page, 'consent', {
      title: `Connect ${provider.displayName}`,
      provider: { id: provider.id, displayName: provider.displayName },
      // A scope the provider's definition does not describe (one an upstream's challenge named) is shown by its raw name, and said to be so.
      scopes: asked.map((name) => {
        const known = provider.scopes.find((s) => s.name === name);
        return {
          name,
          description: known?.description ?? M.undescribedScope(provider.displayName),
          destructive: known?.destructive === true,
        };
      }),
      purpose: !existing ? 'connect' : existing.status === 'reauth_required' ? 'reconnect' : 'more_access',
      existingLogin: existing?.account_login,
      // A token exchange's link names the operator's service (from the configuration), not a client's self-chosen name.
      ...(pending.service_id ? { serviceName: pending.client_name } : { clientName: pending.client_name }),
      recipients: deps.tokenRecipients?.get(provider.id) ?? { upstreams: [], services: [] },
      askedFor: pending.purpose,
      handle,
      formAction: `/connect/${encodeURIComponent(provider.id)}`,
    });
  }

  router.get('/connect/:provider', deps.limits.connect, async (req, res) => {
    await openLink(res, String(req.params.provider), single(req.query.req), req.originalUrl);
  });

  router.post('/connect/:provider', deps.limits.connect, async (req, res) => {
    const provider = providerFor(req);
    deps.requireCsrf(req, res);
    const handle = single(req.body?.handle);
    const pending = await loadLink(handle, provider);
    const viewer = requireOwner(
      res,
      pending,
      provider,
      `/connect/${encodeURIComponent(provider.id)}?req=${encodeURIComponent(handle ?? '')}`,
    );
    if (!viewer) return;
    const decision = single(req.body?.decision);
    if (decision === 'cancel') {
      await settle(pending, 'cancelled');
      log.info('connect_cancelled', { provider: provider.id, pending: pending.id });
      metrics.connectFlow(provider.id, 'cancelled');
      return renderMessage(res, page, 200, 'Nothing was connected', M.cancelledOnConsent(provider.displayName));
    }
    if (decision !== 'allow') throw new BrokerError(400, 'invalid_request', 'Choose Continue or Cancel.');
    const state = randomHandle();
    const pkce = await pkcePair();
    // Built before claiming: a provider that cannot be reached (discovery) must not burn the link.
    let url: URL;
    try {
      url = await provider.buildAuthorizationUrl({
        redirectUri: new URL(`/connect/${provider.id}/callback`, publicUrl).href,
        state,
        codeChallenge: pkce.challenge,
        scopes: scopesForAuthorization(pending, provider, await connections.find(viewer, provider.id)),
      });
    } catch (err) {
      throw unavailable(err, provider);
    }
    // Claiming is what makes the link single-use: of two concurrent submissions only one gets here;
    // the other re-reads the link and gets its "already used" (or "expired") page.
    // The claim and the flow land together, so a crash in between cannot leave a claimed link without a flow.
    const claimed = await store.transaction(async (tx) => {
      if (!(await tx.pending.claim(pending.id))) return false;
      const bound = { pending_id: pending.id, session_hash: res.locals.session!.idHash };
      await tx.oauthFlows.put({
        state_hash: sha256Hex(state),
        ...bound,
        code_verifier: deps.verifierSealer.seal(pkce.verifier, verifierContext(bound)).value,
        expires_at: Date.now() + OAUTH_FLOW_TTL_MS,
      });
      return true;
    });
    if (!claimed) {
      await loadLink(handle, provider);
      throw new BrokerError(409, 'link_busy', M.linkBusy);
    }
    log.info('connect_authorizing', { provider: provider.id, pending: pending.id });
    metrics.connectFlow(provider.id, 'started');
    res.redirect(303, url.href);
  });

  // The provider's callback, as the list of its steps; each refuses by throwing a BrokerError.
  router.get('/connect/:provider/callback', deps.limits.callback, async (req, res) => {
    const provider = providerFor(req);
    const state = single(req.query.state);
    const flow = await loadFlow(res, provider, state);
    const pending = await loadPending(flow);
    const codeVerifier = await unsealVerifier(flow, pending, provider);
    const principal = await requireSamePrincipal(res, pending, provider);
    provider.authorizationReturned?.();
    if (await handleProviderError(req, res, pending, provider)) return;
    const { existing, account, tokens, outcome } = await exchangeCode(req, { provider, pending, principal, state: state!, codeVerifier });
    refuseAccountChange(outcome, { provider, pending, existing, account, tokens });
    refuseSharedAccount(outcome, { provider, pending, account, tokens });
    renderConnected(res, provider, pending, account);
  });

  /** The callback's refusal of anything that is not a live flow of this browser, this provider. */
  function invalidCallback(): BrokerError {
    return new BrokerError(400, 'invalid_callback', M.invalidCallback, {
      heading: 'Connection not completed',
      action: { href: '/connections', label: 'See your connected accounts' },
    });
  }

  /**
   * Takes the flow `state` names. The state is tied to the browser session that started it and to
   * its provider's callback path: only that session, on that path, can take the flow (taking deletes
   * it, so a replay finds nothing); another browser holding the callback URL, or the state sent to
   * another provider's callback, consumes nothing, so the real user's callback still works.
   */
  async function loadFlow(res: Response, provider: Provider, state: string | undefined): Promise<OAuthFlow> {
    const session = res.locals.session;
    const flow = state && session ? await store.oauthFlows.take(sha256Hex(state), session.idHash, provider.id) : undefined;
    if (!flow) {
      if (state) log.warn('connect_callback_refused', { provider: provider.id, signedIn: !!session?.principal });
      if (state) metrics.connectFlow(provider.id, 'refused');
      throw invalidCallback();
    }
    return flow;
  }

  /** The pending connection the flow belongs to, still being authorized. */
  async function loadPending(flow: OAuthFlow): Promise<PendingConnection> {
    const pending = await store.pending.byId(flow.pending_id);
    if (!pending || pending.status !== 'authorizing') throw invalidCallback();
    return pending;
  }

  /**
   * The flow is spent from here on: a refusal also settles its pending connection, or calls held on
   * it would wait out their whole hold for a callback that can no longer come.
   */
  async function refuseSpent(pending: PendingConnection, provider: Provider, event?: string): Promise<BrokerError> {
    if (event) log.warn(event, { provider: provider.id, pending: pending.id });
    metrics.connectFlow(provider.id, event ? 'refused' : 'failed');
    await settle(pending, 'failed');
    return invalidCallback();
  }

  /** The PKCE verifier, for this provider's unexpired flow. */
  async function unsealVerifier(flow: OAuthFlow, pending: PendingConnection, provider: Provider): Promise<string> {
    let codeVerifier: string | undefined;
    try {
      codeVerifier = deps.verifierSealer.open({ keyId: deps.verifierSealer.keyId, value: flow.code_verifier }, verifierContext(flow));
    } catch {
      // Written before verifiers were sealed (or under another BROKER_SECRET): this flow cannot finish.
    }
    if (pending.provider !== provider.id || flow.expires_at <= Date.now() || codeVerifier === undefined)
      throw await refuseSpent(pending, provider);
    return codeVerifier;
  }

  /** The session that started the flow must still be the link's principal. */
  async function requireSamePrincipal(res: Response, pending: PendingConnection, provider: Provider): Promise<Principal> {
    const principal = res.locals.session?.principal;
    if (!principal || !samePrincipal(principal, pending)) throw await refuseSpent(pending, provider, 'connect_callback_foreign_session');
    return principal;
  }

  /** An `error` from the provider settles the link: a 200 page when the user said no, a 502 otherwise. Whether it answered. */
  async function handleProviderError(req: Request, res: Response, pending: PendingConnection, provider: Provider): Promise<boolean> {
    const error = single(req.query.error);
    if (!error) return false;
    const denied = error === 'access_denied';
    // The provider's code is kept (bounded) so the call held on this link can say what it answered.
    await settle(pending, denied ? 'denied' : 'failed', denied ? undefined : providerErrorReason(error));
    log.info('connect_refused_at_provider', { provider: provider.id, pending: pending.id, error: error.slice(0, 64) });
    metrics.connectFlow(provider.id, denied ? 'denied' : 'failed');
    if (!denied) {
      throw new BrokerError(502, 'provider_refused', M.providerRefused(provider.displayName), { heading: 'Connection not completed' });
    }
    renderMessage(res, page, 200, 'Nothing was connected', M.cancelledAtProvider(provider.displayName));
    return true;
  }

  /**
   * Trades the code for tokens and saves the connection with the settled link (together: a crash
   * leaves neither half). A failure settles the link as failed.
   */
  async function exchangeCode(
    req: Request,
    flow: { provider: Provider; pending: PendingConnection; principal: Principal; state: string; codeVerifier: string },
  ): Promise<{
    existing: ConnectionRow | undefined;
    account: ProviderAccount;
    tokens: ProviderTokens;
    outcome: Awaited<ReturnType<ConnectionService['save']>>;
  }> {
    const { provider, pending, principal } = flow;
    let exchanged: ProviderTokens | undefined;
    try {
      const existing = await connections.find(principal, provider.id);
      const { tokens, account } = await provider.completeAuthorization({
        callbackUrl: new URL(req.originalUrl, publicUrl),
        expectedState: flow.state,
        codeVerifier: flow.codeVerifier,
        requestedScopes: scopesForAuthorization(pending, provider, existing),
      });
      exchanged = tokens;
      const outcome = await connections.save(principal, provider.id, account, tokens, {
        pendingId: pending.id,
        refuseShared: deps.sharedAccountPolicy === 'refuse',
        refuseAccountChange: true,
      });
      watcher.notify(pending.id).catch(backgroundFailure('completion_wake'));
      return { existing, account, tokens, outcome };
    } catch (err) {
      metrics.connectFlow(provider.id, 'failed');
      await settle(pending, 'failed', CODE_EXCHANGE_FAILED).catch(() => undefined);
      if (err instanceof StoreUnavailableError && exchanged) {
        // The code is spent and the flow consumed: this link cannot be retried. Nothing was stored,
        // so let the provider forget the token it just issued rather than leave it orphaned.
        void provider.revoke(exchanged, 'token').catch(() => undefined);
        throw new BrokerError(503, 'temporarily_unavailable', M.notSaved(provider.displayName), {
          heading: 'Connection not saved',
        });
      }
      if (!(err instanceof ProviderError)) throw err;
      log.warn('connect_exchange_failed', { provider: provider.id, pending: pending.id, errorCode: err.code, detail: err.detail });
      throw new BrokerError(err.code === 'misconfigured' ? 500 : 502, `provider_${err.code}`, M.exchangeFailed(err.message), {
        heading: 'Connection not completed',
      });
    }
  }

  /** The principal's link stays with its account: another account coming back is refused. */
  function refuseAccountChange(
    outcome: string,
    r: {
      provider: Provider;
      pending: PendingConnection;
      existing: ConnectionRow | undefined;
      account: ProviderAccount;
      tokens: ProviderTokens;
    },
  ): void {
    if (outcome !== 'refused_different_account') return;
    const { provider, account } = r;
    // Not kept, so not left usable upstream either; the linked account's own grant is untouched.
    dropRefusedTokens('connect_account_change_refused', r);
    const linked = r.existing ? `@${r.existing.account_login}` : 'another account';
    throw new BrokerError(409, 'account_changed', M.accountChanged(provider.displayName, linked, account.login), {
      heading: 'A different account came back',
      action: { href: '/connections', label: 'See your connected accounts' },
    });
  }

  /** A callback refused after the provider answered: logged, counted, and its token revoked (only the token, never the grant). */
  function dropRefusedTokens(event: string, r: { provider: Provider; pending: PendingConnection; tokens: ProviderTokens }): void {
    log.warn(event, { provider: r.provider.id, pending: r.pending.id });
    metrics.connectFlow(r.provider.id, 'refused');
    void r.provider.revoke(r.tokens, 'token').catch(() => undefined);
  }

  /** Under the `refuse` policy, an upstream account linked to another user is not connected. */
  function refuseSharedAccount(
    outcome: string,
    r: { provider: Provider; pending: PendingConnection; account: ProviderAccount; tokens: ProviderTokens },
  ): void {
    if (outcome !== 'refused_shared_account') return;
    const { provider, account } = r;
    // The token we were just given is not kept; let the provider forget it — only it: revoking the
    // grant would cut off the other user's working connection to the same account.
    dropRefusedTokens('connect_shared_account_refused', r);
    throw new BrokerError(409, 'account_shared', M.accountShared(provider.displayName, account.login), {
      heading: 'Account already linked',
    });
  }

  function renderConnected(res: Response, provider: Provider, pending: PendingConnection, account: ProviderAccount): void {
    log.info('connection_created', { provider: provider.id, pending: pending.id });
    metrics.connectFlow(provider.id, 'completed');
    renderPage(res, page, 'connected', {
      title: `Connected to ${provider.displayName}`,
      providerName: provider.displayName,
      login: account.login,
      sandbox: provider.sandbox,
      // Reached through an activation code, maybe on another device: say where the question was asked.
      ...(pending.activated_at ? { goBackTo: pending.client_name ?? 'your AI assistant' } : {}),
    });
  }

  router.get('/connections', async (req, res) => {
    const viewer = res.locals.session?.principal;
    if (!viewer) return res.redirect(303, `/auth/login?returnTo=${encodeURIComponent(req.originalUrl)}`);
    const [rows, usage] = await Promise.all([connections.list(viewer), deps.store.serviceUsage.list(viewer)]);
    renderPage(res, page, 'connections', {
      title: 'Connected accounts',
      // Only this page runs a script (public/local-time.js: dates in the reader's own time zone).
      scriptNonce: allowScriptNonce(res),
      connections: rows.map((r) => ({
        ...summarizeConnection(r),
        usedBy: usage
          .filter((u) => u.provider === r.provider)
          .map((u) => ({ name: deps.serviceNames?.get(u.service_id) ?? u.service_id, lastUsedAt: new Date(u.last_used_at).toISOString() })),
        providerId: r.provider,
        providerName: providers.get(r.provider)?.displayName ?? r.provider,
      })),
      available: [...providers.values()].map((p) => ({
        id: p.id,
        displayName: p.displayName,
        connected: rows.some((r) => r.provider === p.id),
      })),
    });
  });

  router.post('/connections/:provider/connect', deps.limits.connectStart, async (req, res) => {
    const provider = providerFor(req);
    deps.requireCsrf(req, res);
    const viewer = res.locals.session?.principal;
    if (!viewer) return res.redirect(303, '/auth/login?returnTo=%2Fconnections');
    const pending = await links.create(viewer, provider.id, undefined);
    const url = new URL(links.url(pending));
    res.redirect(303, url.pathname + url.search);
  });

  /** The services that obtained a token through this principal's connection to `provider`, by name. */
  async function servicesUsing(viewer: Principal, provider: Provider): Promise<string[]> {
    const usage = await deps.store.serviceUsage.list(viewer);
    return usage.filter((u) => u.provider === provider.id).map((u) => deps.serviceNames?.get(u.service_id) ?? u.service_id);
  }

  // Disconnecting revokes at the provider: like the disconnect_account tool, the page asks first
  // (a page of its own, no script needed), and only the confirming POST (with its CSRF token) acts.
  router.get('/connections/:provider/disconnect', async (req, res) => {
    const provider = providerFor(req);
    const viewer = res.locals.session?.principal;
    if (!viewer) return res.redirect(303, `/auth/login?returnTo=${encodeURIComponent(req.originalUrl)}`);
    const existing = await connections.find(viewer, provider.id);
    if (!existing) {
      return renderMessage(res, page, 200, `${provider.displayName} is not connected`, M.nothingToDisconnect(provider.displayName), {
        action: { href: '/connections', label: 'Back to connected accounts' },
      });
    }
    renderPage(res, page, 'disconnect', {
      title: `Disconnect ${provider.displayName}?`,
      providerName: provider.displayName,
      login: existing.account_login,
      services: await servicesUsing(viewer, provider),
      formAction: `/connections/${encodeURIComponent(provider.id)}/disconnect`,
    });
  });

  router.post('/connections/:provider/disconnect', async (req, res) => {
    const provider = providerFor(req);
    deps.requireCsrf(req, res);
    const viewer = res.locals.session?.principal;
    if (!viewer) return res.redirect(303, '/auth/login?returnTo=%2Fconnections');
    // Not confirmed (an older page's one-click form): show the question rather than act.
    if (single(req.body?.confirm) !== 'yes') return res.redirect(303, `/connections/${encodeURIComponent(provider.id)}/disconnect`);
    const outcome = await connections.disconnect(viewer, provider);
    log.info('connection_disconnected', { provider: provider.id, revoked: outcome.revoked, via: 'page' });
    const message = !outcome.deleted
      ? M.nothingToDisconnect(provider.displayName)
      : outcome.revoked
        ? M.disconnectedAndRevoked(provider.displayName)
        : M.disconnectedNotRevoked(provider.displayName, String(outcome.revokeError));
    renderMessage(res, page, 200, `${provider.displayName} disconnected`, message, {
      action: { href: '/connections', label: 'Back to connected accounts' },
    });
  });

  return Object.assign(router, { openLink });
}
