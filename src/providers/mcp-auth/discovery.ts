import * as oidc from 'openid-client';
import { isLoopbackHostname } from '../../net/loopback.js';
import { fetchWithTimeout } from '../http.js';
import { ProviderError } from '../provider.js';
import { bearerChallenge, scopeTokens } from '../www-authenticate.js';
import { readBounded } from '../../http/bounded-read.js';
import { egressFetch, egressRefusalIn } from '../../net/egress-fetch.js';
import type { EgressRule } from '../../net/egress-rule.js';
import { oauthMessages as T } from '../messages.js';
import { errorDetail, fetchFailure } from '../oauth-client.js';
import { authorizationServerFetch } from './bounded-fetch.js';
import { M } from './messages.js';

/** Metadata documents are small; anything larger is not one. */
const MAX_METADATA_BYTES = 64 * 1024;

/** What the upstream and its authorization server said about how to get a token for it. */
export interface UpstreamAuthorization {
  /** The protected resource (the upstream URL, as its metadata names it): the RFC 8707 `resource`. */
  resource: string;
  /** `scope` of the upstream's 401 challenge, if it sent one. */
  challengeScopes: string[];
  /** `scopes_supported` of its protected resource metadata. */
  scopesSupported: string[];
  /** Which discovery document of the authorization server answered (openid-client's `algorithm`). */
  algorithm: 'oauth2' | 'oidc';
  /** The authorization server's metadata, its issuer and every endpoint checked. */
  server: oidc.ServerMetadata;
}

/**
 * https, or plain http on a loopback address (the rule for upstream URLs); no credentials in it.
 * `plainHttp: false` (what an upstream reached over https names) allows https only: a server the
 * broker reached over TLS must not send it to plain http, least of all to a service on its own host.
 */
export function isAllowedUrl(value: unknown, { plainHttp = true }: { plainHttp?: boolean } = {}): value is string {
  if (typeof value !== 'string') return false;
  const url = URL.parse(value);
  if (!url || url.username || url.password) return false;
  return url.protocol === 'https:' || (plainHttp && url.protocol === 'http:' && isLoopbackHostname(url.hostname));
}

export function isLoopbackHttp(value: string): boolean {
  const url = URL.parse(value);
  return !!url && url.protocol === 'http:' && isLoopbackHostname(url.hostname);
}

function sameUrl(a: string, b: string): boolean {
  const ua = URL.parse(a);
  const ub = URL.parse(b);
  return !!ua && !!ub && ua.href === ub.href;
}

/** Reads at most MAX_METADATA_BYTES of a JSON object, else `unavailable`. */
async function readMetadata(response: Response, name: string): Promise<Record<string, unknown>> {
  const body = await readBounded(response, MAX_METADATA_BYTES);
  if (!body) throw new ProviderError('unavailable', T.garbled(name), `metadata over ${MAX_METADATA_BYTES} bytes`);
  try {
    const value: unknown = JSON.parse(body.toString('utf8'));
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw new ProviderError('unavailable', T.garbled(name), `HTTP ${response.status}, ${body.byteLength} bytes of non-JSON metadata`);
}

const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);

/**
 * RFC 9728 §3.1: the protected resource metadata of `resource` at the path-inserted well-known URL,
 * then at the root one (the MCP authorization spec's order).
 */
function wellKnownMetadataUrls(resource: URL): string[] {
  const path = resource.pathname.replace(/\/+$/, '');
  const urls = [new URL(`/.well-known/oauth-protected-resource${path}`, resource.origin).href];
  if (path) urls.push(new URL('/.well-known/oauth-protected-resource', resource.origin).href);
  return urls;
}

/**
 * Discovers how to get a token for the MCP server at `upstreamUrl`: an unauthenticated request for
 * its 401 challenge (RFC 9728 §5.1), its protected resource metadata (whose `resource` must be the
 * upstream URL, §3.3), then the authorization server it names first (RFC 8414 with path insertion,
 * else OpenID discovery; its `issuer` must be that URL). Only the upstream URL and what these
 * documents name are fetched, each only if https (or loopback http), each within `timeoutMs`, and
 * every one but the configured URL itself under the `egress` rule (its origin is the operator's own choice, so
 * it stays reachable whatever its address).
 */
export async function discoverUpstreamAuthorization(
  upstreamUrl: URL,
  opts: { name: string; timeoutMs: number; egress: EgressRule },
): Promise<UpstreamAuthorization> {
  const { name, timeoutMs } = opts;
  const egress = opts.egress.withOrigin(upstreamUrl.origin);
  const resource = upstreamUrl.href;
  // Plain http (loopback) only where the configured upstream is itself plain http on loopback.
  const allowed = (value: unknown): value is string => isAllowedUrl(value, { plainHttp: upstreamUrl.protocol === 'http:' });
  // A ping, not an initialize: an upstream that lets it through unauthenticated gets no session from us.
  const probe = await fetchWithTimeout(
    upstreamUrl,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'user-agent': 'mcp-connect-broker' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    },
    timeoutMs,
    name,
  );
  await probe.body?.cancel().catch(() => undefined);
  const challenge = probe.status === 401 ? bearerChallenge(probe.headers.get('www-authenticate')) : undefined;
  // Scope names reach the authorization request and the consent page: the shared parser keeps them
  // only as RFC 6749 scope-tokens within its bounds, else none.
  const challengeScopes = challenge?.scope ?? [];

  let candidates: string[];
  if (challenge?.resourceMetadata) {
    if (!allowed(challenge.resourceMetadata)) throw new ProviderError('misconfigured', M.insecureUrl(name, 'resource_metadata URL'));
    candidates = [challenge.resourceMetadata];
  } else {
    candidates = wellKnownMetadataUrls(upstreamUrl);
  }
  let prm: Record<string, unknown> | undefined;
  const fetchMetadata = egressFetch(egress, { maxBytes: MAX_METADATA_BYTES, timeoutMs });
  for (const url of candidates) {
    let response: Response;
    try {
      response = await fetchMetadata(url, { headers: { accept: 'application/json', 'user-agent': 'mcp-connect-broker' } });
    } catch (err) {
      throw fetchFailure(err, name, 'protected resource metadata');
    }
    if (response.status === 200) {
      prm = await readMetadata(response, name);
      break;
    }
    await response.body?.cancel().catch(() => undefined);
    if (response.status !== 404)
      throw new ProviderError('unavailable', T.unreachable(name), `protected resource metadata: HTTP ${response.status}`);
  }
  if (!prm)
    throw new ProviderError(
      'misconfigured',
      M.noAuthorization(name),
      `no resource_metadata challenge (HTTP ${probe.status}) and no well-known metadata`,
    );
  // What the document says is never repeated: a page shows the operator's words, not the upstream's.
  if (typeof prm.resource !== 'string' || !sameUrl(prm.resource, resource))
    throw new ProviderError('misconfigured', M.wrongResource(name, resource), 'RFC 9728 §3.3 resource mismatch');
  const issuer = strings(prm.authorization_servers)[0];
  if (!issuer) throw new ProviderError('misconfigured', M.noAuthorizationServer(name));
  if (!allowed(issuer)) throw new ProviderError('misconfigured', M.insecureUrl(name, 'authorization server'));

  const { server, algorithm } = await authorizationServerMetadata(new URL(issuer), name, timeoutMs, egress);
  if (!sameUrl(server.issuer, issuer)) throw new ProviderError('misconfigured', M.wrongIssuer(name), 'RFC 8414 §3.3 issuer mismatch');
  for (const field of [
    'authorization_endpoint',
    'token_endpoint',
    'registration_endpoint',
    'revocation_endpoint',
    'jwks_uri',
    'userinfo_endpoint',
  ] as const) {
    const value = server[field];
    if (value !== undefined && !allowed(value)) throw new ProviderError('misconfigured', M.insecureUrl(name, field.replace(/_/g, ' ')));
  }
  if (!server.authorization_endpoint || !server.token_endpoint)
    throw new ProviderError('misconfigured', M.noMetadata(name), 'authorization or token endpoint missing');
  // MCP authorization: a client must refuse to proceed without S256 advertised.
  if (!strings(server.code_challenge_methods_supported).includes('S256')) throw new ProviderError('misconfigured', M.noPkce(name));
  return { resource: prm.resource, challengeScopes, scopesSupported: scopeTokens(strings(prm.scopes_supported)), algorithm, server };
}

/** RFC 8414 metadata (path-inserted well-known), else OpenID Connect discovery; openid-client checks `issuer`. */
async function authorizationServerMetadata(
  issuer: URL,
  name: string,
  timeoutMs: number,
  egress: EgressRule,
): Promise<{ server: oidc.ServerMetadata; algorithm: 'oauth2' | 'oidc' }> {
  const timeout = Math.max(1, Math.ceil(timeoutMs / 1000));
  const execute = isLoopbackHttp(issuer.href) ? [oidc.allowInsecureRequests] : [];
  let first: unknown;
  for (const algorithm of ['oauth2', 'oidc'] as const) {
    try {
      // The client id is a placeholder: only the server's metadata is read from this configuration.
      const config = await oidc.discovery(issuer, 'discovery', undefined, oidc.None(), {
        algorithm,
        timeout,
        execute,
        [oidc.customFetch]: authorizationServerFetch(egress, timeoutMs),
      });
      return { server: config.serverMetadata(), algorithm };
    } catch (err) {
      if (egressRefusalIn(err)) throw fetchFailure(err, name, 'authorization server metadata');
      first ??= err;
      // An issuer mismatch is an answer, not an absence: never fall back past it.
      if (err instanceof oidc.ClientError && err.code === 'OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED') {
        throw new ProviderError('misconfigured', M.wrongIssuer(name), err.message);
      }
    }
  }
  const detail = errorDetail(first);
  throw new ProviderError('unavailable', T.unreachable(name), `authorization server metadata: ${detail}`);
}
