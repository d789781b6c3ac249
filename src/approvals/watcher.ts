import { APPROVAL_FEED_PREFIX, type ApprovalStatus, type Store } from '../store/index.js';
import { backgroundFailure } from '../observability/process-guards.js';

/** Polls look for decisions from a little before the previous poll (a row's `updated_at` may commit later). */
const LOOKBACK_MS = 2_000;
const BESIDE_PUSH_POLL_MS = 2_000;

export type ApprovalWaitOutcome = ApprovalStatus | 'timeout' | 'aborted' | 'gone';

/**
 * Wakes checks held on a pending approval request, whichever instance records the decision — the
 * mechanism of src/connections/completion-watcher.ts for connect repeats: a decision in this
 * process wakes its waiter at once; across instances, a store that pushes (PostgreSQL LISTEN/NOTIFY,
 * on the pending-connection feed under `APPROVAL_FEED_PREFIX`) delivers it; otherwise, and while the
 * push channel is down, this process asks the store once per tick, only while someone waits, what
 * left `pending` since its last look (one indexed range query, however many checks are held).
 */
export class ApprovalWatcher {
  readonly #waiters = new Map<string, Set<(status: ApprovalStatus) => void>>();
  readonly #releases = new Set<() => void>();
  readonly #unsubscribe: (() => void) | undefined;
  #pushLive = false;
  #timer: NodeJS.Timeout | undefined;
  #polling = false;
  #pollFrom = Date.now() - LOOKBACK_MS;
  #interval = 0;
  #closed = false;

  constructor(
    private readonly store: Store,
    private readonly pollMs = 100,
  ) {
    this.#unsubscribe = store.settledFeed?.subscribe(
      (payload) => {
        if (payload.startsWith(APPROVAL_FEED_PREFIX))
          this.notify(payload.slice(APPROVAL_FEED_PREFIX.length)).catch(backgroundFailure('approval_wake'));
      },
      (live) => {
        this.#pushLive = live;
        if (live) this.#poll().catch(backgroundFailure('approval_poll'));
        this.#schedule();
      },
    );
  }

  /** How many checks are held here (tests wait on it). */
  get waiting(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }

  /** Resolves once the request leaves `pending` (with its status), or why it stopped waiting. */
  async wait(id: string, timeoutMs: number, signal?: AbortSignal): Promise<ApprovalWaitOutcome> {
    const row = await this.store.approvals.byId(id);
    if (!row) return 'gone';
    if (row.status !== 'pending') return row.status;
    const left = Math.min(timeoutMs, row.expires_at - Date.now());
    if (this.#closed || left <= 0) return 'timeout';
    if (signal?.aborted) return 'aborted';
    const outcome = new Promise<ApprovalWaitOutcome>((resolve) => {
      const set = this.#waiters.get(id) ?? new Set();
      this.#waiters.set(id, set);
      const finish = (outcome: ApprovalWaitOutcome) => {
        clearTimeout(timer);
        this.#releases.delete(onRelease);
        signal?.removeEventListener('abort', onAbort);
        set.delete(onSettled);
        if (set.size === 0) this.#waiters.delete(id);
        this.#schedule();
        resolve(outcome);
      };
      const onSettled = (status: ApprovalStatus) => finish(status);
      const onAbort = () => finish('aborted');
      const onRelease = () => finish('timeout');
      const timer = setTimeout(() => finish('timeout'), left);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#releases.add(onRelease);
      set.add(onSettled);
      this.#schedule();
    });
    // It may have been decided between our read and the registration: look once more.
    this.notify(id).catch(backgroundFailure('approval_wake'));
    return outcome;
  }

  /** Wakes this process's waiters on `id` if it has left `pending`. */
  async notify(id: string): Promise<void> {
    if (!this.#waiters.has(id)) return;
    const [settled] = await this.store.approvals.settledAmong([id]).catch(() => []);
    if (settled) this.#wake(settled.id, settled.status);
  }

  #wake(id: string, status: ApprovalStatus): void {
    const set = this.#waiters.get(id);
    if (set) for (const wake of [...set]) wake(status);
  }

  #schedule(): void {
    const interval = this.#closed || this.#waiters.size === 0 ? 0 : this.#pushLive ? BESIDE_PUSH_POLL_MS : this.pollMs;
    if (interval === this.#interval) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    if (this.#interval === 0) this.#pollFrom = Date.now() - LOOKBACK_MS;
    this.#interval = interval;
    if (interval === 0) return;
    this.#timer = setInterval(() => this.#poll().catch(backgroundFailure('approval_poll')), interval);
    this.#timer.unref();
  }

  async #poll(): Promise<void> {
    if (this.#polling || this.#waiters.size === 0) return;
    this.#polling = true;
    const startedAt = Date.now();
    try {
      for (const { id, status } of await this.store.approvals.settledSince(this.#pollFrom)) this.#wake(id, status);
      this.#pollFrom = startedAt - LOOKBACK_MS;
    } catch {
      // An unreachable or closing database: try again on the next tick.
    } finally {
      this.#polling = false;
    }
  }

  /** Stops watching and releases every held check as if its hold had ended (shutdown). */
  close(): void {
    this.#closed = true;
    this.#unsubscribe?.();
    this.#schedule();
    for (const release of [...this.#releases]) release();
  }
}
