import {
  inputRequired,
  ProtocolError,
  ProtocolErrorCode,
  UrlElicitationRequiredError,
  type CallToolResult,
  type InputRequiredResult,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { Principal } from '../auth/principal.js';
import type { ApprovalGate, ApprovalSubject, Decision, Policy, PolicyInput } from '../policy/index.js';
import { ConnectionRead } from '../connections/index.js';
import type { Store } from '../store/index.js';
import { supportsUrlElicitation, type McpCall } from './call.js';
import type { ToolDeps } from './context.js';
import { toolError, withDenial } from './results.js';
import { P } from './messages.js';
import { scopeList } from '../providers/scopes.js';

/** The key of the approval's input request; the same on every round. */
export const APPROVAL_INPUT_KEY = 'approval';

/** A tool as a policy condition sees it. */
export interface PolicyTool {
  /** The name the client calls it by (prefixed, for an upstream's tool). */
  name: string;
  /** The upstream's id ('' for a built-in tool). */
  upstream: string;
  annotations: Record<string, unknown>;
  /** The provider whose account the call uses ('' when none). */
  provider: string;
}

export type PolicyAccount = PolicyInput['account'];

export const NO_ACCOUNT: PolicyAccount = Object.freeze({ login: '', scopes: [] }) as PolicyAccount;

/**
 * The principal's connection to `provider`, read for a decision: one store read, only when a rule
 * reads `account` or `always` (an approval is bound to the account whatever the rules read);
 * undefined when not read. The call's tool may take the same read for its own first look at the
 * connection (ToolDeps.connectionRead), so a policy that reads `account` costs no second read.
 */
export async function readAccount(
  policy: Policy,
  store: Store,
  principal: Principal,
  provider: string,
  always = false,
): Promise<ConnectionRead | undefined> {
  if ((!policy.readsAccount && !always) || provider === '') return undefined;
  return new ConnectionRead(principal, provider, await store.connections.find(principal, provider));
}

/** The account a condition sees of a read ({@link NO_ACCOUNT} when there is no connection or none was read). */
export function accountOf(read: ConnectionRead | undefined): PolicyAccount {
  const row = read?.row;
  return row ? { login: row.account_login, scopes: scopeList(row.scopes) } : NO_ACCOUNT;
}

/** {@link readAccount}'s account, for a caller that keeps no read. */
export async function accountFor(
  policy: Policy,
  store: Store,
  principal: Principal,
  provider: string,
  always = false,
): Promise<PolicyAccount> {
  return accountOf(await readAccount(policy, store, principal, provider, always));
}

/** What a condition sees of this MCP call and tool. */
export function mcpPolicyInput(call: McpCall, tool: PolicyTool, args: unknown, account: PolicyAccount): PolicyInput {
  return {
    principal: { iss: call.principal.issuer, sub: call.principal.subject, claims: call.claims as Record<string, unknown> },
    client: { id: call.clientId, name: call.clientName ?? '' },
    tool: { name: tool.name, upstream: tool.upstream, annotations: tool.annotations },
    args: args ?? {},
    provider: tool.provider,
    account,
    service: { id: '' },
    now: new Date(),
  };
}

/**
 * The tools a `tools/list` shows: those whose decision with arguments {} is neither deny nor hide
 * (an approve rule's tool is listed: calling it asks; a rule that errors without arguments hides
 * nothing). One account read per provider at most.
 */
export async function listableTools<T extends { name: string; annotations?: unknown }>(
  deps: Pick<ToolDeps, 'policy' | 'store'>,
  call: McpCall,
  tools: readonly T[],
  describe: (tool: T) => { upstream: string; provider: string },
): Promise<T[]> {
  const { policy } = deps;
  if (!policy) return [...tools];
  const accounts = new Map<string, Promise<PolicyAccount>>();
  const account = (provider: string) => {
    let found = accounts.get(provider);
    if (!found) accounts.set(provider, (found = accountFor(policy, deps.store, call.principal, provider)));
    return found;
  };
  const shown: T[] = [];
  for (const tool of tools) {
    const { upstream, provider } = describe(tool);
    const annotations = annotationsOf(tool.annotations);
    const decision = policy.decide(mcpPolicyInput(call, { name: tool.name, upstream, annotations, provider }, {}, await account(provider)));
    // A rule that cannot be evaluated without arguments (`args.x` with args {}) hides nothing here:
    // the call itself is decided with its arguments, and fails closed there.
    if (decision.effect === 'hide' || (decision.effect === 'deny' && !decision.unevaluated)) continue;
    shown.push(tool);
  }
  return shown;
}

export function annotationsOf(value: unknown): Record<string, unknown> {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** Writes the `policy_decision` audit row of a decision other than a plain allow: rule, effect, tool; never an argument. */
export function auditDecision(
  deps: Pick<ToolDeps, 'store' | 'log'>,
  principal: Principal,
  provider: string,
  decision: Decision,
  target: string,
): void {
  if (decision.effect === 'allow') return;
  const unevaluated = decision.unevaluated ? ' unevaluated' : '';
  const detail = `rule=${decision.ruleId} effect=${decision.effect}${unevaluated} ${target}`;
  if (decision.unevaluated) deps.log.warn('policy_rule_unevaluated', { rule: decision.ruleId, target });
  deps.store.audit
    .record('policy_decision', principal, provider || undefined, detail)
    .catch((err: unknown) =>
      deps.log.warn('audit_write_failed', { event: 'policy_decision', message: err instanceof Error ? err.message : String(err) }),
    );
}

export type PolicyGate = { ok: true } | { ok: false; result: CallToolResult | InputRequiredResult };

/** The decision on one tools/call, audited when it is anything but a plain allow. */
export function decideCall(call: McpCall, deps: ToolDeps, tool: PolicyTool, args: unknown, account: PolicyAccount): Decision | undefined {
  const { policy } = deps;
  if (!policy) return undefined;
  const decision = policy.decide(mcpPolicyInput(call, tool, args, account));
  auditDecision(deps, call.principal, tool.provider, decision, `tool=${tool.name}`);
  return decision;
}

/**
 * The policy's word on one tools/call, before the tool runs: allow passes; deny is a tool error
 * with the rule's reason; hide is the very error an unknown tool gets; approve asks the approval
 * gate (src/policy/types.ts) and translates its outcome for this client. The decision is made
 * afresh on every call, the approved repeat included.
 * @throws {ProtocolError} -32602 "Tool … not found" for a hidden tool.
 * @throws {UrlElicitationRequiredError} -32042 for a 2025-11-25 client whose call waits for approval.
 */
export async function policyGate(
  ctx: ServerContext,
  call: McpCall,
  deps: ToolDeps,
  tool: PolicyTool,
  args: unknown,
  account: PolicyAccount,
): Promise<PolicyGate> {
  return answerDecision({ ctx, call, deps, tool, args, account }, decideCall(call, deps, tool, args, account));
}

/** One tools/call before its tool runs, as the policy's answer needs it. */
export interface GatedCall {
  ctx: ServerContext;
  call: McpCall;
  deps: ToolDeps;
  tool: PolicyTool;
  args: unknown;
  account: PolicyAccount;
}

/** What a decision answers (see {@link policyGate}); `linkAsError`: the tool's output schema has no room for an approval link. */
export async function answerDecision(gated: GatedCall, decision: Decision | undefined, linkAsError = false): Promise<PolicyGate> {
  const { deps, tool } = gated;
  if (!decision || !deps.policy) return { ok: true };
  switch (decision.effect) {
    case 'allow':
      return { ok: true };
    case 'deny':
      return { ok: false, result: withDenial(toolError(decision.reason), { reason: 'policy_denied' }) };
    case 'hide':
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool ${tool.name} not found`);
    case 'approve':
      return approvalGate(gated, deps.policy, decision, linkAsError);
  }
}

async function approvalGate(
  { ctx, call, deps, tool, args, account }: GatedCall,
  policy: Policy,
  decision: Extract<Decision, { effect: 'approve' }>,
  linkAsError: boolean,
): Promise<PolicyGate> {
  const gate: ApprovalGate | undefined = deps.approvals;
  if (!gate) {
    deps.log.warn('policy_approval_unavailable', { rule: decision.ruleId, tool: tool.name });
    return { ok: false, result: toolError(P.approvalsUnavailable(tool.name)) };
  }
  const subject: ApprovalSubject = {
    requester: call.principal,
    requesterClaims: call.claims as Record<string, unknown>,
    clientName: call.clientName ?? call.clientId,
    tool: tool.name,
    upstream: tool.upstream,
    args: args ?? {},
    argsDigest: call.argsDigest,
    provider: tool.provider,
    account: account.login,
    policyVersion: policy.version,
    serviceId: '',
  };
  // Only a repeat that carries our approval state holds (a client that cannot carry it repeats the
  // plain call and is answered at once; the gate is stateless, the subject names the request).
  const state = ctx.mcpReq.requestState<{ kind?: string }>();
  const holdMs = state?.kind === 'approval' ? deps.repeatHoldMs : 0;
  // Tests wait on this line to know a repeat is held (as on `repeat_held` for a connect repeat).
  if (holdMs > 0) deps.log.debug('approval_held', { rule: decision.ruleId, tool: tool.name, holdMs });
  const outcome = await gate.check(subject, decision.approval, holdMs, ctx.mcpReq.signal);
  if (outcome.kind === 'approved') return { ok: true };
  if (outcome.kind === 'denied')
    return { ok: false, result: withDenial(toolError(P.approvalDenied(tool.name, outcome.reason)), { reason: 'approval_denied' }) };
  const message = P.waitingForApproval(tool.name);
  if (call.era === 'legacy')
    throw new UrlElicitationRequiredError([{ mode: 'url', message, url: outcome.statusUrl, elicitationId: outcome.requestId }], message);
  if (!supportsUrlElicitation(call.capabilities)) {
    const text = P.approvalLinkInResult(tool.name, outcome.statusUrl);
    const result: CallToolResult = linkAsError
      ? toolError(text)
      : {
          content: [{ type: 'text', text }],
          structuredContent: {
            status: 'approval_required',
            approval_url: outcome.statusUrl,
            expires_at: new Date(outcome.expiresAt).toISOString(),
          },
        };
    return {
      ok: false,
      result: withDenial(result, {
        reason: 'approval_required',
        authorizationContextId: outcome.requestId,
        remediationHints: [{ type: 'url', url: outcome.statusUrl }],
      }),
    };
  }
  return {
    ok: false,
    result: inputRequired({
      inputRequests: { [APPROVAL_INPUT_KEY]: inputRequired.elicitUrl({ message, url: outcome.statusUrl }) },
      requestState: await deps.codec.mint({ kind: 'approval', rid: outcome.requestId }, ctx),
    }),
  };
}
