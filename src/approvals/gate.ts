import { samePrincipal } from '../auth/principal.js';
import { randomHandle, sha256Hex, type Sealer } from '../crypto/index.js';
import { transactionWithEvents, type ApprovalEventData, type EventSink } from '../events/index.js';
import type { ApprovalGate, ApprovalOutcome, ApprovalRule, ApprovalSubject, PolicyPerson } from '../policy/types.js';
import type { ApprovalDecisionRow, ApprovalRequestRow, ApprovalVerdict, Store } from '../store/index.js';
import { ApprovalWatcher } from './watcher.js';

/** How many pending requests one requester may have open: a newer one supersedes the oldest beyond it. */
export const MAX_OPEN_PER_REQUESTER = 20;
/** How long an expired, used or denied request stays readable on its page before it is pruned. */
export const APPROVAL_PRUNE_GRACE_MS = 60 * 60_000;
/** The longest deny reason kept (longer ones are cut, and the page says so). */
export const MAX_REASON_LENGTH = 500;

export interface ApprovalGatesOptions {
  store: Store;
  events: EventSink;
  /** Epoch milliseconds now (tests move it to expire requests). */
  clock?: () => number;
  publicUrl: URL;
  /** The `approve` rule of the policy as compiled now, by id; undefined when it is gone. */
  approvalRule: (ruleId: string) => ApprovalRule | undefined;
  /** The compiled policy's digest: a request made under another version no longer applies. */
  policyVersion: string;
  /** Seals the call's arguments and the requester's displayed claims at rest. */
  sealer: Sealer;
  maxOpenPerRequester?: number;
}

/** What the approval page shows of a call: opened from `sealed_call`. */
export interface SealedCall {
  args: unknown;
  /** The requester's name, username and email as their verified token said (strings only). */
  requester: { name?: string; username?: string; email?: string };
}

/** A person deciding on the page: their verified identity and ID-token claims, and their display name. */
export type Approver = PolicyPerson & { name: string };

export type DecideOutcome =
  | { kind: 'recorded'; request: ApprovalRequestRow }
  | { kind: 'already_decided' | 'closed'; request: ApprovalRequestRow | undefined }
  /** Not a request this person may decide (or none at all): the page answers as for a missing id. */
  | { kind: 'not_found' }
  /** The rule is gone or the policy changed since the request was made. */
  | { kind: 'stale'; request: ApprovalRequestRow };

/** A request as its page shows it to one viewer. */
export interface ApprovalView {
  request: ApprovalRequestRow;
  call: SealedCall | undefined;
  decisions: ApprovalDecisionRow[];
  isRequester: boolean;
  /** The rule still exists and the policy is the one the request was made under. */
  applies: boolean;
  /** The viewer may decide now (eligible, pending, unexpired, not decided by them yet). */
  canDecide: boolean;
  /** The status, with `expired` for a pending or approved row past its expiry. */
  status: ApprovalRequestRow['status'];
  quorum: number | undefined;
}

/** The binding a request is found by: every field that must not change between the question and the run. */
export function bindingDigest(subject: ApprovalSubject, ruleId: string): string {
  return sha256Hex(
    JSON.stringify([
      'approval/v1',
      subject.requester.issuer,
      subject.requester.subject,
      subject.tool,
      subject.upstream,
      subject.argsDigest,
      subject.provider,
      subject.account,
      subject.policyVersion,
      ruleId,
      subject.serviceId,
    ]),
  );
}

function sealContext(row: Pick<ApprovalRequestRow, 'id' | 'issuer' | 'subject'>) {
  return { issuer: row.issuer, subject: row.subject, provider: `approval:${row.id}` };
}

function displayClaims(claims: Record<string, unknown>): SealedCall['requester'] {
  const text = (v: unknown) => (typeof v === 'string' && v.length > 0 ? v.slice(0, 200) : undefined);
  const name = text(claims.name);
  const username = text(claims.preferred_username);
  const email = text(claims.email);
  return { ...(name ? { name } : {}), ...(username ? { username } : {}), ...(email ? { email } : {}) };
}

/** Whether `person` may decide on `request` under `rule`: the requester only with selfApproval, anyone else by `approvers`. */
export function mayDecide(rule: ApprovalRule, request: Pick<ApprovalRequestRow, 'issuer' | 'subject'>, person: PolicyPerson): boolean {
  if (samePrincipal({ issuer: person.iss, subject: person.sub }, request)) return rule.selfApproval;
  try {
    return rule.mayApprove(person) === true;
  } catch {
    // A condition that fails on this person's claims admits nobody.
    return false;
  }
}

/**
 * The approval gate (src/policy/types.ts): one request per bound call, held checks woken across
 * instances, approvals used exactly once (or within their lifetime when the rule allows reuse), and
 * the decisions the pages record.
 */
export class ApprovalGates implements ApprovalGate {
  readonly watcher: ApprovalWatcher;
  readonly #o: ApprovalGatesOptions;
  readonly #now: () => number;

  constructor(options: ApprovalGatesOptions) {
    this.#o = options;
    this.#now = options.clock ?? Date.now;
    this.watcher = new ApprovalWatcher(options.store);
  }

  get policyVersion(): string {
    return this.#o.policyVersion;
  }

  statusUrl(id: string): string {
    return new URL(`/approvals/${encodeURIComponent(id)}`, this.#o.publicUrl).href;
  }

  async check(subject: ApprovalSubject, rule: ApprovalRule, holdMs: number, signal?: AbortSignal): Promise<ApprovalOutcome> {
    let request = await this.#openOrFind(subject, rule);
    if (request.status === 'pending') {
      await this.watcher.wait(request.id, holdMs, signal);
      request = (await this.#o.store.approvals.byId(request.id)) ?? request;
    }
    const outcome = await this.#settle(request, rule);
    if (outcome !== 'used_elsewhere') return outcome;
    // Of two runs of one call, the other used the approval first: this one needs its own (asked, not held).
    const fresh = await this.#openOrFind(subject, rule);
    const again = await this.#settle(fresh, rule);
    return again === 'used_elsewhere' ? this.#pending(fresh) : again;
  }

  #pending(request: ApprovalRequestRow): ApprovalOutcome {
    return { kind: 'pending', requestId: request.id, statusUrl: this.statusUrl(request.id), expiresAt: request.expires_at };
  }

  async #openOrFind(subject: ApprovalSubject, rule: ApprovalRule): Promise<ApprovalRequestRow> {
    const { store, events, sealer } = this.#o;
    const now = this.#now();
    const id = `apr_${randomHandle(18)}`;
    const requester = { issuer: subject.requester.issuer, subject: subject.requester.subject };
    const call: SealedCall = { args: subject.args ?? {}, requester: displayClaims(subject.requesterClaims) };
    const sealed = sealer.seal(JSON.stringify(call), sealContext({ id, ...requester }));
    const opened = await transactionWithEvents(store, events, async (tx, emit) => {
      const r = await tx.approvals.openOrCreate(
        {
          id,
          binding: bindingDigest(subject, rule.ruleId),
          ...requester,
          client_name: subject.clientName.slice(0, 200),
          tool: subject.tool,
          upstream: subject.upstream,
          provider: subject.provider,
          account: subject.account,
          policy_version: subject.policyVersion,
          rule_id: rule.ruleId,
          service_id: subject.serviceId,
          key_id: sealed.keyId,
          sealed_call: sealed.value,
          expires_at: now + rule.ttlSeconds * 1000,
        },
        this.#o.maxOpenPerRequester ?? MAX_OPEN_PER_REQUESTER,
        now,
      );
      if (r.created) {
        await tx.audit.record(
          'approval_requested',
          requester,
          subject.provider || undefined,
          `request=${id} rule=${rule.ruleId} tool=${subject.tool}`,
        );
        await emit('approval.requested', this.#eventData(r.request));
      }
      return r;
    });
    for (const gone of opened.superseded) this.watcher.notify(gone).catch(() => undefined);
    return opened.request;
  }

  /** What a request that is no longer held on means for the call; consumes an approval. */
  async #settle(request: ApprovalRequestRow, rule: ApprovalRule): Promise<ApprovalOutcome | 'used_elsewhere'> {
    const now = this.#now();
    if (request.status === 'denied')
      return { kind: 'denied', requestId: request.id, reason: request.reason || 'An approver denied this call.' };
    if (request.status === 'approved' && request.expires_at > now) {
      const taken = await this.#o.store.transaction(async (tx) => {
        const row = await tx.approvals.take(request.id, rule.reuse, now);
        if (row)
          await tx.audit.record(
            'approval_used',
            { issuer: row.issuer, subject: row.subject },
            row.provider || undefined,
            `request=${row.id} rule=${row.rule_id} tool=${row.tool} use=${row.use_count}`,
          );
        return row;
      });
      if (taken) return { kind: 'approved', requestId: request.id };
      return 'used_elsewhere';
    }
    return this.#pending(request);
  }

  #eventData(row: ApprovalRequestRow): ApprovalEventData {
    return {
      id: row.id,
      url: this.statusUrl(row.id),
      rule: row.rule_id,
      tool: row.tool,
      upstream: row.upstream,
      provider: row.provider,
      requester: { issuer: row.issuer, subject: row.subject },
      client: row.client_name,
      expiresAt: new Date(row.expires_at).toISOString(),
    };
  }

  /** The rule a request was made under, when it still applies (same policy version, rule still there). */
  ruleOf(request: ApprovalRequestRow): ApprovalRule | undefined {
    if (request.policy_version !== this.#o.policyVersion) return undefined;
    return this.#o.approvalRule(request.rule_id);
  }

  /** Opens a request's sealed call; undefined when it cannot be opened (its key is gone). */
  openCall(request: ApprovalRequestRow): SealedCall | undefined {
    try {
      return JSON.parse(this.#o.sealer.open({ keyId: request.key_id, value: request.sealed_call }, sealContext(request))) as SealedCall;
    } catch {
      return undefined;
    }
  }

  /**
   * A request as `viewer` may see it: the requester, an approver the rule admits, or someone who
   * decided it; undefined for anyone else (the page answers as for a missing id).
   */
  async view(id: string, viewer: PolicyPerson): Promise<ApprovalView | undefined> {
    const request = await this.#o.store.approvals.byId(id);
    if (!request) return undefined;
    const isRequester = samePrincipal({ issuer: viewer.iss, subject: viewer.sub }, request);
    const rule = this.ruleOf(request);
    const decisions = await this.#o.store.approvals.decisions(id);
    const decided = decisions.some((d) => samePrincipal(d, { issuer: viewer.iss, subject: viewer.sub }));
    const eligible = rule !== undefined && mayDecide(rule, request, viewer);
    if (!isRequester && !eligible && !decided) return undefined;
    const status = this.statusOf(request);
    return {
      request,
      call: this.openCall(request),
      decisions,
      isRequester,
      applies: rule !== undefined,
      canDecide: eligible && status === 'pending' && !decided,
      status,
      quorum: rule?.quorum,
    };
  }

  statusOf(request: ApprovalRequestRow): ApprovalRequestRow['status'] {
    return (request.status === 'pending' || request.status === 'approved') && request.expires_at <= this.#now()
      ? 'expired'
      : request.status;
  }

  /** The pending requests `viewer` may decide (newest first), and their own recent ones. */
  async list(viewer: PolicyPerson): Promise<{ toDecide: ApprovalRequestRow[]; mine: ApprovalRequestRow[] }> {
    const now = this.#now();
    const [pending, mine] = await Promise.all([
      this.#o.store.approvals.pending(500, now),
      this.#o.store.approvals.mine({ issuer: viewer.iss, subject: viewer.sub }, 50),
    ]);
    const toDecide: ApprovalRequestRow[] = [];
    for (const request of pending) {
      const rule = this.ruleOf(request);
      if (rule && mayDecide(rule, request, viewer)) toDecide.push(request);
    }
    return { toDecide, mine };
  }

  /** Records `approver`'s verdict on request `id`, if they may decide it; tells the approvers' systems and wakes held checks. */
  async decide(id: string, approver: Approver, verdict: ApprovalVerdict, reason: string | undefined): Promise<DecideOutcome> {
    const { store, events } = this.#o;
    const request = await store.approvals.byId(id);
    if (!request) return { kind: 'not_found' };
    const rule = this.ruleOf(request);
    if (!rule) {
      const isRequester = samePrincipal({ issuer: approver.iss, subject: approver.sub }, request);
      return isRequester ? { kind: 'stale', request } : { kind: 'not_found' };
    }
    if (!mayDecide(rule, request, approver)) return { kind: 'not_found' };
    const now = this.#now();
    const who = { issuer: approver.iss, subject: approver.sub };
    const result = await transactionWithEvents(store, events, async (tx, emit) => {
      const r = await tx.approvals.decide(
        id,
        { ...who, name: approver.name.slice(0, 200), verdict, reason: reason ? reason.slice(0, MAX_REASON_LENGTH) : null },
        Math.max(1, rule.quorum),
        rule.ttlSeconds * 1000,
        now,
      );
      if (r.kind === 'recorded') {
        await tx.audit.record(
          'approval_decided',
          who,
          r.request.provider || undefined,
          `request=${id} rule=${r.request.rule_id} verdict=${verdict}`,
        );
        const status = r.request.status === 'approved' || r.request.status === 'denied' ? r.request.status : 'pending';
        await emit('approval.decided', { ...this.#eventData(r.request), decision: { approver: who, verdict }, status });
      }
      return r;
    });
    this.watcher.notify(id).catch(() => undefined);
    return result;
  }

  /** Deletes requests past their use by {@link APPROVAL_PRUNE_GRACE_MS}. */
  prune(): Promise<number> {
    return this.#o.store.approvals.prune(APPROVAL_PRUNE_GRACE_MS, this.#now());
  }

  close(): void {
    this.watcher.close();
  }
}
