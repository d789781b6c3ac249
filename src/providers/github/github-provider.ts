import * as oidc from 'openid-client';
import { isLoopbackHostname } from '../../config/env.js';
import { fetchWithTimeout, readJson } from '../http.js';
import { ProviderError, type Provider, type ProviderAccount, type ProviderScope, type ProviderTokens } from '../provider.js';
import { githubApiError, githubTokenError } from './errors.js';

export interface GitHubProviderOptions {
  clientId: string;
  clientSecret: string;
  webUrl: URL;
  apiUrl: URL;
  scopes?: string[];
  timeoutMs?: number;
  sandbox?: boolean;
}

const SCOPE_DESCRIPTIONS: Record<string, string> = {
  repo: 'Read and write your public and private repositories, including creating issues.',
  public_repo: 'Read and write your public repositories, including creating issues.',
  'read:user': 'Read your GitHub profile.',
};

export interface CreatedIssue {
  number: number;
  url: string;
  title: string;
}

/** Joins a path onto a base URL that may itself have a path (GitHub Enterprise's `/api/v3`). */
function under(base: URL, path: string): URL {
  return new URL(path.replace(/^\//, ''), base.href.endsWith('/') ? base : new URL(base.href + '/'));
}

/**
 * GitHub as an OAuth App: web flow with state and PKCE S256 through openid-client, and the few REST
 * calls our tools need. GitHub's quirks (errors as HTTP 200, comma-separated scopes) stay in here.
 */
export class GitHubProvider implements Provider {
  readonly id = 'github';
  readonly displayName: string;
  readonly sandbox: boolean;
  readonly scopes: ProviderScope[];
  readonly authorizationOrigin: string;
  readonly #options: Required<GitHubProviderOptions>;
  readonly #oauth: oidc.Configuration;

  constructor(options: GitHubProviderOptions) {
    this.#options = { scopes: ['repo'], timeoutMs: 10_000, sandbox: false, ...options };
    this.sandbox = this.#options.sandbox;
    this.displayName = this.sandbox ? 'GitHub (sandbox)' : 'GitHub';
    this.scopes = this.#options.scopes.map((name) => ({ name, description: SCOPE_DESCRIPTIONS[name] ?? `GitHub scope "${name}".` }));
    this.authorizationOrigin = options.webUrl.origin;
    const server: oidc.ServerMetadata = {
      issuer: options.webUrl.href,
      authorization_endpoint: under(options.webUrl, 'login/oauth/authorize').href,
      token_endpoint: under(options.webUrl, 'login/oauth/access_token').href,
    };
    this.#oauth = new oidc.Configuration(server, options.clientId, options.clientSecret);
    this.#oauth.timeout = Math.ceil(this.#options.timeoutMs / 1000);
    this.#oauth[oidc.customFetch] = (url, init) => this.#tokenEndpointFetch(url, init);
    if (options.webUrl.protocol === 'http:' && isLoopbackHostname(options.webUrl.hostname)) oidc.allowInsecureRequests(this.#oauth);
  }

  /** GitHub reports token errors as HTTP 200 + `error`; re-label them 400 so openid-client parses them as OAuth errors. */
  async #tokenEndpointFetch(url: string, init: oidc.CustomFetchOptions): Promise<Response> {
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

  buildAuthorizationUrl({ redirectUri, state, codeChallenge }: { redirectUri: string; state: string; codeChallenge: string }): URL {
    return oidc.buildAuthorizationUrl(this.#oauth, {
      redirect_uri: redirectUri,
      scope: this.#options.scopes.join(' '),
      state,
      code_challenge: codeChallenge,
      code_challenge_method: 'S256',
      allow_signup: 'true',
    });
  }

  async exchangeCode({ callbackUrl, expectedState, codeVerifier }: { callbackUrl: URL; expectedState: string; codeVerifier: string }): Promise<ProviderTokens> {
    let response: oidc.TokenEndpointResponse;
    try {
      response = await oidc.authorizationCodeGrant(this.#oauth, callbackUrl, { expectedState, pkceCodeVerifier: codeVerifier });
    } catch (err) {
      throw this.#tokenError(err);
    }
    const scopes = (response.scope ?? '').split(/[\s,]+/).filter(Boolean);
    return {
      accessToken: response.access_token,
      tokenType: response.token_type,
      ...(response.refresh_token ? { refreshToken: response.refresh_token } : {}),
      ...(typeof response.expires_in === 'number' ? { expiresAt: Date.now() + response.expires_in * 1000 } : {}),
      scopes,
    };
  }

  #tokenError(err: unknown): ProviderError {
    if (err instanceof oidc.ResponseBodyError || err instanceof oidc.AuthorizationResponseError) return githubTokenError(err.error, err.error_description);
    const detail = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    return new ProviderError('unavailable', 'GitHub did not complete the authorization (it may be down). Please try again in a moment.', detail);
  }

  async #api(path: string, tokens: ProviderTokens, init: RequestInit, action: string): Promise<{ response: Response; body: Record<string, unknown> }> {
    const response = await fetchWithTimeout(
      under(this.#options.apiUrl, path),
      {
        ...init,
        headers: {
          accept: 'application/vnd.github+json',
          'x-github-api-version': '2022-11-28',
          'user-agent': 'mcp-connect-broker',
          authorization: `Bearer ${tokens.accessToken}`,
          ...(init.body ? { 'content-type': 'application/json' } : {}),
        },
      },
      this.#options.timeoutMs,
      'GitHub',
    );
    if (response.status === 204) return { response, body: {} };
    const body = await readJson(response, 'GitHub');
    if (!response.ok) throw githubApiError(response, body, action);
    return { response, body };
  }

  async fetchAccount(tokens: ProviderTokens): Promise<ProviderAccount> {
    const { body } = await this.#api('user', tokens, { method: 'GET' }, 'read your GitHub profile');
    if (typeof body.login !== 'string' || (typeof body.id !== 'number' && typeof body.id !== 'string')) {
      throw new ProviderError('unavailable', 'GitHub sent an unexpected profile. Please try again.', 'missing login/id');
    }
    return { id: String(body.id), login: body.login };
  }

  async createIssue(tokens: ProviderTokens, issue: { owner: string; repo: string; title: string; body?: string; labels?: string[] }): Promise<CreatedIssue> {
    const { owner, repo, ...fields } = issue;
    const { body } = await this.#api(
      `repos/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}/issues`,
      tokens,
      { method: 'POST', body: JSON.stringify(fields) },
      `create an issue in ${owner}/${repo}`,
    );
    if (typeof body.number !== 'number' || typeof body.html_url !== 'string') {
      throw new ProviderError('unavailable', 'GitHub sent an unexpected answer after creating the issue.', 'missing number/html_url');
    }
    return { number: body.number, url: body.html_url, title: typeof body.title === 'string' ? body.title : issue.title };
  }

  /** `DELETE /applications/{client_id}/grant`: removes every token of this app for the user. */
  async revoke(tokens: ProviderTokens): Promise<void> {
    const { clientId, clientSecret } = this.#options;
    const response = await fetchWithTimeout(
      under(this.#options.apiUrl, `applications/${encodeURIComponent(clientId)}/grant`),
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
      'GitHub',
    );
    // 404: the grant is already gone (the user revoked it at GitHub), which is the outcome we want.
    if (response.status === 204 || response.status === 404) return;
    throw githubApiError(response, await readJson(response, 'GitHub').catch(() => ({})), 'revoke the grant');
  }
}
