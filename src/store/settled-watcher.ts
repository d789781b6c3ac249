import { backgroundFailure } from '../observability/process-guards.js';
import type { SettledFeed } from './types.js';

/**
 * Polls look for settlements from a little before the previous poll: a row's `updated_at` is taken
 * when its statement runs, and its transaction may commit (or another machine's clock run) later.
 */
const LOOKBACK_MS = 2_000;
const BESIDE_PUSH_POLL_MS = 2_000;

/** How a wait on a watched row ended: the status it settled in, or why it stopped waiting. */
export type SettledWaitOutcome<S extends string> = S | 'timeout' | 'aborted' | 'gone';

/** The few things a {@link SettledWatcher} needs to know about one kind of row a store settles. */
export interface SettledSource<S extends string, R extends { status: S; expires_at: number }> {
  /** Names its background failures (`<name>_wake`, `<name>_poll`). */
  readonly name: string;
  /** The row by id, as it stands now. */
  byId(id: string): Promise<R | undefined>;
  /** Whether the row still waits to be settled. */
  isOpen(row: R): boolean;
  /** Which of `ids` have settled, with their status. */
  settledAmong(ids: readonly string[]): Promise<Array<{ id: string; status: S }>>;
  /** What settled since `since` (ms), with status. */
  settledSince(since: number): Promise<Array<{ id: string; status: S }>>;
  /** The id of this kind of row a push on the store's feed names, or undefined when it names another kind. */
  idFromFeed(payload: string): string | undefined;
}

/**
 * Wakes work held on a row until it settles, whichever instance settles it. A settlement in this
 * process wakes its waiter at once (`notify`). Across instances, a store that pushes (PostgreSQL
 * LISTEN/NOTIFY, `Store.settledFeed`) delivers it; otherwise — and while the push channel is down —
 * this process asks the store, once per tick and only while someone waits, what settled since its
 * last look (one indexed range query, however many waits are held).
 */
export class SettledWatcher<S extends string, R extends { status: S; expires_at: number }> {
  readonly #waiters = new Map<string, Set<(status: S) => void>>();
  /** Releases each held wait as if its hold had ended (used at shutdown). */
  readonly #releases = new Set<() => void>();
  readonly #unsubscribe: (() => void) | undefined;
  readonly #source: SettledSource<S, R>;
  readonly #pollMs: number;
  #pushLive = false;
  #timer: NodeJS.Timeout | undefined;
  #polling = false;
  #pollFrom = Date.now() - LOOKBACK_MS;
  /** The current polling period; 0 = not polling. */
  #interval = 0;
  #closed = false;

  constructor(feed: SettledFeed | undefined, source: SettledSource<S, R>, pollMs = 100) {
    this.#source = source;
    this.#pollMs = pollMs;
    this.#unsubscribe = feed?.subscribe(
      (payload) => {
        const id = source.idFromFeed(payload);
        if (id !== undefined) this.notify(id).catch(backgroundFailure(`${source.name}_wake`));
      },
      (live) => {
        this.#pushLive = live;
        // Settlements sent while the channel was down were missed: catch up once, then rely on pushes.
        if (live) this.#poll().catch(backgroundFailure(`${source.name}_poll`));
        this.#schedule();
      },
    );
  }

  /** How many waits are held here (tests wait on it). */
  get waiting(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }

  /** Resolves with the row's settled status, or why it stopped waiting (at most until the row expires). */
  async wait(id: string, timeoutMs: number, signal?: AbortSignal): Promise<SettledWaitOutcome<S>> {
    const row = await this.#source.byId(id);
    if (!row) return 'gone';
    if (!this.#source.isOpen(row)) return row.status;
    const left = Math.min(timeoutMs, row.expires_at - Date.now());
    if (this.#closed || left <= 0) return 'timeout';
    if (signal?.aborted) return 'aborted';

    const outcome = new Promise<SettledWaitOutcome<S>>((resolve) => {
      const set = this.#waiters.get(id) ?? new Set();
      this.#waiters.set(id, set);
      const finish = (outcome: SettledWaitOutcome<S>) => {
        clearTimeout(timer);
        this.#releases.delete(onRelease);
        signal?.removeEventListener('abort', onAbort);
        set.delete(onSettled);
        if (set.size === 0) this.#waiters.delete(id);
        this.#schedule();
        resolve(outcome);
      };
      const onSettled = (status: S) => finish(status);
      const onAbort = () => finish('aborted');
      const onRelease = () => finish('timeout');
      const timer = setTimeout(() => finish('timeout'), left);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#releases.add(onRelease);
      set.add(onSettled);
      this.#schedule();
    });
    // It may have settled between our read and the registration: look once more.
    this.notify(id).catch(backgroundFailure(`${this.#source.name}_wake`));
    return outcome;
  }

  /** Wakes this process's waiters on `id` if it has settled. */
  async notify(id: string): Promise<void> {
    if (!this.#waiters.has(id)) return;
    const [settled] = await this.#source.settledAmong([id]).catch(() => []);
    if (settled) this.#wake(settled.id, settled.status);
  }

  #wake(id: string, status: S): void {
    const set = this.#waiters.get(id);
    if (set) for (const wake of [...set]) wake(status);
  }

  /**
   * Polls only while someone waits: every `pollMs` without a live push channel, and rarely beside
   * one (a LISTEN connection can die silently; a held wait must not depend on noticing at once).
   */
  #schedule(): void {
    const interval = this.#closed || this.#waiters.size === 0 ? 0 : this.#pushLive ? BESIDE_PUSH_POLL_MS : this.#pollMs;
    if (interval === this.#interval) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    // From idle: anything settled earlier was seen by each waiter's own first look.
    if (this.#interval === 0) this.#pollFrom = Date.now() - LOOKBACK_MS;
    this.#interval = interval;
    if (interval === 0) return;
    this.#timer = setInterval(() => this.#poll().catch(backgroundFailure(`${this.#source.name}_poll`)), interval);
    this.#timer.unref();
  }

  async #poll(): Promise<void> {
    if (this.#polling || this.#waiters.size === 0) return;
    this.#polling = true;
    const startedAt = Date.now();
    try {
      for (const { id, status } of await this.#source.settledSince(this.#pollFrom)) this.#wake(id, status);
      this.#pollFrom = startedAt - LOOKBACK_MS;
    } catch {
      // An unreachable or closing database: try again on the next tick.
    } finally {
      this.#polling = false;
    }
  }

  /** Stops watching and releases every held wait as if its hold had ended (shutdown). */
  close(): void {
    this.#closed = true;
    this.#unsubscribe?.();
    this.#schedule();
    for (const release of [...this.#releases]) release();
  }
}
