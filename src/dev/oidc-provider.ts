// oidc-provider, loaded without the two notes it prints for the way the development IdP uses it on
// purpose: "Unsupported runtime" when it loads on Node 20 (this package supports Node >= 20.10,
// and every suite runs oidc-provider there), and the in-memory adapter's "development-only"
// warning at each start (the development IdP is development-only, and says so itself). Every other
// line it prints still goes out.
import type * as OidcProviderModule from 'oidc-provider';
import type { AdapterFactory, default as OidcProvider } from 'oidc-provider';

const RUNTIME_NOTE = 'oidc-provider WARNING: Unsupported runtime.';

const warn = console.warn;
console.warn = (...args: unknown[]) => {
  if (typeof args[0] === 'string' && args[0].startsWith(RUNTIME_NOTE)) return;
  warn(...args);
};
let loaded: typeof OidcProviderModule;
try {
  loaded = await import('oidc-provider');
} finally {
  console.warn = warn;
}
// oidc-provider's own in-memory storage (a store per provider, as it makes when given no adapter),
// passed explicitly: only the implicit default is warned about.
const memoryAdapter = (await import('oidc-provider/lib/adapters/memory_adapter.js' as string)) as {
  createMemoryAdapter(clockTolerance: number): AdapterFactory;
};

export const Provider = loaded.default;
export type Provider = OidcProvider;
export const errors = loaded.errors;

/** A fresh in-memory store for one provider; `clockTolerance` as the provider's configuration has it (default 15 s). */
export const inMemoryAdapter = (clockTolerance = 15): AdapterFactory => memoryAdapter.createMemoryAdapter(clockTolerance);
