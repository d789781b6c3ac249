import type { CounterStore } from './rate-limits.js';

/** How often the hits counted here are added to the shared counters. */
export const FLUSH_MS = 250;
/** A count heard longer ago than this is asked for again (with the hits counted here since) before a hit is answered. */
export const HEARD_WITHIN_MS = 1_000;
/** Keys counted here at most; past it a new key's hits go to the shared counters one by one. */
export const MAX_LOCAL_KEYS = 10_000;

/** One key's window as this instance knows it. */
interface Local {
  windowMs: number;
  /** When the window closes, as the shared counters said. */
  resetAt: number;
  /** The shared count when it last answered (every instance's hits up to then). */
  shared: number;
  /** Hits sent to the shared counters and not yet answered. */
  sending: number;
  /** Hits counted here since. */
  unsent: number;
  /** When the shared counters last answered for it. */
  heardAt: number;
}

/**
 * Counters for limits on load (the per-user /mcp limit, the per-service exchange limit) that cost
 * no write per request: a key's first hit of a window goes to the shared counters (`store`) and
 * waits for its count; later hits are counted here, answered at once with the shared count plus
 * this instance's hits since, and added to the shared counters every {@link FLUSH_MS} in one
 * statement per key. A count heard more than {@link HEARD_WITHIN_MS} ago is asked for again
 * first. On one instance the count is exact. Across instances a key can pass its limit by at most
 * what the other instances admitted for it in the last 1.25 s (this instance's count may be 1 s
 * old, theirs a flush period unsent): SECURITY.md 84. Limits that bound guessing do not use this.
 */
export class ReconciledCounters implements CounterStore {
  readonly #local = new Map<string, Local>();
  /** Keys whose count is being asked for: their other hits wait for it. */
  readonly #asking = new Map<string, Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  #failing = false;
  #closed = false;

  readonly rateLimits: CounterStore['rateLimits'] = {
    hit: (keyHash, windowMs) => this.#hit(keyHash, windowMs),
    // Unused by the load limits (they take no hit back). The shared count drops; this instance goes on
    // from the higher count it heard until the window closes, which errs towards refusing.
    undo: (keyHash) => this.store.rateLimits.undo(keyHash),
    reset: async (keyHash) => {
      for (const id of this.#local.keys()) if (id.endsWith(`:${keyHash}`)) this.#local.delete(id);
      await this.store.rateLimits.reset(keyHash);
    },
  };

  constructor(
    private readonly store: CounterStore,
    /** The first flush to fail after one that did not (its hits are kept and sent with the next). */
    private readonly onFlushError: (err: unknown) => void,
    private readonly flushMs = FLUSH_MS,
  ) {}

  /** Keys counted here (tests). */
  get size(): number {
    return this.#local.size;
  }

  async #hit(keyHash: string, windowMs: number): Promise<{ hits: number; resetAt: number }> {
    const id = `${windowMs}:${keyHash}`;
    // While the key's count is asked for, its other hits wait for the answer, then count here:
    // answered from the store and from here at once, a key could pass its limit on one instance.
    for (let asking = this.#asking.get(id); asking; asking = this.#asking.get(id)) await asking;
    const now = Date.now();
    const local = this.#local.get(id);
    if (local && !this.#closed && now < local.resetAt && now - local.heardAt <= HEARD_WITHIN_MS) {
      local.unsent++;
      this.#schedule();
      return { hits: local.shared + local.sending + local.unsent, resetAt: local.resetAt };
    }
    // Past the bound on keys (or closing), a new key is counted at the store alone, exactly.
    if (!local && (this.#closed || this.#local.size >= MAX_LOCAL_KEYS)) return this.store.rateLimits.hit(keyHash, windowMs, now);
    // The window's first hit here, or a count heard too long ago: the shared count, waited for,
    // with this process's unsent hits of the window in the same statement (this hit is the last).
    const windowAt = local?.resetAt;
    const carried = local && now < local.resetAt ? local.unsent : 0;
    if (local) {
      local.unsent -= carried;
      local.sending += carried;
    }
    const asked = this.store.rateLimits.hit(keyHash, windowMs, now, carried + 1);
    const answered = asked.then(
      () => undefined,
      () => undefined,
    );
    this.#asking.set(id, answered);
    try {
      const counted = await asked;
      if (local) local.sending -= carried;
      this.#learn(id, windowMs, counted);
      return counted;
    } catch (err) {
      if (local) {
        local.sending -= carried;
        if (local.resetAt === windowAt) local.unsent += carried;
      }
      throw err;
    } finally {
      if (this.#asking.get(id) === answered) this.#asking.delete(id);
    }
  }

  /** Takes the shared counters' answer as this key's window, unless a later answer is already known. */
  #learn(id: string, windowMs: number, counted: { hits: number; resetAt: number }): void {
    const local = this.#local.get(id);
    const heardAt = Date.now();
    if (local && local.resetAt === counted.resetAt) Object.assign(local, { shared: Math.max(local.shared, counted.hits), heardAt });
    else if (local && local.resetAt > counted.resetAt) return;
    else if (local) Object.assign(local, { resetAt: counted.resetAt, shared: counted.hits, unsent: 0, heardAt });
    else if (this.#local.size < MAX_LOCAL_KEYS && !this.#closed)
      this.#local.set(id, { windowMs, resetAt: counted.resetAt, shared: counted.hits, sending: 0, unsent: 0, heardAt });
  }

  #schedule(): void {
    if (this.#timer || this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.flush().then(
        () => (this.#failing = false),
        (err: unknown) => {
          // A store that is down fails every flush: one report per outage, not four a second.
          if (!this.#failing) this.onFlushError(err);
          this.#failing = true;
        },
      );
    }, this.flushMs);
    // Pending hits alone do not keep a process alive; close() sends them.
    this.#timer.unref();
  }

  /** Adds every hit counted here to the shared counters; forgets the windows that have closed. */
  async flush(): Promise<void> {
    // A flush under way that fails does not stop this one: its hits are back among the unsent.
    while (this.#flushing) await this.#flushing.catch(() => undefined);
    this.#flushing = this.#send().finally(() => (this.#flushing = undefined));
    return this.#flushing;
  }

  async #send(): Promise<void> {
    const now = Date.now();
    const sends: Array<Promise<void>> = [];
    let failure: unknown;
    for (const [id, local] of this.#local) {
      if (now >= local.resetAt) {
        // Hits of a closed window count nowhere any more (as the shared counters would have it).
        if (local.sending === 0) this.#local.delete(id);
        continue;
      }
      if (local.unsent === 0) continue;
      const n = local.unsent;
      const windowAt = local.resetAt;
      local.unsent = 0;
      local.sending += n;
      const keyHash = id.slice(id.indexOf(':') + 1);
      sends.push(
        this.store.rateLimits.hit(keyHash, local.windowMs, now, n).then(
          (counted) => {
            local.sending -= n;
            this.#learn(id, local.windowMs, counted);
          },
          (err: unknown) => {
            local.sending -= n;
            // Hits of a window that has since closed count nowhere.
            if (local.resetAt === windowAt) local.unsent += n;
            failure ??= err;
          },
        ),
      );
    }
    await Promise.all(sends);
    if (failure !== undefined) {
      this.#schedule();
      throw failure;
    }
  }

  /** Sends what is counted here and counts nothing more locally (at shutdown, before the store closes). */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }
}
