import type { Principal } from '../auth/principal.js';

/**
 * The contract between the policy (who may call what, `src/policy/`) and the approvals
 * (`src/approvals/`): the policy decides, an approval gate holds a call until people agree.
 * docs/policy.md documents every field a condition sees.
 */

/** A person as a policy condition sees them: the verified token's issuer, subject and claims. */
export interface PolicyPerson {
  iss: string;
  sub: string;
  claims: Record<string, unknown>;
}

/** What a rule's `when` sees of one call. */
export interface PolicyInput {
  principal: PolicyPerson;
  /** The MCP client as it introduced itself ('' when it did not, and for the exchange). */
  client: { id: string; name: string };
  /** The tool called ('' for the token exchange); `upstream` is '' for the broker's own tools. */
  tool: { name: string; upstream: string; annotations: Record<string, unknown> };
  /** The call's arguments as JSON ({} when there are none). */
  args: unknown;
  /** The provider whose account the call uses ('' when none). */
  provider: string;
  /** The connection the call would use, when there is one ({ login: '', scopes: [] } otherwise). */
  account: { login: string; scopes: string[] };
  /** The service asking through `POST /oauth/token` ('' elsewhere). */
  service: { id: string };
  now: Date;
}

/** What an `approve` rule asks for. */
export interface ApprovalRule {
  ruleId: string;
  /** The rule's `approvers` condition over `approver.{iss,sub,claims}`. */
  mayApprove(approver: PolicyPerson): boolean;
  /** How many distinct approvers must agree (≥ 1). */
  quorum: number;
  /** Whether the requester may approve their own call (a confirmation the model cannot give). */
  selfApproval: boolean;
  /** How long a decision stays valid, in seconds. */
  ttlSeconds: number;
  /** Whether one approval may run the same call again within its lifetime (default: exactly once). */
  reuse: boolean;
}

export type PolicyDecision =
  | { effect: 'allow'; ruleId: string | undefined }
  | { effect: 'deny'; ruleId: string; reason: string }
  | { effect: 'hide'; ruleId: string }
  | { effect: 'approve'; ruleId: string; approval: ApprovalRule };

/** One call waiting for approval, bound to everything that must not change between ask and run. */
export interface ApprovalSubject {
  requester: Principal;
  /** The requester's verified claims, for `selfApproval` and for the approver's page. */
  requesterClaims: Record<string, unknown>;
  /** The assistant as it introduced itself, shown to approvers. */
  clientName: string;
  tool: string;
  upstream: string;
  /** The arguments in full, shown to approvers; `argsDigest` is what the binding holds. */
  args: unknown;
  argsDigest: string;
  provider: string;
  /** The account (login) the call would use ('' when none). */
  account: string;
  /** A digest of the policy as compiled at start-up: an edited policy needs a new approval. */
  policyVersion: string;
  /** The service asking, for the token exchange ('' elsewhere). */
  serviceId: string;
}

export type ApprovalOutcome =
  /** Approved, and this run consumed it (or reused it, where the rule allows). */
  | { kind: 'approved'; requestId: string }
  /** Not decided yet: send the requester to `statusUrl` (their status page) and hold the repeat. */
  | { kind: 'pending'; requestId: string; statusUrl: string; expiresAt: number }
  | { kind: 'denied'; requestId: string; reason: string };

export interface ApprovalGate {
  /**
   * Finds the open request bound to exactly this subject and rule, or opens one (telling the
   * approvers); waits up to `holdMs` for its decision; consumes an approval it returns.
   */
  check(subject: ApprovalSubject, rule: ApprovalRule, holdMs: number, signal?: AbortSignal): Promise<ApprovalOutcome>;
}
