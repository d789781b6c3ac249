import { withSpan } from '../observability/tracing.js';
import type { Repositories, Store } from './types.js';

// Every repository, as a record so that one added to `Repositories` and not here fails to compile
// (a list only caught wrong names: a traced transaction once had no `webhooks`).
const TRACED: Record<keyof Repositories, true> = {
  sessions: true,
  loginTransactions: true,
  pending: true,
  oauthFlows: true,
  connections: true,
  leases: true,
  audit: true,
  rateLimits: true,
  clientAssertions: true,
  serviceUsage: true,
  admin: true,
  upstreamClients: true,
  upstreamTools: true,
  webhooks: true,
  approvals: true,
};
const REPOSITORIES = Object.keys(TRACED) as Array<keyof Repositories>;

/**
 * A repository whose every method runs in a span `store <repo>.<method>`: the operation's name and
 * the database kind, never its arguments or results (they hold hashes, principals and sealed tokens).
 * Only inside a traced request: background calls (pruning, a watcher's polling) open no trace.
 */
function traceRepository<R extends object>(repo: R, name: string, system: string): R {
  const wrapped = new Map<string, unknown>();
  return new Proxy(repo, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function' || typeof prop !== 'string') return value;
      let fn = wrapped.get(prop);
      if (!fn) {
        const method = value as (...args: unknown[]) => unknown;
        const operation = `${name}.${prop}`;
        fn = (...args: unknown[]) =>
          withSpan(
            `store ${operation}`,
            { 'db.system.name': system, 'db.operation.name': operation },
            async () => method.apply(target, args),
            { onlyAsChild: true },
          );
        wrapped.set(prop, fn);
      }
      return fn;
    },
  });
}

function traceRepositories<T extends Repositories>(repos: T, system: string): Repositories {
  return Object.fromEntries(REPOSITORIES.map((name) => [name, traceRepository(repos[name], name, system)])) as unknown as Repositories;
}

/**
 * The store with a span around each repository call and each transaction (whose calls are its
 * children). Everything else — `kind`, `ping`, `close`, `settledFeed`, the SQLite handle — passes
 * through. Applied only while tracing is on (see `openStore`), so without tracing no call pays for it.
 */
export function traceStore<S extends Store>(store: S): S {
  const system = store.kind === 'postgres' ? 'postgresql' : 'sqlite';
  const repos = traceRepositories(store, system);
  const transaction: Store['transaction'] = (fn) =>
    withSpan('store transaction', { 'db.system.name': system }, () => store.transaction((tx) => fn(traceRepositories(tx, system))), {
      onlyAsChild: true,
    });
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'transaction') return transaction;
      if (typeof prop === 'string' && prop in repos) return repos[prop as keyof Repositories];
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
