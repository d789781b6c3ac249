import type { PendingStatus, Store } from '../store/index.js';

export type WaitOutcome = PendingStatus | 'timeout' | 'aborted' | 'gone';

/**
 * Wakes tool calls held while their user is in the browser. Every process tails the
 * `pending_events` table (one indexed query per tick, only while someone waits), so a callback
 * handled by any process on the same database releases the held call; a callback in this process
 * wakes it at once.
 */
export class CompletionWatcher {
  readonly #waiters = new Map<string, Set<(status: PendingStatus) => void>>();
  /** Releases each held wait as if its hold had ended (used at shutdown). */
  readonly #releases = new Set<() => void>();
  #lastSeq: number;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(
    private readonly store: Store,
    private readonly pollMs = 100,
  ) {
    this.#lastSeq = store.pending.latestEventSeq();
  }

  get waiting(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }

  /** Resolves with the pending connection's settled status, or why it stopped waiting. */
  wait(pendingId: string, timeoutMs: number, signal?: AbortSignal): Promise<WaitOutcome> {
    const row = this.store.pending.byId(pendingId);
    if (!row) return Promise.resolve('gone');
    if (row.status !== 'open' && row.status !== 'authorizing') return Promise.resolve(row.status);
    if (this.#closed || timeoutMs <= 0 || row.expires_at <= Date.now()) return Promise.resolve('timeout');
    if (signal?.aborted) return Promise.resolve('aborted');

    return new Promise<WaitOutcome>((resolve) => {
      const set = this.#waiters.get(pendingId) ?? new Set();
      this.#waiters.set(pendingId, set);
      const finish = (outcome: WaitOutcome) => {
        clearTimeout(timer);
        this.#releases.delete(onRelease);
        signal?.removeEventListener('abort', onAbort);
        set.delete(onSettled);
        if (set.size === 0) this.#waiters.delete(pendingId);
        if (this.#waiters.size === 0) this.#stop();
        resolve(outcome);
      };
      const onSettled = (status: PendingStatus) => finish(status);
      const onAbort = () => finish('aborted');
      const onRelease = () => finish('timeout');
      const timer = setTimeout(() => finish('timeout'), Math.min(timeoutMs, row.expires_at - Date.now()));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#releases.add(onRelease);
      set.add(onSettled);
      this.#start();
    });
  }

  /** Called by this process right after it settles a pending connection. */
  notify(pendingId: string): void {
    const set = this.#waiters.get(pendingId);
    if (!set) return;
    const row = this.store.pending.byId(pendingId);
    if (row && row.status !== 'open' && row.status !== 'authorizing') for (const wake of [...set]) wake(row.status);
  }

  #start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => this.#poll(), this.pollMs);
    this.#timer.unref();
  }

  #stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #poll(): void {
    let events: Array<{ seq: number; pending_id: string }>;
    try {
      events = this.store.pending.eventsAfter(this.#lastSeq);
    } catch {
      return; // a busy or closing database: try again on the next tick
    }
    for (const event of events) {
      this.#lastSeq = event.seq;
      this.notify(event.pending_id);
    }
  }

  /**
   * Stops polling and releases every held call as if its hold had ended, so each answers
   * `input_required` with its link and the client repeats (on another instance, if need be).
   */
  close(): void {
    this.#closed = true;
    this.#stop();
    for (const release of [...this.#releases]) release();
  }
}
