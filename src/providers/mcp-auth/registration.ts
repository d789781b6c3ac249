import * as oidc from 'openid-client';
import { SealError, type Sealer } from '../../crypto/index.js';
import type { Logger } from '../../log.js';
import { ProviderError } from '../provider.js';
import type { Store, UpstreamClientRow } from '../../store/index.js';
import type { EgressRule } from '../../net/egress-rule.js';
import { authorizationServerFetch } from './bounded-fetch.js';
import { oauthMessages as T } from '../messages.js';
import { fetchFailure, type ClientAuthMethod } from '../oauth-client.js';
import { egressRefusalIn } from '../../net/egress-fetch.js';
import { isLoopbackHttp, type UpstreamAuthorization } from './discovery.js';
import { M } from './messages.js';
import { scopeList, scopeString } from '../scopes.js';

/** The broker as a client of an upstream's authorization server. */
export interface UpstreamClient {
  clientId: string;
  clientSecret?: string;
  authMethod: ClientAuthMethod;
  /** How it became one: the operator's pre-registration, our client ID metadata document, or RFC 7591. */
  via: 'pre-registered' | 'metadata-document' | 'dynamic-registration';
}

export interface RegistrationContext {
  /** The upstream's name for messages, and the variable prefix the operator would set. */
  name: string;
  variablePrefix: string;
  /** The broker's callback for this upstream: the only redirect URI it registers. */
  redirectUri: string;
  /** The scopes its authorization requests will ask for, registered as the client's `scope` (RFC 7591 §2). */
  scopes: string[];
  /** Where the broker serves its client ID metadata document for this upstream, when PUBLIC_URL is https. */
  documentUrl: string | undefined;
  clientName: string;
  preRegistered?: { clientId: string; clientSecret?: string };
  store: Store;
  sealer: Sealer;
  timeoutMs: number;
  /** Where the registration endpoint may be: the operator's egress rule and the upstream's origin. */
  egress: EgressRule;
  log: Logger;
}

const SECRET_CONTEXT = 'upstream-client-secret';

/** What the authorization server lists that a confidential client may use, best first (RFC 8414: basic when it says nothing). */
function confidentialMethod(server: oidc.ServerMetadata): ClientAuthMethod {
  const supported = server.token_endpoint_auth_methods_supported ?? ['client_secret_basic'];
  if (supported.includes('client_secret_basic')) return 'client_secret_basic';
  if (supported.includes('client_secret_post')) return 'client_secret_post';
  return 'none';
}

function authMethodOf(value: unknown, fallback: ClientAuthMethod): ClientAuthMethod {
  return value === 'none' || value === 'client_secret_basic' || value === 'client_secret_post' ? value : fallback;
}

/**
 * Becomes the upstream authorization server's client, the MCP authorization spec's way: a client
 * the operator pre-registered (`<ID>_CLIENT_ID`) when there is one, else the broker's client ID
 * metadata document when the server supports them (it needs an https PUBLIC_URL), else dynamic
 * registration (RFC 7591), else a clear `misconfigured` error naming the variable to set.
 * Registrations are kept per issuer in the store, shared by every instance (SEP-2352).
 */
export async function becomeClient(auth: UpstreamAuthorization, ctx: RegistrationContext): Promise<UpstreamClient> {
  const { server } = auth;
  if (ctx.preRegistered) {
    const { clientId, clientSecret } = ctx.preRegistered;
    return {
      clientId,
      ...(clientSecret ? { clientSecret } : {}),
      authMethod: clientSecret ? confidentialMethod(server) : 'none',
      via: 'pre-registered',
    };
  }
  const documents = server.client_id_metadata_document_supported === true;
  if (documents && ctx.documentUrl) return { clientId: ctx.documentUrl, authMethod: 'none', via: 'metadata-document' };
  if (server.registration_endpoint) return registered(auth, ctx);
  throw new ProviderError(
    'misconfigured',
    M.noRegistration(ctx.name, `${ctx.variablePrefix}_CLIENT_ID`, documents),
    'no way to become a client',
  );
}

/** Forgets a dynamic registration the server refused (it may have deleted it), so the next connect registers again. */
export async function forgetRegistration(auth: UpstreamAuthorization, ctx: RegistrationContext, clientId: string): Promise<void> {
  if (await ctx.store.upstreamClients.delete(auth.server.issuer, ctx.redirectUri, clientId))
    ctx.log.warn('upstream_client_forgotten', { issuer: auth.server.issuer, upstream: ctx.name });
}

async function registered(auth: UpstreamAuthorization, ctx: RegistrationContext): Promise<UpstreamClient> {
  const issuer = auth.server.issuer;
  const stored = await ctx.store.upstreamClients.find(issuer, ctx.redirectUri);
  const usable = stored && fromRow(stored, ctx);
  if (usable) return usable;
  if (stored) await ctx.store.upstreamClients.delete(issuer, ctx.redirectUri, stored.client_id);

  const authMethod = confidentialMethod(auth.server);
  let response: oidc.ClientMetadata;
  try {
    const config = await oidc.dynamicClientRegistration(
      new URL(issuer),
      {
        client_name: ctx.clientName,
        redirect_uris: [ctx.redirectUri],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: authMethod,
        application_type: 'web',
        ...(ctx.scopes.length ? { scope: scopeString(ctx.scopes) } : {}),
      },
      undefined,
      {
        algorithm: auth.algorithm,
        timeout: Math.max(1, Math.ceil(ctx.timeoutMs / 1000)),
        execute: isLoopbackHttp(issuer) ? [oidc.allowInsecureRequests] : [],
        [oidc.customFetch]: authorizationServerFetch(ctx.egress, ctx.timeoutMs),
      },
    );
    response = config.clientMetadata();
  } catch (err) {
    if (egressRefusalIn(err)) throw fetchFailure(err, ctx.name, 'registration');
    const detail = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    const refused = err instanceof oidc.ResponseBodyError;
    throw new ProviderError(
      refused ? 'misconfigured' : 'unavailable',
      refused ? M.registrationFailed(ctx.name) : T.unreachable(ctx.name),
      detail,
    );
  }
  const secret = typeof response.client_secret === 'string' && response.client_secret ? response.client_secret : undefined;
  const sealed = secret ? ctx.sealer.seal(secret, clientSecretContext(issuer, ctx.redirectUri)) : undefined;
  // Neither the secret nor a registration access token is kept in the clear.
  const { client_secret: _secret, registration_access_token: _rat, ...metadata } = response;
  void _secret;
  void _rat;
  const row = await ctx.store.upstreamClients.putIfAbsent({
    issuer,
    client_key: ctx.redirectUri,
    client_id: response.client_id,
    client_secret_sealed: sealed?.value ?? null,
    key_id: sealed?.keyId ?? null,
    registered_at: Date.now(),
    metadata_json: JSON.stringify(metadata),
  });
  if (row.client_id === response.client_id) ctx.log.info('upstream_client_registered', { issuer, upstream: ctx.name });
  const client = fromRow(row, ctx);
  if (!client) throw new ProviderError('misconfigured', M.registrationFailed(ctx.name), 'the stored registration cannot be used');
  return client;
}

/** What a registration's sealed client secret is bound to: its issuer and callback (`npm run rotate-keys` re-seals under it too). */
export function clientSecretContext(issuer: string, clientKey: string) {
  return { issuer, subject: clientKey, provider: SECRET_CONTEXT };
}

/** A stored registration, or undefined when it cannot serve any more (secret expired or sealed under a key we lost). */
function fromRow(row: UpstreamClientRow, ctx: RegistrationContext): UpstreamClient | undefined {
  let metadata: Record<string, unknown> = {};
  try {
    metadata = JSON.parse(row.metadata_json) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  // Registered for fewer scopes than are asked for now (the operator changed them, or it predates registering them).
  if (typeof metadata.scope === 'string') {
    const registered = scopeList(metadata.scope);
    if (ctx.scopes.some((s) => !registered.includes(s))) return undefined;
  }
  const expiresAt = typeof metadata.client_secret_expires_at === 'number' ? metadata.client_secret_expires_at : 0;
  if (expiresAt > 0 && expiresAt * 1000 <= Date.now() + 60_000) return undefined;
  let clientSecret: string | undefined;
  if (row.client_secret_sealed) {
    try {
      clientSecret = ctx.sealer.open(
        { keyId: row.key_id ?? '', value: row.client_secret_sealed },
        clientSecretContext(row.issuer, row.client_key),
      );
    } catch (err) {
      if (!(err instanceof SealError)) throw err;
      ctx.log.warn('upstream_client_secret_unreadable', { issuer: row.issuer, upstream: ctx.name, reason: err.reason });
      return undefined;
    }
  }
  const fallback: ClientAuthMethod = clientSecret ? 'client_secret_basic' : 'none';
  return {
    clientId: row.client_id,
    ...(clientSecret ? { clientSecret } : {}),
    authMethod: clientSecret ? authMethodOf(metadata.token_endpoint_auth_method, fallback) : 'none',
    via: 'dynamic-registration',
  };
}
