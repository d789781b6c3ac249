import * as oidc from 'openid-client';
import { isLoopbackHostname } from '../net/loopback.js';

export interface OidcClientOptions {
  issuer: URL;
  clientId: string;
  clientSecret: string;
  /** How we authenticate at the token endpoint; RFC 7591's default is client_secret_basic. */
  authMethod?: 'client_secret_basic' | 'client_secret_post';
  timeoutSeconds?: number;
}

/**
 * The operator's identity provider as seen by openid-client. Discovery happens on first use and is
 * retried on the next use if it failed, so the broker starts even while the IdP is briefly down.
 */
export class OidcClient {
  #config: Promise<oidc.Configuration> | undefined;
  #authorizationOrigin: string;

  constructor(private readonly options: OidcClientOptions) {
    this.#authorizationOrigin = options.issuer.origin;
  }

  /** Where sign-in sends the browser: the issuer's origin until discovery names the authorization endpoint. */
  authorizationOrigin(): string {
    return this.#authorizationOrigin;
  }

  configuration(): Promise<oidc.Configuration> {
    this.#config ??= this.#discover().catch((err: unknown) => {
      this.#config = undefined;
      throw err;
    });
    return this.#config;
  }

  async #discover(): Promise<oidc.Configuration> {
    const { issuer, clientId, clientSecret, authMethod = 'client_secret_basic', timeoutSeconds = 10 } = this.options;
    const insecure = issuer.protocol === 'http:' && isLoopbackHostname(issuer.hostname);
    const auth = authMethod === 'client_secret_post' ? oidc.ClientSecretPost(clientSecret) : oidc.ClientSecretBasic(clientSecret);
    const config = await oidc.discovery(issuer, clientId, undefined, auth, {
      timeout: timeoutSeconds,
      ...(insecure ? { execute: [oidc.allowInsecureRequests] } : {}),
    });
    config.timeout = timeoutSeconds;
    const endpoint = config.serverMetadata().authorization_endpoint;
    if (endpoint) this.#authorizationOrigin = new URL(endpoint).origin;
    return config;
  }

  /** The issuer identifier exactly as the IdP spells it (and as it appears in `iss`). */
  async issuer(): Promise<string> {
    return (await this.configuration()).serverMetadata().issuer;
  }

  async jwksUri(): Promise<URL> {
    const uri = (await this.configuration()).serverMetadata().jwks_uri;
    if (!uri) throw new Error('the identity provider publishes no jwks_uri');
    return new URL(uri);
  }
}
