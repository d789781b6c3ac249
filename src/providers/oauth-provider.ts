import { setTimeout as sleep } from 'node:timers/promises';
import * as oidc from 'openid-client';
import { isLoopbackHostname } from '../net/loopback.js';
import { pick, type ProviderDefinition } from './definition.js';
import { fetchWithTimeout, readJson } from './http.js';
import { oauthMessages as T } from './messages.js';
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
} from './oauth-client.js';
import { SpanKind, withSpan } from '../observability/tracing.js';
import { displayText, hasInvisibleCharacters } from '../http/display-text.js';
import { ProviderError, type Provider, type ProviderAccount, type ProviderTokens, type TokenVerdict } from './provider.js';

export interface OAuthProviderOptions {
  definition: ProviderDefinition;
  clientId: string;
  clientSecret: string;
  timeoutMs: number;
  /** Replaces the definition's default scopes (`<ID>_SCOPES`). */
  scopes?: string[];
  sandbox?: boolean;
}

function isLocalHttp(u: string): boolean {
  const url = new URL(u);
  return url.protocol === 'http:' && isLoopbackHostname(url.hostname);
}

/**
 * Any OAuth 2.0 / OpenID Connect provider described by a {@link ProviderDefinition}, driven by
 * openid-client: authorization code with state and PKCE S256, refresh, identity, revocation.
 * Provider quirks are flags in the definition, never branches on the provider's id.
 */
export class OAuthProvider implements Provider {
  // What every provider tells the flow and the tools, documented and typed once, on `Provider`;
  // here each field's type is the one its constructor assignment gives it (checked by `implements`).
  readonly id;
  readonly displayName;
  readonly sandbox;
  readonly scopes;
  readonly defaultScopes;
  readonly scopesApply;
  /** The issuer's origin until discovery names the authorization endpoint (then that one). */
  authorizationOrigin;
  readonly refreshSkewMs;
  readonly freshTokenRetryMs;
  readonly #options: OAuthProviderOptions;
  #config: Promise<oidc.Configuration> | undefined;

  constructor(options: OAuthProviderOptions) {
    const d = options.definition;
    this.#options = options;
    this.id = d.id;
    this.sandbox = options.sandbox ?? false;
    this.displayName = this.sandbox ? `${d.displayName} (sandbox)` : d.displayName;
    this.scopes = d.scopes;
    this.defaultScopes = options.scopes ?? d.defaultScopes ?? d.scopes.map((s) => s.name);
    this.scopesApply = d.scopesApply;
    this.authorizationOrigin = new URL(d.kind === 'oidc' ? d.issuer : d.authorizationEndpoint).origin;
    this.refreshSkewMs = d.refresh.skewSeconds * 1000;
    this.freshTokenRetryMs = d.freshTokenRetryMs;
  }

  #configuration(): Promise<oidc.Configuration> {
    this.#config ??= this.#build().catch((err: unknown) => {
      this.#config = undefined;
      throw new ProviderError('unavailable', T.unreachable(this.displayName), err instanceof Error ? err.message : String(err));
    });
    return this.#config;
  }

  /** The authorization server as src/providers/oauth-client.ts calls it, with what the definition says of its tokens. */
  async #server(): Promise<OAuthServer> {
    const d = this.#options.definition;
    return {
      config: await this.#configuration(),
      name: this.displayName,
      // GitHub lists granted scopes comma-separated ("repo,user").
      scopeCommas: true,
      keepScopes: (granted) => (this.scopesApply ? granted : []),
      keepsRefreshToken: !d.refresh.rotates,
      run: (operation, call) => this.#span(operation, call),
    };
  }

  async #build(): Promise<oidc.Configuration> {
    const d = this.#options.definition;
    const auth = clientAuthentication(d.clientAuth, this.#options.clientSecret);
    const timeout = timeoutSeconds(this.#options.timeoutMs);
    let config: oidc.Configuration;
    if (d.kind === 'oidc') {
      const insecure = isLocalHttp(d.issuer);
      config = await this.#span('discovery', () =>
        oidc.discovery(new URL(d.issuer), this.#options.clientId, undefined, auth, {
          timeout,
          ...(insecure ? { execute: [oidc.allowInsecureRequests] } : {}),
        }),
      );
      const endpoint = config.serverMetadata().authorization_endpoint;
      if (endpoint) this.authorizationOrigin = new URL(endpoint).origin;
    } else {
      const server: oidc.ServerMetadata = {
        issuer: new URL(d.authorizationEndpoint).origin,
        authorization_endpoint: d.authorizationEndpoint,
        token_endpoint: d.tokenEndpoint,
        ...(d.revocation.kind === 'rfc7009' && d.revocation.endpoint ? { revocation_endpoint: d.revocation.endpoint } : {}),
      };
      config = new oidc.Configuration(server, this.#options.clientId, undefined, auth);
      if (isLocalHttp(d.tokenEndpoint)) oidc.allowInsecureRequests(config);
    }
    config.timeout = timeout;
    const send = d.tokenErrorsAsHttp200 ? relabelHttp200Errors : undefined;
    if (send) config[oidc.customFetch] = send;
    return config;
  }

  /**
   * `fn` (openid-client's calls to the provider) in a span `provider <id> <operation>` while tracing
   * is on. The span stays ours: no `traceparent` goes to the provider, a third party.
   */
  #span<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    return withSpan(`provider ${this.id} ${operation}`, { 'broker.provider': this.id }, fn, { kind: SpanKind.CLIENT });
  }

  async prepare(): Promise<void> {
    await this.#configuration();
  }

  missingScopes(granted: string[], required: string[]): string[] {
    if (!this.scopesApply) return [];
    const implied = this.#options.definition.impliedBy;
    return required.filter((r) => !granted.includes(r) && !(implied[r] ?? []).some((broader) => granted.includes(broader)));
  }

  withoutImplied(scopes: string[]): string[] {
    const implied = this.#options.definition.impliedBy;
    return [...new Set(scopes)].filter((s) => !(implied[s] ?? []).some((broader) => broader !== s && scopes.includes(broader)));
  }

  scopesToRequest(asked: string[], granted: string[]): string[] {
    if (!this.scopesApply || this.#options.definition.incrementalScopes === 'missing') return asked;
    return [...new Set([...granted, ...asked])];
  }

  async buildAuthorizationUrl({
    redirectUri,
    state,
    codeChallenge,
    scopes,
  }: {
    redirectUri: string;
    state: string;
    codeChallenge: string;
    scopes: string[];
  }): Promise<URL> {
    const d = this.#options.definition;
    const params: Record<string, string> = { ...d.authorizeParams, redirect_uri: redirectUri, state };
    if (this.scopesApply && scopes.length) params.scope = scopes.join(d.scopeSeparator);
    if (d.pkce) Object.assign(params, { code_challenge: codeChallenge, code_challenge_method: 'S256' });
    return authorizationUrl(await this.#server(), params);
  }

  async completeAuthorization({
    callbackUrl,
    expectedState,
    codeVerifier,
    requestedScopes,
  }: {
    callbackUrl: URL;
    expectedState: string;
    codeVerifier: string;
    requestedScopes: string[];
  }): Promise<{ tokens: ProviderTokens; account: ProviderAccount }> {
    const d = this.#options.definition;
    const server = await this.#server();
    const { response, tokens } = await codeGrant(server, {
      callbackUrl,
      expectedState,
      ...(d.pkce ? { codeVerifier } : {}),
      idTokenExpected: d.identity.source === 'id_token',
      requestedScopes,
    });
    try {
      return { tokens, account: await this.#account(server.config, response, tokens) };
    } catch (err) {
      // We will not keep a token we cannot attribute: let the provider forget it (only it: the
      // user's existing connection, same grant, must keep working).
      void this.revoke(tokens, 'token').catch(() => undefined);
      throw err;
    }
  }

  async refresh(tokens: ProviderTokens): Promise<ProviderTokens> {
    // Checked before the provider is discovered: no refresh token needs no server to say so.
    if (!tokens.refreshToken) throw new ProviderError('invalid_grant', T.noRefreshToken(this.displayName), 'no refresh token');
    return refreshGrant(await this.#server(), tokens);
  }

  async revoke(tokens: ProviderTokens, what: 'grant' | 'token' = 'grant'): Promise<{ revoked: boolean }> {
    const r = this.#options.definition.revocation;
    if (r.kind === 'none') return { revoked: false };
    if (r.kind === 'github-grant') {
      const { clientId, clientSecret } = this.#options;
      const response = await fetchWithTimeout(
        new URL(`applications/${encodeURIComponent(clientId)}/${what}`, r.apiUrl.endsWith('/') ? r.apiUrl : `${r.apiUrl}/`),
        {
          method: 'DELETE',
          headers: {
            accept: 'application/vnd.github+json',
            'x-github-api-version': '2022-11-28',
            'user-agent': 'mcp-connect-broker',
            'content-type': 'application/json',
            authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
          },
          body: JSON.stringify({ access_token: tokens.accessToken }),
        },
        this.#options.timeoutMs,
        this.displayName,
        `${this.id} revoke`,
      );
      await response.body?.cancel();
      // 404: the grant is already gone (the user revoked it upstream), which is what we want.
      if (response.status === 204 || response.status === 404) return { revoked: true };
      throw new ProviderError(
        response.status === 429 || response.status === 403 ? 'rate_limited' : 'unavailable',
        `${this.displayName} did not confirm the revocation (HTTP ${response.status}).`,
      );
    }
    return revokeToken(await this.#server(), tokens, what);
  }

  /**
   * The provider's word on `accessToken`: the identity API it reads accounts from (GitHub's
   * `GET /user`), else its OpenID userinfo endpoint; a 401 is `refused`, a success `accepted`,
   * anything else (or no endpoint to ask) `unknown`.
   */
  async checkAccessToken(accessToken: string): Promise<TokenVerdict> {
    try {
      const identity = this.#options.definition.identity;
      if (identity.source === 'api') {
        const res = await this.#identityCall(identity, accessToken);
        await res.body?.cancel();
        return res.status === 401 ? 'refused' : res.ok ? 'accepted' : 'unknown';
      }
      const config = await this.#configuration();
      if (!config.serverMetadata().userinfo_endpoint) return 'unknown';
      await this.#span('userinfo', () => oidc.fetchUserInfo(config, accessToken, oidc.skipSubjectCheck));
      return 'accepted';
    } catch (err) {
      return httpStatusOf(err) === 401 ? 'refused' : 'unknown';
    }
  }

  /** GET (or POST) the identity API with `accessToken`; a 401 is asked once more after `freshTokenRetryMs`, since a token minted or refreshed a moment ago may not have replicated yet. */
  async #identityCall(identity: Extract<ProviderDefinition['identity'], { source: 'api' }>, accessToken: string): Promise<Response> {
    const res = await this.#identityRequest(identity, accessToken);
    if (res.status !== 401 || this.freshTokenRetryMs <= 0) return res;
    await res.body?.cancel();
    await sleep(this.freshTokenRetryMs);
    return this.#identityRequest(identity, accessToken);
  }

  #identityRequest(identity: Extract<ProviderDefinition['identity'], { source: 'api' }>, accessToken: string): Promise<Response> {
    return fetchWithTimeout(
      identity.url,
      {
        method: identity.method,
        headers: {
          accept: 'application/json',
          'user-agent': 'mcp-connect-broker',
          ...identity.headers,
          authorization: `Bearer ${accessToken}`,
          ...(identity.body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(identity.body !== undefined ? { body: JSON.stringify(identity.body) } : {}),
      },
      this.#options.timeoutMs,
      this.displayName,
      `${this.id} identity`,
    );
  }

  async #account(config: oidc.Configuration, response: TokenResponse, tokens: ProviderTokens): Promise<ProviderAccount> {
    const identity = this.#options.definition.identity;
    let source: unknown;
    switch (identity.source) {
      case 'id_token':
        source = response.claims();
        break;
      case 'token_response':
        source = response;
        break;
      case 'userinfo': {
        const sub = response.claims()?.sub;
        try {
          source = await this.#span('userinfo', () => oidc.fetchUserInfo(config, tokens.accessToken, sub ?? oidc.skipSubjectCheck));
        } catch (err) {
          throw new ProviderError('unavailable', `${this.displayName} did not say who you are. Please try again.`, errorDetail(err));
        }
        break;
      }
      case 'api': {
        const res = await this.#identityCall(identity, tokens.accessToken);
        const body = await readJson(res, this.displayName);
        if (!res.ok)
          throw new ProviderError(
            res.status === 401 ? 'unauthorized' : 'unavailable',
            `${this.displayName} did not say who you are (HTTP ${res.status}). Please try again.`,
            String(body.message ?? ''),
          );
        source = body;
        break;
      }
    }
    const id = pick(source, identity.idField);
    const login = pick(source, identity.loginField) ?? id;
    if ((typeof id !== 'string' && typeof id !== 'number') || id === '') {
      throw new ProviderError(
        'unavailable',
        `${this.displayName} sent an account without an id. Please try again.`,
        `missing ${identity.idField}`,
      );
    }
    if (hasInvisibleCharacters(String(id))) {
      throw new ProviderError(
        'unavailable',
        `${this.displayName} sent an account id with control or invisible characters. This account cannot be linked.`,
        `${identity.idField} has control or invisible characters`,
      );
    }
    // The login is only shown; a NUL in it would not even store on PostgreSQL.
    return { id: String(id), login: displayText(String(login)) ?? String(id) };
  }
}

/** The HTTP status an openid-client error carries (its own, or its cause's), if any. */
function httpStatusOf(err: unknown): number | undefined {
  const status = (err as { status?: unknown } | null)?.status ?? (err as { cause?: { status?: unknown } } | null)?.cause?.status;
  return typeof status === 'number' ? status : undefined;
}

/** GitHub-style token endpoints answer errors as HTTP 200 + `error`; re-label them 400 so openid-client reads them as OAuth errors. */
async function relabelHttp200Errors(url: string, init: oidc.CustomFetchOptions): Promise<Response> {
  const response = await fetch(url, init as RequestInit);
  if (response.status !== 200) return response;
  const text = await response.text();
  let error: unknown;
  try {
    error = (JSON.parse(text) as { error?: unknown }).error;
  } catch {
    error = undefined;
  }
  return new Response(text, { status: typeof error === 'string' ? 400 : 200, headers: response.headers });
}
