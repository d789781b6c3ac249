import {
  APPROVAL_FEED_PREFIX,
  SettledWatcher,
  type ApprovalRequestRow,
  type ApprovalStatus,
  type SettledWaitOutcome,
  type Store,
} from '../store/index.js';

export type ApprovalWaitOutcome = SettledWaitOutcome<ApprovalStatus>;

/**
 * Wakes checks held on a pending approval request, whichever instance records the decision: the
 * store's {@link SettledWatcher} over approval requests (a request waits while `pending`, until it
 * expires), fed by the pushes under `APPROVAL_FEED_PREFIX` on the store's settled feed.
 */
export class ApprovalWatcher extends SettledWatcher<ApprovalStatus, ApprovalRequestRow> {
  constructor(store: Store, pollMs = 100) {
    super(
      store.settledFeed,
      {
        name: 'approval',
        byId: (id) => store.approvals.byId(id),
        isOpen: (row) => row.status === 'pending',
        settledAmong: (ids) => store.approvals.settledAmong(ids),
        settledSince: (since) => store.approvals.settledSince(since),
        idFromFeed: (payload) => (payload.startsWith(APPROVAL_FEED_PREFIX) ? payload.slice(APPROVAL_FEED_PREFIX.length) : undefined),
      },
      pollMs,
    );
  }
}
