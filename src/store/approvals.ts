/**
 * The approvals' part of the storage contract (src/approvals/ keeps the rules): calls waiting for
 * people to agree, each bound by a digest to the exact call, and the decisions people made on them.
 * Times are epoch milliseconds, like the rest of the store.
 */

/**
 * `pending` waits for decisions; `approved` may run (once, or within its lifetime when the rule
 * allows reuse); `denied` was refused by an approver; `used` ran; `expired` was superseded by a
 * newer request of the same requester, or ran out of time (rows past `expires_at` read as expired
 * whatever their stored status, and are pruned).
 */
export type ApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired' | 'used';

export interface ApprovalRequestRow {
  /** A random handle: the status page's address. */
  id: string;
  /** The digest of everything the request is bound to (src/approvals/binding.ts). */
  binding: string;
  /** The requester. */
  issuer: string;
  subject: string;
  client_name: string;
  tool: string;
  upstream: string;
  provider: string;
  account: string;
  policy_version: string;
  rule_id: string;
  service_id: string;
  /** The key `sealed_call` is sealed under. */
  key_id: string;
  /** The arguments and the requester's displayed claims, sealed (they may hold personal data). */
  sealed_call: string;
  status: ApprovalStatus;
  /** The deny reason of the approver who denied, or `superseded`. */
  reason: string | null;
  created_at: number;
  /** While pending, until when approvers may decide; once approved, until when the approval may run. */
  expires_at: number;
  updated_at: number;
  decided_at: number | null;
  used_at: number | null;
  use_count: number;
}

export type NewApprovalRequest = Omit<
  ApprovalRequestRow,
  'status' | 'reason' | 'created_at' | 'updated_at' | 'decided_at' | 'used_at' | 'use_count'
>;

export type ApprovalVerdict = 'approve' | 'deny';

export interface ApprovalDecisionRow {
  request_id: string;
  /** The approver. */
  issuer: string;
  subject: string;
  name: string;
  verdict: ApprovalVerdict;
  reason: string | null;
  at: number;
}

export type NewApprovalDecision = Omit<ApprovalDecisionRow, 'request_id' | 'at'>;

export type DecideResult =
  /** Recorded; `request` is the row after it (approved once the quorum is reached, denied on a deny). */
  | { kind: 'recorded'; request: ApprovalRequestRow }
  /** This approver had already decided this request: nothing changed. */
  | { kind: 'already_decided'; request: ApprovalRequestRow }
  /** No such request, or it is no longer pending (decided, used, expired): nothing changed. */
  | { kind: 'closed'; request: ApprovalRequestRow | undefined };

/** Approval requests and their decisions, shared by every instance. */
export interface ApprovalRepository {
  /**
   * The requester's live request (pending, approved or denied, unexpired) with this binding, or
   * else `row`, inserted as pending — atomically, so concurrent calls never open two. Before
   * inserting, the requester's pending rows beyond `maxOpen - 1` (oldest first) are set `expired`
   * with reason `superseded`. Returns the row, whether it was created, and the ids superseded.
   */
  openOrCreate(
    row: NewApprovalRequest,
    maxOpen: number,
    now?: number,
  ): Promise<{ request: ApprovalRequestRow; created: boolean; superseded: string[] }>;
  byId(id: string): Promise<ApprovalRequestRow | undefined>;
  /** The decisions on a request, oldest first. */
  decisions(id: string): Promise<ApprovalDecisionRow[]>;
  /**
   * Records one approver's decision on a pending, unexpired request, once per approver: a deny
   * denies it (with the reason); an approval that brings the distinct approvals to `quorum`
   * approves it, valid for `approvedTtlMs` from `now`. Concurrent decisions are serialized per request.
   */
  decide(id: string, decision: NewApprovalDecision, quorum: number, approvedTtlMs: number, now?: number): Promise<DecideResult>;
  /**
   * Uses an approved, unexpired request: without `reuse` it becomes `used` and of concurrent takers
   * exactly one gets the row; with `reuse` it stays approved and every taker gets it. Counts each use.
   */
  take(id: string, reuse: boolean, now?: number): Promise<ApprovalRequestRow | undefined>;
  /** Pending, unexpired requests of every requester, newest first, at most `limit`. */
  pending(limit: number, now?: number): Promise<ApprovalRequestRow[]>;
  /** The requester's requests of any status, newest first, at most `limit`. */
  mine(owner: { issuer: string; subject: string }, limit: number): Promise<ApprovalRequestRow[]>;
  /** Of `ids`, the ones no longer pending (or past their expiry), with their status. */
  settledAmong(ids: readonly string[], now?: number): Promise<Array<{ id: string; status: ApprovalStatus }>>;
  /** Requests that left `pending` at or after `since` (by `updated_at`): what a polling waiter asks. */
  settledSince(since: number): Promise<Array<{ id: string; status: ApprovalStatus }>>;
  /** Deletes requests (and their decisions) expired, used or denied more than `graceMs` before `now`; how many went. */
  prune(graceMs: number, now?: number): Promise<number>;
}

/**
 * On a store that pushes (`Store.settledFeed`), a request leaving `pending` is announced on the
 * same feed as a settled pending connection, as this prefix and its id: a watcher of pending
 * connections finds no waiter for it, the approvals' watcher (src/approvals/watcher.ts) wakes its own.
 */
export const APPROVAL_FEED_PREFIX = 'approval:';
