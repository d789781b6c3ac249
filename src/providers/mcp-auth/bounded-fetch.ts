import type * as oidc from 'openid-client';
import { egressFetch, type EgressRequestInit } from '../../net/egress-fetch.js';
import type { EgressRule } from '../../net/egress-rule.js';

/**
 * The largest answer the broker reads from an upstream's authorization server (metadata, JWKS,
 * registration, token responses): each is a few kilobytes. The server is whoever the upstream's
 * metadata names, so its answers are bounded like the metadata the broker reads itself.
 */
export const MAX_AUTHORIZATION_SERVER_RESPONSE_BYTES = 256 * 1024;

/**
 * openid-client's `customFetch` for an `auth: mcp` upstream's authorization server: every request
 * (metadata, registration, token, revocation, JWKS) under the egress rule — https, a public
 * address unless the operator allowed it, no redirect followed — with its answer read only up to
 * {@link MAX_AUTHORIZATION_SERVER_RESPONSE_BYTES} (openid-client itself would read any length until its timeout).
 */
export function authorizationServerFetch(
  rule: EgressRule,
  timeoutMs: number,
): (url: string, init: oidc.CustomFetchOptions) => Promise<Response> {
  const send = egressFetch(rule, { maxBytes: MAX_AUTHORIZATION_SERVER_RESPONSE_BYTES, timeoutMs });
  return (url, init) => {
    // openid-client sends strings and form bodies; a stream would be ours to buffer, so none is accepted.
    if (init.body instanceof ReadableStream) return Promise.reject(new TypeError('a streamed request body is not supported'));
    return send(url, init as EgressRequestInit);
  };
}
