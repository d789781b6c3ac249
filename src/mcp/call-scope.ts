import { AsyncLocalStorage } from 'node:async_hooks';
import { sha256Base64url } from '../crypto/index.js';

/** What the HTTP layer parsed about the JSON-RPC call, made visible to the requestState binding. */
export interface CallScope {
  method: string;
  /** `params.name` of a tools/call, else ''. */
  name: string;
  /** SHA-256 of the canonical JSON of `params.arguments`. */
  argsDigest: string;
}

const storage = new AsyncLocalStorage<CallScope>();

export function runInCallScope<T>(body: unknown, fn: () => T): T {
  return storage.run(callScopeOf(body), fn);
}

export function currentCallScope(): CallScope | undefined {
  return storage.getStore();
}

function callScopeOf(body: unknown): CallScope {
  const msg = (body && typeof body === 'object' && !Array.isArray(body) ? body : {}) as { method?: unknown; params?: { name?: unknown; arguments?: unknown } };
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
