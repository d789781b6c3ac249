import type { PendingConnection, PendingStatus, SettledStatus, Store } from '../store/index.js';
import { backgroundFailure } from '../observability/process-guards.js';

export type WaitOutcome = PendingStatus | 'timeout' | 'aborted' | 'gone';

/** How a wait ended, with the pending connection as it stands then (none when aborted or gone). */
export interface WaitResult {
  outcome: WaitOutcome;
  row: PendingConnection | undefined;
}

/**
 * Polls look for settlements from a little before the previous poll: a row's `updated_at` is taken
 * when its statement runs, and its transaction may commit (or another machine's clock run) later.
 */
const LOOKBACK_MS = 2_000;
const BESIDE_PUSH_POLL_MS = 2_000;

/**
 * Wakes tool calls held while their user is in the browser, whichever instance handles the
 * callback. A callback in this process wakes its waiter at once. Across instances, a store that
 * pushes (PostgreSQL LISTEN/NOTIFY) delivers the settlement; otherwise — and while the push
 * channel is down — this process asks the store, once per tick and only while someone waits, what
 * settled since its last look (one indexed range query, however many calls are held).
 */
export class CompletionWatcher {
  readonly #waiters = new Map<string, Set<(status: PendingStatus) => void>>();
  /** Releases each held wait as if its hold had ended (used at shutdown). */
  readonly #releases = new Set<() => void>();
  readonly #unsubscribe: (() => void) | undefined;
  #pushLive = false;
  #timer: NodeJS.Timeout | undefined;
  #polling = false;
  #pollFrom = Date.now() - LOOKBACK_MS;
  /** The current polling period; 0 = not polling. */
  #interval = 0;
  #closed = false;

  constructor(
    private readonly store: Store,
    private readonly pollMs = 100,
  ) {
    this.#unsubscribe = store.settledFeed?.subscribe(
      (pendingId) => this.notify(pendingId).catch(backgroundFailure('completion_wake')),
      (live) => {
        this.#pushLive = live;
        // Settlements sent while the channel was down were missed: catch up once, then rely on pushes.
        if (live) this.#poll().catch(backgroundFailure('completion_poll'));
        this.#schedule();
      },
    );
  }

  get waiting(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }

  /** Resolves with the pending connection's settled status, or why it stopped waiting. */
  async wait(pendingId: string, timeoutMs: number, signal?: AbortSignal): Promise<WaitOutcome> {
    const row = await this.store.pending.byId(pendingId);
    if (!row) return 'gone';
    if (row.status !== 'open' && row.status !== 'authorizing') return row.status;
    if (this.#closed || timeoutMs <= 0 || row.expires_at <= Date.now()) return 'timeout';
    if (signal?.aborted) return 'aborted';

    const outcome = new Promise<WaitOutcome>((resolve) => {
      const set = this.#waiters.get(pendingId) ?? new Set();
      this.#waiters.set(pendingId, set);
      const finish = (outcome: WaitOutcome) => {
        clearTimeout(timer);
        this.#releases.delete(onRelease);
        signal?.removeEventListener('abort', onAbort);
        set.delete(onSettled);
        if (set.size === 0) this.#waiters.delete(pendingId);
        this.#schedule();
        resolve(outcome);
      };
      const onSettled = (status: PendingStatus) => finish(status);
      const onAbort = () => finish('aborted');
      const onRelease = () => finish('timeout');
      const timer = setTimeout(() => finish('timeout'), Math.min(timeoutMs, row.expires_at - Date.now()));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#releases.add(onRelease);
      set.add(onSettled);
      this.#schedule();
    });
    // It may have settled between our read and the registration: look once more.
    this.notify(pendingId).catch(backgroundFailure('completion_wake'));
    return outcome;
  }

  /**
   * {@link wait}, then the row as it stands when the wait ends (one read), so a caller sees the
   * settled status, its reason, or that a timed-out flow completed without the wake-up reaching us.
   */
  async waitForRow(pendingId: string, timeoutMs: number, signal?: AbortSignal): Promise<WaitResult> {
    const outcome = await this.wait(pendingId, timeoutMs, signal);
    if (outcome === 'aborted' || outcome === 'gone') return { outcome, row: undefined };
    return { outcome, row: await this.store.pending.byId(pendingId) };
  }

  /** Wakes this process's waiters on `pendingId` if it has settled. */
  async notify(pendingId: string): Promise<void> {
    if (!this.#waiters.has(pendingId)) return;
    const [settled] = await this.store.pending.settledAmong([pendingId]).catch(() => []);
    if (settled) this.#wake(settled.id, settled.status);
  }

  #wake(pendingId: string, status: SettledStatus): void {
    const set = this.#waiters.get(pendingId);
    if (set) for (const wake of [...set]) wake(status);
  }

  /**
   * Polls only while someone waits: every `pollMs` without a live push channel, and rarely beside
   * one (a LISTEN connection can die silently; a held call must not depend on noticing at once).
   */
  #schedule(): void {
    const interval = this.#closed || this.#waiters.size === 0 ? 0 : this.#pushLive ? BESIDE_PUSH_POLL_MS : this.pollMs;
    if (interval === this.#interval) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    // From idle: anything settled earlier was seen by each waiter's own first look.
    if (this.#interval === 0) this.#pollFrom = Date.now() - LOOKBACK_MS;
    this.#interval = interval;
    if (interval === 0) return;
    this.#timer = setInterval(() => this.#poll().catch(backgroundFailure('completion_poll')), interval);
    this.#timer.unref();
  }

  async #poll(): Promise<void> {
    if (this.#polling || this.#waiters.size === 0) return;
    this.#polling = true;
    const startedAt = Date.now();
    try {
      for (const { id, status } of await this.store.pending.settledSince(this.#pollFrom)) this.#wake(id, status);
      this.#pollFrom = startedAt - LOOKBACK_MS;
    } catch {
      // An unreachable or closing database: try again on the next tick.
    } finally {
      this.#polling = false;
    }
  }

  /**
   * Stops watching and releases every held call as if its hold had ended, so each answers
   * `input_required` with its link and the client repeats (on another instance, if need be).
   */
  close(): void {
    this.#closed = true;
    this.#unsubscribe?.();
    this.#schedule();
    for (const release of [...this.#releases]) release();
  }
}
