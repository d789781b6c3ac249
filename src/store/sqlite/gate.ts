/**
 * Keeps statements out of an open transaction. better-sqlite3 runs everything on one connection,
 * so while an async transaction awaits, any other statement would silently join it (and be undone
 * by its rollback). Statements outside the transaction wait for it; inside it, they run at once.
 */
import { StoreUnavailableError } from '../errors.js';

export interface Runner {
  run<T>(fn: () => T): Promise<T>;
}

// Still locked after busy_timeout (another process holds the write lock), or the disk failing.
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN)/;

/** Runs `fn`, turning "the database cannot serve this now" into StoreUnavailableError. */
export function classified<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const code = (err as { code?: unknown })?.code;
    throw typeof code === 'string' && UNAVAILABLE.test(code) ? new StoreUnavailableError(err) : err;
  }
}

export class TransactionGate implements Runner {
  #open: Promise<void> | undefined;

  /** Runs `fn` when no transaction is open; the check and `fn` share one synchronous turn. */
  async run<T>(fn: () => T): Promise<T> {
    while (this.#open) await this.#open;
    return classified(fn);
  }

  /** Holds every other statement (and transaction) until `fn` settles. */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    while (this.#open) await this.#open;
    let release!: () => void;
    this.#open = new Promise((resolve) => (release = resolve));
    try {
      return await fn();
    } finally {
      this.#open = undefined;
      release();
    }
  }
}

/** What repositories bound to an open transaction use: no waiting, the gate is theirs. */
export const insideTransaction: Runner = {
  async run<T>(fn: () => T): Promise<T> {
    return classified(fn);
  },
};
