// Minimal local typings for oidc-provider 9 (it ships no types and @types/oidc-provider is not
// installed). Only the surface used by src/dev/identity-provider.ts is declared; configuration
// callbacks receive oidc-provider's Koa context, which we keep opaque (`unknown`).
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  export type UnknownObject = Record<string, unknown>;

  export interface ClientMetadata {
    client_id: string;
    client_secret?: string;
    redirect_uris?: string[];
    token_endpoint_auth_method?: string;
    grant_types?: string[];
    response_types?: string[];
    [key: string]: unknown;
  }

  /** The Client model instance passed to configuration helpers (camelCased metadata). */
  export interface ClientInstance {
    readonly clientId: string;
    readonly clientAuthMethod?: string;
    readonly applicationType?: string;
    readonly redirectUris: string[];
    readonly clientName?: string;
    [key: string]: unknown;
  }

  /** The part of oidc-provider's Koa context that page-rendering helpers use. */
  export interface PageContext {
    body: unknown;
    type: string;
    oidc: { session?: { accountId?: string; state?: { secret?: string } }; urlFor(route: string): string };
  }

  export interface ResourceServerInfo {
    scope: string;
    audience?: string;
    accessTokenTTL?: number;
    accessTokenFormat?: 'opaque' | 'jwt';
    jwt?: {
      sign?: { alg?: string; kid?: string } | false;
      encrypt?: UnknownObject;
    };
  }

  export interface AccountClaims {
    sub: string;
    [claim: string]: unknown;
  }

  export interface Account {
    accountId: string;
    claims(use: string, scope: string, claims: UnknownObject, rejected: string[]): AccountClaims | Promise<AccountClaims>;
  }

  export interface PromptDetail {
    name: string;
    reasons: string[];
    details: {
      missingOIDCScope?: string[];
      missingOIDCClaims?: string[];
      missingResourceScopes?: Record<string, string[]>;
      [key: string]: unknown;
    };
  }

  export interface InteractionResults {
    login?: { accountId: string; acr?: string; amr?: string[]; remember?: boolean; ts?: number };
    consent?: { grantId?: string };
    error?: string;
    error_description?: string;
    [key: string]: unknown;
  }

  export interface Interaction {
    readonly uid: string;
    readonly jti: string;
    readonly prompt: PromptDetail;
    readonly params: { client_id?: string; [key: string]: unknown };
    readonly session?: { accountId: string; uid: string; [key: string]: unknown };
    readonly grantId?: string;
    readonly returnTo: string;
    readonly lastSubmission?: InteractionResults;
    readonly exp: number;
  }

  export interface Grant {
    readonly jti: string;
    accountId?: string;
    clientId?: string;
    addOIDCScope(scope: string | string[] | Set<string>): void;
    addOIDCClaims(claims: string[] | Set<string>): void;
    addResourceScope(resource: string, scope: string | string[] | Set<string>): void;
    save(ttlSeconds?: number): Promise<string>;
  }

  export interface GrantConstructor {
    new (properties: { accountId: string; clientId: string }): Grant;
    find(id: string): Promise<Grant | undefined>;
  }

  type Ctx = unknown;
  type TtlValue = number | ((ctx: Ctx, token: unknown, client: ClientInstance) => number);

  export interface Configuration {
    clients?: ClientMetadata[];
    jwks?: { keys: UnknownObject[] };
    cookies?: {
      keys?: Array<string | Buffer>;
      long?: UnknownObject;
      short?: UnknownObject;
      names?: Record<string, string>;
    };
    claims?: Record<string, string[] | null>;
    scopes?: string[];
    conformIdTokenClaims?: boolean;
    clientBasedCORS?: (ctx: Ctx, origin: string, client: ClientInstance) => boolean;
    findAccount?: (ctx: Ctx, id: string, token?: unknown) => Promise<Account | undefined> | Account | undefined;
    interactions?: {
      url?: (ctx: Ctx, interaction: Interaction) => string | Promise<string>;
      policy?: unknown;
    };
    pkce?: { required?: (ctx: Ctx, client: ClientInstance) => boolean };
    ttl?: Record<string, TtlValue>;
    features?: {
      devInteractions?: { enabled: boolean };
      resourceIndicators?: {
        enabled: boolean;
        defaultResource?: (
          ctx: Ctx,
          client: ClientInstance,
          oneOf?: string[],
        ) => string | string[] | undefined | Promise<string | string[] | undefined>;
        getResourceServerInfo?: (
          ctx: Ctx,
          resourceIndicator: string,
          client: ClientInstance,
        ) => ResourceServerInfo | Promise<ResourceServerInfo>;
        useGrantedResource?: (ctx: Ctx, model: unknown) => boolean | Promise<boolean>;
      };
      registration?: { enabled: boolean; [key: string]: unknown };
      clientIdMetadataDocument?: {
        enabled: boolean;
        ack?: string;
        allowFetch?: (ctx: Ctx, clientId: string) => boolean | Promise<boolean>;
        allowClient?: (ctx: Ctx, client: ClientInstance) => boolean | Promise<boolean>;
        cacheDuration?: { min: number; max: number };
      };
      revocation?: { enabled: boolean };
      rpInitiatedLogout?: {
        enabled: boolean;
        logoutSource?: (ctx: PageContext, form: string) => void | Promise<void>;
        postLogoutSuccessSource?: (ctx: PageContext) => void | Promise<void>;
      };
      introspection?: { enabled: boolean; [key: string]: unknown };
      userinfo?: { enabled: boolean };
      [feature: string]: UnknownObject | undefined;
    };
    [option: string]: unknown;
  }

  export class Provider {
    constructor(issuer: string, configuration?: Configuration);
    readonly issuer: string;
    proxy: boolean;
    readonly Grant: GrantConstructor;
    readonly Client: { find(id: string): Promise<ClientInstance | undefined> };
    callback(): (req: IncomingMessage, res: ServerResponse) => Promise<void>;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<Interaction>;
    interactionResult(
      req: IncomingMessage,
      res: ServerResponse,
      result: InteractionResults,
      options?: { mergeWithLastSubmission?: boolean },
    ): Promise<string>;
    interactionFinished(
      req: IncomingMessage,
      res: ServerResponse,
      result: InteractionResults,
      options?: { mergeWithLastSubmission?: boolean },
    ): Promise<void>;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }

  export default Provider;

  export class OIDCProviderError extends Error {
    error: string;
    error_description?: string;
    status: number;
    statusCode: number;
    expose: boolean;
  }

  export const errors: {
    OIDCProviderError: typeof OIDCProviderError;
    InvalidTarget: new (description?: string) => OIDCProviderError;
    SessionNotFound: new (description?: string) => OIDCProviderError;
    [name: string]: unknown;
  };
}
