import { StoreUnavailableError } from '../errors.js';

// Node socket errors, and PostgreSQL SQLSTATEs meaning "not now": connection exceptions (08…),
// too many connections, disk full, out of memory, admin/crash shutdown, cannot connect now,
// statement timeout, a read-only server (a demoted primary or a standby after failover), and the
// serialization failures and deadlocks a retry resolves.
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'EAI_AGAIN',
]);
const SQLSTATES = new Set(['53300', '53100', '53200', '57P01', '57P02', '57P03', '57014', '25006', '40001', '40P01']);
// pg-pool and pg raise these as plain Errors without a code.
const MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Connection terminated unexpectedly/i;

/** Whether `err` means the database is away (rather than a bug or a constraint violation). */
export function isUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || SQLSTATES.has(code) || code.startsWith('08'))) return true;
  return MESSAGES.test(err.message);
}

/** `err` as a StoreUnavailableError when the database is away, unchanged otherwise. */
export function classify(err: unknown): unknown {
  return err instanceof StoreUnavailableError || !isUnavailable(err) ? err : new StoreUnavailableError(err);
}

/** The same repository, with every method's "database away" failures turned into StoreUnavailableError. */
export function guarded<T extends object>(repository: T): T {
  return new Proxy(repository, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) =>
        (Reflect.apply(value, target, args) as Promise<unknown>).catch((err: unknown) => {
          throw classify(err);
        });
    },
  });
}
