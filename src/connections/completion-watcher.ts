import { SettledWatcher, type PendingConnection, type PendingStatus, type SettledWaitOutcome, type Store } from '../store/index.js';

export type WaitOutcome = SettledWaitOutcome<PendingStatus>;

/** How a wait ended, with the pending connection as it stands then (none when aborted or gone). */
export interface WaitResult {
  outcome: WaitOutcome;
  row: PendingConnection | undefined;
}

/**
 * Wakes tool calls held while their user is in the browser, whichever instance handles the
 * callback: the store's {@link SettledWatcher} over pending connections (one waits while `open` or
 * `authorizing`, until it expires), fed by every push on the store's settled feed. `close` releases
 * each held call as if its hold had ended, so it answers `input_required` with its link and the
 * client repeats (on another instance, if need be).
 */
export class CompletionWatcher extends SettledWatcher<PendingStatus, PendingConnection> {
  constructor(
    private readonly store: Store,
    pollMs = 100,
  ) {
    super(
      store.settledFeed,
      {
        name: 'completion',
        byId: (id) => store.pending.byId(id),
        isOpen: (row) => row.status === 'open' || row.status === 'authorizing',
        settledAmong: (ids) => store.pending.settledAmong(ids),
        settledSince: (since) => store.pending.settledSince(since),
        // Approval decisions share the feed; their prefixed ids match no pending connection's waiter.
        idFromFeed: (payload) => payload,
      },
      pollMs,
    );
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
}
