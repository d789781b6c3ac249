import type { CounterStore } from './rate-limits.js';

/** How often the hits counted here are added to the shared counters. */
export const FLUSH_MS = 250;
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
}

/**
 * Counters for limits on load (the per-user /mcp limit, the per-service exchange limit) that cost
 * no write per request: a key's first hit of a window goes to the shared counters (`store`) and
 * waits for its count; later hits are counted here, answered at once with the shared count plus
 * this instance's hits since, and added to the shared counters every {@link FLUSH_MS} in one
 * statement per key. On one instance the count is exact. Across instances a key may pass its limit
 * by what each instance passes for it in one flush period: an instance goes by the count it last
 * heard until its next flush, and once it hears a count past the limit it refuses for the rest of
 * the window (SECURITY.md 84). Limits that bound guessing do not use this.
 */
export class ReconciledCounters implements CounterStore {
  readonly #local = new Map<string, Local>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  #failing = false;
  #closed = false;

  readonly rateLimits: CounterStore['rateLimits'] = {
    hit: (keyHash, windowMs) => this.#hit(keyHash, windowMs),
    // Rare for load limits (they count every request): the shared count, learnt here at the next flush.
    undo: (keyHash) => this.store.rateLimits.undo(keyHash),
    reset: async (keyHash) => {
      for (const windowMs of this.#windowsOf(keyHash)) this.#local.delete(`${windowMs}:${keyHash}`);
      await this.store.rateLimits.reset(keyHash);
    },
  };

  constructor(
    private readonly store: CounterStore,
    /** The first flush to fail after one that did not (its hits are kept and sent with the next). */
    private readonly onFlushError: (err: unknown) => void,
    private readonly flushMs = FLUSH_MS,
  ) {}

  /** Keys counted here (tests, metrics). */
  get size(): number {
    return this.#local.size;
  }

  async #hit(keyHash: string, windowMs: number): Promise<{ hits: number; resetAt: number }> {
    const id = `${windowMs}:${keyHash}`;
    const now = Date.now();
    const local = this.#local.get(id);
    if (local && now < local.resetAt && !this.#closed) {
      local.unsent++;
      this.#schedule();
      return { hits: local.shared + local.sending + local.unsent, resetAt: local.resetAt };
    }
    // The window's first hit here (or past the bound on keys): the shared count, waited for.
    const counted = await this.store.rateLimits.hit(keyHash, windowMs, now);
    this.#learn(id, windowMs, counted);
    return counted;
  }

  /** Takes the shared counters' answer as this key's window, unless a later answer is already known. */
  #learn(id: string, windowMs: number, counted: { hits: number; resetAt: number }): void {
    const local = this.#local.get(id);
    if (local && local.resetAt === counted.resetAt) local.shared = Math.max(local.shared, counted.hits);
    else if (local && local.resetAt > counted.resetAt) return;
    else if (local) Object.assign(local, { resetAt: counted.resetAt, shared: counted.hits, unsent: 0 });
    else if (this.#local.size < MAX_LOCAL_KEYS && !this.#closed)
      this.#local.set(id, { windowMs, resetAt: counted.resetAt, shared: counted.hits, sending: 0, unsent: 0 });
  }

  #windowsOf(keyHash: string): number[] {
    const windows: number[] = [];
    for (const [id, local] of this.#local) if (id.endsWith(`:${keyHash}`)) windows.push(local.windowMs);
    return windows;
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
    while (this.#flushing) await this.#flushing;
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
            local.unsent += n;
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
