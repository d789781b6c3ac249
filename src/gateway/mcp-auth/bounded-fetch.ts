import { readBounded } from '../../http/bounded-read.js';
import type * as oidc from 'openid-client';

/**
 * The largest answer the broker reads from an upstream's authorization server (metadata, JWKS,
 * registration, token responses): each is a few kilobytes. The server is whoever the upstream's
 * metadata names, so its answers are bounded like the metadata the broker reads itself.
 */
export const MAX_AUTHORIZATION_SERVER_RESPONSE_BYTES = 256 * 1024;

/** Thrown (through openid-client) when an authorization server's answer is over the bound. */
export class ResponseTooLarge extends Error {
  override name = 'ResponseTooLarge';
}

/**
 * openid-client's `customFetch` for `auth: mcp` authorization servers: the same request, with its
 * body read into memory only up to {@link MAX_AUTHORIZATION_SERVER_RESPONSE_BYTES} (openid-client
 * itself would read any length until its timeout).
 */
export async function boundedFetch(url: string, init: oidc.CustomFetchOptions): Promise<Response> {
  const response = await fetch(url, init as RequestInit);
  const tooLarge = () => new ResponseTooLarge(`the authorization server's answer is over ${MAX_AUTHORIZATION_SERVER_RESPONSE_BYTES} bytes`);
  if (Number(response.headers.get('content-length')) > MAX_AUTHORIZATION_SERVER_RESPONSE_BYTES) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  if (!response.body) return response;
  const body = await readBounded(response, MAX_AUTHORIZATION_SERVER_RESPONSE_BYTES);
  if (!body) throw tooLarge();
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** An error as a log detail, with the cause openid-client wraps ours in ("something went wrong" alone says nothing). */
export function errorDetail(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? ` (${err.cause.name}: ${err.cause.message})` : '';
  return `${err.name}: ${err.message}${cause}`;
}
