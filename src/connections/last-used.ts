import type { Owner } from '../store/index.js';
import { Lru } from '../lru.js';

/** "Last used" is shown to people to the minute; one write a minute per row is plenty. */
export const LAST_USED_EVERY_MS = 60_000;

/** Whether a row last marked used at `lastUsed` (null: never) is due a new mark. */
export function lastUsedIsDue(lastUsed: number | null, now = Date.now()): boolean {
  return lastUsed === null || now - lastUsed > LAST_USED_EVERY_MS;
}

/**
 * Which (principal, provider, service) usage rows this process marked in the last minute, so that a
 * service exchanging a token per request writes its row once a minute instead of on every exchange.
 * Bounded: past `max` keys the oldest are forgotten, and a forgotten key only costs one more write.
 */
export class UsageMarks {
  readonly #marked: Lru<string, true>;

  constructor(max = 10_000) {
    this.#marked = new Lru(max, LAST_USED_EVERY_MS);
  }

  /** True when the row is due a write now (and remembers it as written). */
  due(owner: Owner, provider: string, serviceId: string, now = Date.now()): boolean {
    const key = `${owner.issuer}\n${owner.subject}\n${provider}\n${serviceId}`;
    if (this.#marked.get(key, now)) return false;
    this.#marked.set(key, true, now);
    return true;
  }

  /** Forgets a mark whose write failed, so the next exchange tries again. */
  forget(owner: Owner, provider: string, serviceId: string): void {
    this.#marked.delete(`${owner.issuer}\n${owner.subject}\n${provider}\n${serviceId}`);
  }
}
