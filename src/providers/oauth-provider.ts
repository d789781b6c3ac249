import { setTimeout as sleep } from 'node:timers/promises';
import * as oidc from 'openid-client';
import { isLoopbackHostname } from '../net/loopback.js';
import { pick, type ProviderDefinition } from './definition.js';
import { fetchWithTimeout, readJson } from './http.js';
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
      throw new ProviderError(
        'unavailable',
        `${this.displayName} cannot be reached right now. Please try again in a moment.`,
        err instanceof Error ? err.message : String(err),
      );
    });
    return this.#config;
  }

  async #build(): Promise<oidc.Configuration> {
    const d = this.#options.definition;
    const auth =
      d.clientAuth === 'client_secret_basic'
        ? oidc.ClientSecretBasic(this.#options.clientSecret)
        : oidc.ClientSecretPost(this.#options.clientSecret);
    const timeout = Math.max(1, Math.ceil(this.#options.timeoutMs / 1000));
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
    return oidc.buildAuthorizationUrl(await this.#configuration(), params);
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
    const config = await this.#configuration();
    let response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers;
    try {
      response = await this.#span('token', () =>
        oidc.authorizationCodeGrant(config, callbackUrl, {
          expectedState,
          ...(d.pkce ? { pkceCodeVerifier: codeVerifier } : {}),
          idTokenExpected: d.identity.source === 'id_token',
        }),
      );
    } catch (err) {
      throw this.#grantError(err, 'code');
    }
    const tokens = this.#tokens(response, requestedScopes);
    try {
      return { tokens, account: await this.#account(config, response, tokens) };
    } catch (err) {
      // We will not keep a token we cannot attribute: let the provider forget it (only it: the
      // user's existing connection, same grant, must keep working).
      void this.revoke(tokens, 'token').catch(() => undefined);
      throw err;
    }
  }

  async refresh(tokens: ProviderTokens): Promise<ProviderTokens> {
    if (!tokens.refreshToken)
      throw new ProviderError(
        'invalid_grant',
        `The ${this.displayName} access has expired and cannot be renewed; reconnect ${this.displayName}.`,
        'no refresh token',
      );
    const config = await this.#configuration();
    let response: oidc.TokenEndpointResponse;
    try {
      const refreshToken = tokens.refreshToken;
      response = await this.#span('refresh', () => oidc.refreshTokenGrant(config, refreshToken));
    } catch (err) {
      throw this.#grantError(err, 'refresh');
    }
    const next = this.#tokens(response, tokens.scopes);
    // Providers that do not rotate keep answering without a refresh_token: keep the one we have.
    if (!next.refreshToken && !this.#options.definition.refresh.rotates) next.refreshToken = tokens.refreshToken;
    return next;
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
    const config = await this.#configuration();
    // RFC 7009 §2.1: revoking a refresh token revokes the grant's access tokens too. A token the
    // broker decided not to keep ('token') must not take down a grant another connection may use.
    const refresh = what === 'grant' ? tokens.refreshToken : undefined;
    try {
      await this.#span('revoke', () =>
        oidc.tokenRevocation(config, refresh ?? tokens.accessToken, { token_type_hint: refresh ? 'refresh_token' : 'access_token' }),
      );
      return { revoked: true };
    } catch (err) {
      throw new ProviderError(
        'unavailable',
        `${this.displayName} did not confirm the revocation.`,
        err instanceof Error ? err.message : String(err),
      );
    }
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

  #tokens(response: oidc.TokenEndpointResponse, requestedScopes: string[]): ProviderTokens {
    // RFC 6749 §5.1: an omitted scope means "as requested"; an empty one is treated the same (some
    // servers send "" when the access token is for another resource than the OIDC scopes).
    const listed = typeof response.scope === 'string' ? response.scope.split(/[\s,]+/).filter(Boolean) : [];
    const granted = listed.length ? listed : requestedScopes;
    return {
      accessToken: response.access_token,
      tokenType: response.token_type,
      ...(response.refresh_token ? { refreshToken: response.refresh_token } : {}),
      ...(typeof response.expires_in === 'number' && response.expires_in > 0 ? { expiresAt: Date.now() + response.expires_in * 1000 } : {}),
      scopes: this.scopesApply ? granted : [],
    };
  }

  async #account(
    config: oidc.Configuration,
    response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers,
    tokens: ProviderTokens,
  ): Promise<ProviderAccount> {
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
          throw new ProviderError(
            'unavailable',
            `${this.displayName} did not say who you are. Please try again.`,
            err instanceof Error ? err.message : String(err),
          );
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

  #grantError(err: unknown, grant: 'code' | 'refresh'): ProviderError {
    const name = this.displayName;
    if (err instanceof ProviderError) return err;
    if (err instanceof oidc.ResponseBodyError || err instanceof oidc.AuthorizationResponseError) {
      const code = err.error;
      const detail = `${code}: ${err.error_description ?? ''}`;
      if (code === 'access_denied') return new ProviderError('access_denied', `You cancelled at ${name}.`, detail);
      if (code === 'invalid_grant' || code === 'bad_refresh_token' || code === 'bad_verification_code') {
        return grant === 'refresh'
          ? new ProviderError('invalid_grant', `${name} no longer accepts the saved authorization; reconnect ${name}.`, detail)
          : new ProviderError(
              'bad_verification_code',
              `${name} did not accept the authorization (it may have expired). Please start again.`,
              detail,
            );
      }
      if (
        [
          'invalid_client',
          'unauthorized_client',
          'incorrect_client_credentials',
          'redirect_uri_mismatch',
          'unsupported_grant_type',
        ].includes(code)
      ) {
        return new ProviderError('misconfigured', `This service is not set up correctly with ${name}. Tell the operator.`, detail);
      }
      return new ProviderError('unavailable', `${name} could not complete the authorization. Please try again.`, detail);
    }
    const detail = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    return new ProviderError('unavailable', `${name} did not answer properly (it may be down). Please try again in a moment.`, detail);
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
