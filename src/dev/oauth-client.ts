import type {
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens,
} from '@modelcontextprotocol/client';
import { parseForms, type Browser } from './http-browser.js';

/**
 * A minimal MCP client-side OAuth provider (dynamic registration, PKCE, tokens in memory) that
 * captures the authorization URL instead of opening a browser, for the demo and the tests.
 */
export class InMemoryOAuthClient implements OAuthClientProvider {
  authorizationUrl: URL | undefined;
  #client: StoredOAuthClientInformation | undefined;
  #tokens: StoredOAuthTokens | undefined;
  #verifier = '';
  #discovery: OAuthDiscoveryState | undefined;

  constructor(
    readonly redirectUri: string,
    readonly clientName: string,
  ) {}

  get redirectUrl(): string {
    return this.redirectUri;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.clientName,
      redirect_uris: [this.redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  clientInformation(): StoredOAuthClientInformation | undefined {
    return this.#client;
  }

  saveClientInformation(info: StoredOAuthClientInformation): void {
    this.#client = info;
  }

  tokens(): StoredOAuthTokens | undefined {
    return this.#tokens;
  }

  saveTokens(tokens: StoredOAuthTokens): void {
    this.#tokens = tokens;
  }

  redirectToAuthorization(url: URL): void {
    this.authorizationUrl = url;
  }

  saveCodeVerifier(verifier: string): void {
    this.#verifier = verifier;
  }

  codeVerifier(): string {
    return this.#verifier;
  }

  saveDiscoveryState(state: OAuthDiscoveryState): void {
    this.#discovery = state;
  }

  discoveryState(): OAuthDiscoveryState | undefined {
    return this.#discovery;
  }
}

/**
 * Plays the user in a browser for an MCP client's sign-in: follows the authorization URL, fills
 * the development sign-in form with `user`, and returns the parameters delivered to the redirect
 * URI (`code`, `state`, `iss`) for the SDK transport's `finishAuth`.
 */
export async function authorizeInBrowser(
  browser: Browser,
  authorizationUrl: URL,
  redirectUri: string,
  user: string,
  onHop: (line: string) => void = () => {},
): Promise<URLSearchParams> {
  let url = authorizationUrl.href;
  let init: { method?: string; body?: URLSearchParams } = {};
  for (let hop = 0; hop < 20; hop++) {
    onHop(`${init.method ?? 'GET'} ${url.split('?')[0]}`);
    const res = await browser.request(url, init);
    init = {};
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      await res.body?.cancel();
      const next = new URL(location, url);
      if (next.href.startsWith(redirectUri)) {
        if (!next.searchParams.get('code'))
          throw new Error(
            `sign-in ended without a code: ${next.searchParams.get('error') ?? 'unknown error'} ${next.searchParams.get('error_description') ?? ''}`,
          );
        return next.searchParams;
      }
      url = next.href;
      continue;
    }
    const html = await res.text();
    const form = parseForms(html).find((f) => 'login' in f.fields || /login/.test(f.action));
    if (!form) throw new Error(`unexpected page during sign-in (HTTP ${res.status})`);
    onHop(`  sign-in page: entering user name "${user}"`);
    url = new URL(form.action, url).href;
    init = { method: 'POST', body: new URLSearchParams({ ...form.fields, login: user }) };
  }
  throw new Error('sign-in did not finish');
}
