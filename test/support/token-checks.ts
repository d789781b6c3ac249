import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Browser } from './browser.js';
import { envelope, rawCall } from './mcp.js';
import type { Stack } from './stack.js';

/**
 * What the suites on access-token rules share (test/access-tokens.test.ts, test/idp-compat.test.ts):
 * a real ID token from the stack's IdP, and one `/mcp` call whose answer is asserted accepted or
 * refused with the RFC 6750 challenge.
 */

/**
 * A JWT in clear: its header and payload both start `eyJ` (base64url of `{"`) around a dot. `eyJ`
 * alone turns up in random base64url (a sealed value, an id) about once in 200 KB.
 */
export const JWT_IN_CLEAR = /eyJ[\w-]*\.eyJ/;

const RESOURCE_CLIENT_SECRET = 'resource-named-client-secret';

/** A client registered at the IdP under the resource URL itself, as some IdPs model an API: ID tokens whose aud is the MCP resource. */
export function resourceNamedClient(publicUrl: string) {
  return [
    {
      client_id: `${publicUrl}/mcp`,
      client_secret: RESOURCE_CLIENT_SECRET,
      redirect_uris: [`${publicUrl}/id-token-landing`],
      token_endpoint_auth_method: 'client_secret_post' as const,
    },
  ];
}

/** Runs a real authorization-code flow at the stack's IdP as the resource-named client (with `nonce` where given) and returns its ID token. */
export async function idTokenFromIdp(stack: Stack, user: string, nonce?: string): Promise<string> {
  const discovery = (await (await fetch(`${stack.idp.issuer}/.well-known/openid-configuration`)).json()) as {
    authorization_endpoint: string;
    token_endpoint: string;
  };
  const [client] = resourceNamedClient(stack.publicUrl);
  const verifier = randomBytes(32).toString('base64url');
  const authorize = new URL(discovery.authorization_endpoint);
  authorize.search = new URLSearchParams({
    client_id: client!.client_id,
    response_type: 'code',
    scope: 'openid profile',
    redirect_uri: client!.redirect_uris[0]!,
    state: randomBytes(16).toString('base64url'),
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    ...(nonce ? { nonce } : {}),
  }).toString();
  const browser = new Browser();
  const login = await browser.open(authorize.href);
  assert.match(login.html, /Development sign-in/);
  const landed = await browser.submit(login, { fields: { login: user } });
  const code = new URL(landed.url).searchParams.get('code');
  assert.ok(code, `the IdP redirected back with a code: ${landed.url}`);
  const res = await fetch(discovery.token_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: client!.redirect_uris[0]!,
      code_verifier: verifier,
      client_id: client!.client_id,
      client_secret: RESOURCE_CLIENT_SECRET,
    }),
  });
  const tokens = (await res.json()) as { id_token?: string };
  assert.equal(res.status, 200, JSON.stringify(tokens));
  assert.ok(tokens.id_token, JSON.stringify(tokens));
  return tokens.id_token;
}

/** `list_connections` on the stack's `/mcp` with `token` as the bearer: the raw answer. */
export function listConnectionsWith(stack: Stack, token: string) {
  return rawCall(stack.mcpUrl, token, { method: 'tools/call', params: { name: 'list_connections', arguments: {}, _meta: envelope() } });
}

export async function assertAccepted(stack: Stack, token: string, label: string): Promise<void> {
  const res = await listConnectionsWith(stack, token);
  assert.equal(res.status, 200, `${label}: ${res.text}`);
  assert.ok(res.json?.result, `${label}: ${res.text}`);
}

/**
 * Asserts `/mcp` refuses `token`: 401 with `invalid_token` (403 for any other `error`), a Bearer
 * challenge that names the error and the resource metadata, no stack trace. Returns the challenge.
 */
export async function assertRefused(stack: Stack, token: string, label: string, error = 'invalid_token'): Promise<string> {
  const res = await listConnectionsWith(stack, token);
  assert.equal(res.status, error === 'invalid_token' ? 401 : 403, `${label}: ${res.status} ${res.text}`);
  const challenge = res.headers.get('www-authenticate') ?? '';
  assert.match(challenge, /^Bearer /, label);
  assert.match(challenge, new RegExp(`error="${error}"`), `${label}: ${challenge}`);
  assert.ok(
    challenge.includes(`resource_metadata="${stack.publicUrl}/.well-known/oauth-protected-resource/mcp"`),
    `${label}: ${challenge}`,
  );
  assert.doesNotMatch(res.text, /\bat .*\(.*:\d+:\d+\)/, `${label}: no stack trace`);
  return challenge;
}
