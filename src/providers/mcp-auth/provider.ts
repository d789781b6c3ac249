import * as oidc from 'openid-client';
import type { Sealer } from '../../crypto/index.js';
import { displayText, hasInvisibleCharacters } from '../../http/display-text.js';
import type { Logger } from '../../log.js';
import { ProviderError, type Provider, type ProviderAccount, type ProviderScope, type ProviderTokens } from '../provider.js';
import type { Store } from '../../store/index.js';
import type { EgressRule } from '../../net/egress-rule.js';
import { oauthMessages as T } from '../messages.js';
import {
  authorizationUrl,
  clientAuthentication,
  codeGrant,
  errorDetail,
  refreshGrant,
  revokeToken,
  timeoutSeconds,
  type OAuthServer,
  type TokenResponse,
} from '../oauth-client.js';
import { scopeString } from '../scopes.js';
import { authorizationServerFetch } from './bounded-fetch.js';
import { discoverUpstreamAuthorization, isLoopbackHttp, type UpstreamAuthorization } from './discovery.js';
import { M } from './messages.js';
import { becomeClient, forgetRegistration, type RegistrationContext, type UpstreamClient } from './registration.js';
import { RegistrationWatch, type LostRegistrationRule } from './registration-watch.js';

export interface McpAuthProviderOptions {
  /** The upstream's id: the provider id, the `/connect/<id>` path and the `<ID>_CLIENT_ID` prefix. */
  id: string;
  displayName?: string;
  /** The upstream MCP server's URL, from the configuration (never from a request). */
  upstreamUrl: URL | string;
  /** What to ask for; by default the upstream's challenge `scope`, else its metadata's `scopes_supported`. */
  scopes?: string[];
  publicUrl: URL;
  store: Store;
  /** Seals the client secrets of dynamic registrations in the store (the token sealer). */
  sealer: Sealer;
  /** A client the operator registered at the upstream's authorization server (`<ID>_CLIENT_ID` / `<ID>_CLIENT_SECRET`). */
  clientId?: string;
  clientSecret?: string;
  /** The name the broker registers under (its PRODUCT_NAME). */
  clientName?: string;
  timeoutMs: number;
  /** Where what the upstream's documents name may be fetched (the upstream's own origin is added to it). */
  egress: EgressRule;
  log: Logger;
  /** Refresh this long before an access token expires (default 60 s). */
  refreshSkewMs?: number;
  /** When a dynamic registration's flows that never came back mean the server lost it (default: 2 flows, 60 s each). */
  lostRegistration?: LostRegistrationRule;
  /** The clock of that rule (tests). */
  now?: () => number;
}

/** Scopes the broker adds for itself (who the account is, refresh tokens): not the upstream's, never shown as its. */
const IDENTITY_SCOPES = ['openid', 'profile', 'offline_access'];

interface Setup {
  auth: UpstreamAuthorization;
  client: UpstreamClient;
  /** The authorization server as src/providers/oauth-client.ts calls it. */
  server: OAuthServer;
  /** The server speaks OpenID Connect: the account comes from a verified ID token. */
  openid: boolean;
  /** The identity and refresh scopes this server lists, added to every authorization request. */
  extraScopes: string[];
}

const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);

/** `<ID>` of the upstream's variables: `tracker-two` → `TRACKER_TWO`. */
export function variablePrefix(id: string): string {
  return id.toUpperCase().replace(/-/g, '_');
}

/** The operator's client for upstream `id` at its authorization server, from `<ID>_CLIENT_ID` / `<ID>_CLIENT_SECRET` in `env`. */
export function preRegisteredClient(
  env: Readonly<Record<string, string | undefined>>,
  id: string,
): { clientId?: string; clientSecret?: string } {
  const prefix = variablePrefix(id);
  const clientId = env[`${prefix}_CLIENT_ID`]?.trim();
  const clientSecret = env[`${prefix}_CLIENT_SECRET`]?.trim();
  return clientId ? { clientId, ...(clientSecret ? { clientSecret } : {}) } : {};
}

/** The broker's callback for upstream `id`: the redirect URI it registers, and the key its registrations are kept under. */
export function upstreamCallback(config: { publicUrl: URL }, id: string): string {
  return new URL(`/connect/${id}/callback`, config.publicUrl).href;
}

/** The path of the client ID metadata document the broker serves for an upstream. */
export function clientDocumentPath(id: string): string {
  return `/oauth/clients/${encodeURIComponent(id)}.json`;
}

/**
 * A provider whose authorization server is discovered from an MCP upstream (`auth: mcp`), so the
 * connect flow (state, PKCE, sealed tokens, refresh under a lease, /connections, revocation) works
 * for it as for any configured provider. Every authorization, code and refresh request names the
 * upstream as its RFC 8707 `resource`, so the tokens are for that upstream alone.
 */
export class McpAuthProvider implements Provider {
  readonly id: string;
  readonly displayName: string;
  readonly sandbox = false;
  readonly scopesApply = true;
  readonly refreshSkewMs: number;
  readonly freshTokenRetryMs = 0;
  readonly upstreamUrl: URL;
  /** Where the broker serves its client ID metadata document for this upstream; undefined unless PUBLIC_URL is https. */
  readonly documentUrl: string | undefined;
  readonly redirectUri: string;
  readonly #options: McpAuthProviderOptions;
  /** The operator's egress rule, and the upstream's own origin (its URL is configuration). */
  readonly #egress: EgressRule;
  #discovery: Promise<UpstreamAuthorization> | undefined;
  #discovered: UpstreamAuthorization | undefined;
  #setup: Promise<Setup> | undefined;
  /** What #setup resolved to, so it can be dropped at once when it turns out stale. */
  #resolved: Setup | undefined;
  readonly #watch: RegistrationWatch;

  constructor(options: McpAuthProviderOptions) {
    this.#options = options;
    this.#watch = new RegistrationWatch(options.lostRegistration, options.now);
    this.id = options.id;
    this.upstreamUrl = new URL(options.upstreamUrl);
    this.#egress = options.egress.withOrigin(this.upstreamUrl.origin);
    this.refreshSkewMs = options.refreshSkewMs ?? 60_000;
    this.displayName = options.displayName ?? options.id;
    this.redirectUri = upstreamCallback(options, options.id);
    this.documentUrl =
      options.publicUrl.protocol === 'https:' ? new URL(clientDocumentPath(options.id), options.publicUrl).href : undefined;
  }

  /** No descriptions: the upstream's scopes are its own words, which the consent page shows as they are. */
  get scopes(): ProviderScope[] {
    return [];
  }

  get defaultScopes(): string[] {
    if (this.#options.scopes) return this.#options.scopes;
    const d = this.#discovered;
    if (!d) return [];
    return (d.challengeScopes.length ? d.challengeScopes : d.scopesSupported).filter((s) => !IDENTITY_SCOPES.includes(s));
  }

  get authorizationOrigin(): string {
    const endpoint = this.#discovered?.server.authorization_endpoint;
    return new URL(endpoint ?? this.upstreamUrl.href).origin;
  }

  /** The client ID metadata document (draft-ietf-oauth-client-id-metadata-document) the broker serves for this upstream. */
  clientMetadataDocument(): Record<string, unknown> | undefined {
    if (!this.documentUrl) return undefined;
    return {
      client_id: this.documentUrl,
      client_name: this.#options.clientName ?? 'MCP Connect Broker',
      client_uri: new URL('/', this.#options.publicUrl).href,
      redirect_uris: [this.redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: 'web',
    };
  }

  #discover(): Promise<UpstreamAuthorization> {
    this.#discovery ??= discoverUpstreamAuthorization(this.upstreamUrl, {
      name: this.displayName,
      timeoutMs: this.#options.timeoutMs,
      egress: this.#options.egress,
    }).then(
      (d) => (this.#discovered = d),
      (err: unknown) => {
        this.#discovery = undefined;
        const { code, detail } = describe(err);
        // `errorCode`: `code` is a redacted field name (an authorization code is one, src/log.ts).
        this.#options.log.warn('upstream_discovery_failed', { upstream: this.id, ...(code ? { errorCode: code } : {}), detail });
        throw asProviderError(err, this.displayName);
      },
    );
    return this.#discovery;
  }

  #registration(scopes: string[] = []): RegistrationContext {
    const o = this.#options;
    return {
      name: this.displayName,
      scopes,
      variablePrefix: variablePrefix(o.id),
      redirectUri: this.redirectUri,
      documentUrl: this.documentUrl,
      clientName: o.clientName ?? 'MCP Connect Broker',
      ...(o.clientId ? { preRegistered: { clientId: o.clientId, ...(o.clientSecret ? { clientSecret: o.clientSecret } : {}) } } : {}),
      store: o.store,
      sealer: o.sealer,
      timeoutMs: o.timeoutMs,
      egress: this.#egress,
      log: o.log,
    };
  }

  #ready(): Promise<Setup> {
    this.#setup ??= (async () => {
      const auth = await this.#discover();
      const { server } = auth;
      const extraScopes = identityScopes(server);
      // Registered with the scopes it will ask for: an AS that checks them (the Python SDK's) refuses any other.
      const client = await becomeClient(auth, this.#registration([...new Set([...this.defaultScopes, ...extraScopes])]));
      const secret = client.clientSecret ?? '';
      // The client_id in the body too: FastMCP's authorization server needs it (see clientAuthentication).
      const clientAuth = clientAuthentication(client.authMethod, secret, { clientIdInBody: true });
      const config = new oidc.Configuration(
        server,
        client.clientId,
        client.clientSecret ? { client_secret: secret } : undefined,
        clientAuth,
      );
      // Every endpoint was checked to be https or loopback http; the loopback ones need this switch.
      if (
        [server.issuer, server.authorization_endpoint, server.token_endpoint, server.revocation_endpoint].some(
          (u) => u && isLoopbackHttp(u),
        )
      )
        oidc.allowInsecureRequests(config);
      config.timeout = timeoutSeconds(this.#options.timeoutMs);
      // Token, revocation and JWKS requests go under the egress rule, their answers read only up to a bound.
      config[oidc.customFetch] = authorizationServerFetch(this.#egress, this.#options.timeoutMs);
      const openid = strings(server.scopes_supported).includes('openid');
      this.#options.log.info('upstream_client_ready', { upstream: this.id, issuer: server.issuer, via: client.via, openid });
      const oauthServer: OAuthServer = {
        config,
        name: this.displayName,
        // Every request names the upstream, so the tokens are for that upstream alone.
        resource: auth.resource,
        scopeCommas: false,
        // The identity and refresh scopes the broker adds are kept only where they were asked for.
        keepScopes: (granted, requested) => granted.filter((s) => !IDENTITY_SCOPES.includes(s) || requested.includes(s)),
        keepsRefreshToken: true,
        // A dynamic registration the server no longer knows: forget it, so the next connect registers anew.
        unknownClient: async () => {
          if (client.via !== 'dynamic-registration') return;
          this.#setup = undefined;
          await forgetRegistration(auth, this.#registration(), client.clientId);
        },
      };
      return (this.#resolved = { auth, client, server: oauthServer, openid, extraScopes });
    })().catch((err: unknown) => {
      this.#setup = undefined;
      throw asProviderError(err, this.displayName);
    });
    return this.#setup;
  }

  async prepare(): Promise<void> {
    await this.#ready();
  }

  missingScopes(granted: string[], required: string[]): string[] {
    return required.filter((r) => !granted.includes(r));
  }

  withoutImplied(scopes: string[]): string[] {
    return [...new Set(scopes)];
  }

  scopesToRequest(asked: string[], granted: string[]): string[] {
    return [...new Set([...granted, ...asked])];
  }

  authorizationReturned(): void {
    this.#watch.returned();
  }

  /**
   * The setup to start a flow with. A dynamic registration must still be the stored one (an
   * operator's `upstreams reset-registration`, or another instance, may have forgotten it), and
   * must not look lost: flows started with it that never came back (see RegistrationWatch).
   */
  async #setupForNewFlow(): Promise<Setup> {
    let setup = await this.#ready();
    if (setup.client.via !== 'dynamic-registration') return setup;
    const stored = await this.#options.store.upstreamClients.find(setup.auth.server.issuer, this.redirectUri);
    if (stored?.client_id !== setup.client.clientId) {
      this.#forgetSetup(setup);
      setup = await this.#ready();
    }
    if (setup.client.via === 'dynamic-registration' && this.#watch.started(setup.client.clientId)) {
      this.#options.log.warn('upstream_client_lost', { upstream: this.id, issuer: setup.auth.server.issuer });
      await forgetRegistration(setup.auth, this.#registration(), setup.client.clientId);
      this.#forgetSetup(setup);
      setup = await this.#ready();
      if (setup.client.via === 'dynamic-registration') this.#watch.started(setup.client.clientId);
    }
    return setup;
  }

  /** Drops the cached setup if it is still `setup` (a concurrent caller may have replaced it already). */
  #forgetSetup(setup: Setup): void {
    if (this.#resolved !== setup) return;
    this.#setup = undefined;
    this.#resolved = undefined;
  }

  async buildAuthorizationUrl(params: { redirectUri: string; state: string; codeChallenge: string; scopes: string[] }): Promise<URL> {
    const setup = await this.#setupForNewFlow();
    const scopes = params.scopes.length ? params.scopes : this.defaultScopes;
    const scope = scopeString([...new Set([...scopes, ...setup.extraScopes])]);
    return authorizationUrl(setup.server, {
      redirect_uri: params.redirectUri,
      state: params.state,
      code_challenge: params.codeChallenge,
      code_challenge_method: 'S256',
      ...(scope ? { scope } : {}),
      // oidc-provider (and the OpenID spec) issue refresh tokens for offline_access only after consent.
      ...(setup.extraScopes.includes('offline_access') ? { prompt: 'consent' } : {}),
    });
  }

  async completeAuthorization(params: {
    callbackUrl: URL;
    expectedState: string;
    codeVerifier: string;
    requestedScopes: string[];
  }): Promise<{ tokens: ProviderTokens; account: ProviderAccount }> {
    const setup = await this.#ready();
    const { response, tokens } = await codeGrant(setup.server, {
      callbackUrl: params.callbackUrl,
      expectedState: params.expectedState,
      codeVerifier: params.codeVerifier,
      idTokenExpected: setup.openid,
      requestedScopes: params.requestedScopes.length ? params.requestedScopes : this.defaultScopes,
    });
    try {
      return { tokens, account: this.#account(setup, response) };
    } catch (err) {
      void this.revoke(tokens, 'token').catch(() => undefined);
      throw err;
    }
  }

  async refresh(tokens: ProviderTokens): Promise<ProviderTokens> {
    // Checked before the upstream is discovered: no refresh token needs no server to say so.
    if (!tokens.refreshToken) throw new ProviderError('invalid_grant', T.noRefreshToken(this.displayName), 'no refresh token');
    const setup = await this.#ready();
    return refreshGrant(setup.server, tokens);
  }

  async revoke(tokens: ProviderTokens, what: 'grant' | 'token' = 'grant'): Promise<{ revoked: boolean }> {
    const setup = await this.#ready();
    if (!setup.auth.server.revocation_endpoint) return { revoked: false };
    return revokeToken(setup.server, tokens, what);
  }

  /**
   * Who the tokens belong to: the ID token's `sub` (verified by openid-client: issuer, audience,
   * expiry) when the server speaks OpenID Connect, else what the token response itself names. An
   * access token's own claims are never read: the broker is not its audience and cannot verify it.
   * With neither, the account is "account at <upstream name>", marked unverified: the different-account
   * and shared-account checks cannot apply to it.
   */
  #account(setup: Setup, response: TokenResponse): ProviderAccount {
    let id: unknown;
    let login: unknown;
    if (setup.openid) {
      const claims = response.claims();
      id = claims?.sub;
      login = claims?.preferred_username ?? claims?.email ?? claims?.name;
    } else {
      const named = ['sub', 'user_id', 'username'].map((k) => response[k]).find((v) => typeof v === 'string' && v !== '');
      if (named === undefined) return { id: setup.auth.server.issuer, login: M.anonymousLogin(this.displayName), unverified: true };
      id = named;
    }
    if (typeof id !== 'string' || id === '') throw new ProviderError('unavailable', T.garbled(this.displayName), 'no sub in the ID token');
    if (hasInvisibleCharacters(id))
      throw new ProviderError('unavailable', M.noAccountId(this.displayName), 'sub has control or invisible characters');
    return { id, login: (typeof login === 'string' ? displayText(login) : undefined) ?? id };
  }
}

function describe(err: unknown): { code?: string; detail: string } {
  if (err instanceof ProviderError) return { code: err.code, detail: err.detail ?? err.message };
  return { detail: errorDetail(err) };
}

function asProviderError(err: unknown, name: string): ProviderError {
  return err instanceof ProviderError ? err : new ProviderError('unavailable', T.unreachable(name), describe(err).detail);
}

/** The identity and refresh scopes `server` lists, added to every authorization request. */
function identityScopes(server: oidc.ServerMetadata): string[] {
  const listed = strings(server.scopes_supported);
  const openid = listed.includes('openid');
  const refreshes = !server.grant_types_supported || server.grant_types_supported.includes('refresh_token');
  return [
    ...(openid ? ['openid'] : []),
    ...(openid && listed.includes('profile') ? ['profile'] : []),
    ...(refreshes && listed.includes('offline_access') ? ['offline_access'] : []),
  ];
}

export function createMcpAuthProvider(options: McpAuthProviderOptions): McpAuthProvider {
  return new McpAuthProvider(options);
}
