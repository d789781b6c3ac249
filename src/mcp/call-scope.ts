import type { AuthInfo } from '@modelcontextprotocol/server';
import { sha256Base64url } from '../crypto/index.js';

/** What the HTTP layer parsed about the JSON-RPC call, made visible to the requestState binding. */
export interface CallScope {
  method: string;
  /** `params.name` of a tools/call, else ''. */
  name: string;
  /** SHA-256 of the canonical JSON of `params.arguments`. */
  argsDigest: string;
}

const KEY = 'callScope';

/**
 * The verified `authInfo` with the call's scope attached, to hand to the SDK: it passes `authInfo`
 * through unchanged to the server factory (`rc.authInfo`) and to every handler
 * (`ctx.http.authInfo`). This used to travel in an AsyncLocalStorage, whose promise hooks cost
 * every request ~60 µs of CPU, about a tenth of a bare MCP server's (see bench/README.md).
 */
export function withCallScope(authInfo: AuthInfo, body: unknown): AuthInfo {
  return { ...authInfo, extra: { ...authInfo.extra, [KEY]: scopeOfBody(body) } };
}

/** The scope the HTTP layer attached with `withCallScope`, if any. */
export function callScopeOf(authInfo: AuthInfo | undefined): CallScope | undefined {
  const scope = authInfo?.extra?.[KEY] as CallScope | undefined;
  return scope && typeof scope.method === 'string' && typeof scope.name === 'string' && typeof scope.argsDigest === 'string'
    ? scope
    : undefined;
}

function scopeOfBody(body: unknown): CallScope {
  const msg = (body && typeof body === 'object' && !Array.isArray(body) ? body : {}) as {
    method?: unknown;
    params?: { name?: unknown; arguments?: unknown };
  };
  const params = msg.params && typeof msg.params === 'object' ? msg.params : {};
  return {
    method: typeof msg.method === 'string' ? msg.method : '',
    name: typeof params.name === 'string' ? params.name : '',
    argsDigest: sha256Base64url(canonicalJson(params.arguments ?? {})),
  };
}

/** JSON with object keys sorted at every level, so equal arguments digest equally. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
