import { celEnv, isCelError, parse, plan, type CelInput } from '@bufbuild/cel';
import { sha256Base64url } from '../crypto/index.js';
import { annotationsValue, celValue } from './values.js';
import type { ApprovalRule, PolicyDecision, PolicyInput, PolicyPerson } from './types.js';

export type PolicyEffect = 'allow' | 'deny' | 'approve' | 'hide';

/** One rule as PROVIDERS_FILE `policy.rules` declares it (src/config/policy.ts checks the shape). */
export interface PolicyRuleSpec {
  id: string;
  when: string;
  effect: PolicyEffect;
  reason?: string | undefined;
  approvers?: string | undefined;
  quorum: number;
  selfApproval: boolean;
  ttlSeconds: number;
  reuse: boolean;
}

export interface PolicySpec {
  default: 'allow' | 'deny';
  rules: PolicyRuleSpec[];
}

/** A rule that cannot be compiled: its id, which field, and what CEL said. */
export class PolicyRuleError extends Error {
  override name = 'PolicyRuleError';
  constructor(
    readonly ruleId: string,
    readonly field: 'when' | 'approvers',
    message: string,
  ) {
    super(message);
  }
}

/** A decision, and whether it is a deny because its rule could not be evaluated (fail closed). */
export type Decision = PolicyDecision & { unevaluated?: true };

/** The rule id a `default: deny` decision names. */
export const DEFAULT_RULE_ID = '(default)';

/** What a condition may name: the inputs (docs/policy.md), and CEL's type names. */
const CALL_VARIABLES = ['principal', 'client', 'tool', 'args', 'provider', 'account', 'service', 'now'];
const TYPE_NAMES = ['int', 'uint', 'double', 'bool', 'string', 'bytes', 'list', 'map', 'null_type', 'type', 'dyn', 'timestamp', 'duration'];

type Test = (vars: Record<string, CelInput>) => unknown;

interface CompiledRule {
  spec: PolicyRuleSpec;
  test: Test;
  decision: PolicyDecision;
}

const env = celEnv();

/** The condition compiled once; a parse error or a name no input has is a {@link PolicyRuleError}. */
function compile(ruleId: string, field: 'when' | 'approvers', source: string, variables: readonly string[]): { test: Test; expr: unknown } {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(source);
  } catch (err) {
    throw new PolicyRuleError(ruleId, field, err instanceof Error ? err.message : String(err));
  }
  const unknown = unknownNames(parsed.expr, new Set([...variables, ...TYPE_NAMES]));
  if (unknown)
    throw new PolicyRuleError(ruleId, field, `"${unknown}" is not something a condition can see (it may use ${variables.join(', ')})`);
  try {
    return { test: plan(env, parsed) as Test, expr: parsed.expr };
  } catch (err) {
    throw new PolicyRuleError(ruleId, field, err instanceof Error ? err.message : String(err));
  }
}

/** The first identifier in `expr` that is neither an input nor a comprehension's own variable. */
function unknownNames(expr: unknown, known: ReadonlySet<string>): string | undefined {
  const kind = (expr as { exprKind?: { case?: string; value?: unknown } } | undefined)?.exprKind;
  if (!kind?.case) return undefined;
  const v = kind.value as Record<string, unknown>;
  switch (kind.case) {
    case 'identExpr':
      return known.has(v.name as string) ? undefined : (v.name as string);
    case 'selectExpr':
      return unknownNames(v.operand, known);
    case 'callExpr':
      return unknownNames(v.target, known) ?? firstOf(v.args as unknown[], known);
    case 'listExpr':
      return firstOf(v.elements as unknown[], known);
    case 'structExpr':
      return firstOf(
        (v.entries as Array<{ mapKey?: unknown; value?: unknown }>).flatMap((e) => [e.mapKey, e.value]),
        known,
      );
    case 'comprehensionExpr': {
      const inner = new Set([
        ...known,
        ...[v.iterVar, v.iterVar2, v.accuVar].filter((x): x is string => typeof x === 'string' && x !== ''),
      ]);
      return unknownNames(v.iterRange, known) ?? unknownNames(v.accuInit, known) ?? firstOf([v.loopCondition, v.loopStep, v.result], inner);
    }
    default:
      return undefined;
  }
}

function firstOf(list: unknown[] | undefined, known: ReadonlySet<string>): string | undefined {
  for (const e of list ?? []) {
    const found = unknownNames(e, known);
    if (found) return found;
  }
  return undefined;
}

/**
 * The tool name a condition requires, when it is `tool.name == "<name>"` or a conjunction (`&&`)
 * with it: such a rule cannot match any other tool, so a decision for another tool skips it
 * without evaluating anything (CEL's `false && error` is false, so skipping changes no outcome).
 */
function requiredToolName(expr: unknown): string | undefined {
  const kind = (expr as { exprKind?: { case?: string; value?: { function?: string; args?: unknown[] } } }).exprKind;
  if (kind?.case !== 'callExpr' || !kind.value) return undefined;
  const { function: fn, args = [] } = kind.value;
  if (fn === '_&&_') return args.map(requiredToolName).find((n) => n !== undefined);
  if (fn !== '_==_' || args.length !== 2) return undefined;
  const [a, b] = args;
  return (isToolName(a) && stringConstant(b)) || (isToolName(b) && stringConstant(a)) || undefined;
}

function isToolName(expr: unknown): boolean {
  const kind = (expr as { exprKind?: { case?: string; value?: Record<string, unknown> } }).exprKind;
  if (kind?.case !== 'selectExpr' || kind.value?.field !== 'name' || kind.value.testOnly) return false;
  const operand = (kind.value.operand as { exprKind?: { case?: string; value?: { name?: string } } }).exprKind;
  return operand?.case === 'identExpr' && operand.value?.name === 'tool';
}

function stringConstant(expr: unknown): string | undefined {
  const kind = (expr as { exprKind?: { case?: string; value?: { constantKind?: { case?: string; value?: unknown } } } }).exprKind;
  const constant = kind?.case === 'constExpr' ? kind.value?.constantKind : undefined;
  return constant?.case === 'stringValue' && typeof constant.value === 'string' ? constant.value : undefined;
}

/** JSON with sorted keys, for the policy's digest. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object')
    return `{${Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(value) ?? 'null';
}

/**
 * The `policy:` section compiled once at start-up (docs/policy.md): first matching rule wins, else
 * the default. Fails closed: a condition that errors at run time (a missing field, a wrong type) is
 * a deny naming its rule, and only a condition that yields exactly `true` matches.
 */
export class Policy {
  /** A digest of the canonical policy section: an edited policy has another version. */
  readonly version: string;
  readonly defaultEffect: 'allow' | 'deny';
  /** Whether any rule's effect is `approve` (such a policy needs an approval gate). */
  readonly hasApproveRules: boolean;
  /** Whether any condition reads `account` (only then is the connection looked up for a decision). */
  readonly readsAccount: boolean;
  readonly #rules: CompiledRule[];
  readonly #approvals = new Map<string, ApprovalRule>();
  /** Tool name → the rules that may match it, in order; other names get {@link #unindexed}. */
  readonly #byName = new Map<string, CompiledRule[]>();
  readonly #unindexed: CompiledRule[];

  /** @throws {PolicyRuleError} for the first rule that cannot be compiled. */
  constructor(spec: PolicySpec) {
    this.version = sha256Base64url(canonical(spec));
    this.defaultEffect = spec.default;
    const indexed: Array<string | undefined> = [];
    this.#rules = spec.rules.map((rule) => {
      const { test, expr } = compile(rule.id, 'when', rule.when, CALL_VARIABLES);
      indexed.push(requiredToolName(expr));
      let decision: PolicyDecision;
      switch (rule.effect) {
        case 'allow':
          decision = { effect: 'allow', ruleId: rule.id };
          break;
        case 'deny':
          decision = { effect: 'deny', ruleId: rule.id, reason: rule.reason ?? `Refused by policy rule ${rule.id}.` };
          break;
        case 'hide':
          decision = { effect: 'hide', ruleId: rule.id };
          break;
        case 'approve': {
          if (rule.approvers === undefined) throw new PolicyRuleError(rule.id, 'approvers', 'an approve rule must say who may approve');
          const approvers = compile(rule.id, 'approvers', rule.approvers, ['approver']).test;
          const approval: ApprovalRule = {
            ruleId: rule.id,
            mayApprove: (approver: PolicyPerson) => mayApprove(approvers, approver),
            quorum: rule.quorum,
            selfApproval: rule.selfApproval,
            ttlSeconds: rule.ttlSeconds,
            reuse: rule.reuse,
          };
          this.#approvals.set(rule.id, approval);
          decision = { effect: 'approve', ruleId: rule.id, approval };
          break;
        }
      }
      return { spec: rule, test, decision };
    });
    this.hasApproveRules = this.#approvals.size > 0;
    this.readsAccount = spec.rules.some((r) => /\baccount\b/.test(r.when));
    this.#unindexed = this.#rules.filter((_, i) => indexed[i] === undefined);
    for (const name of new Set(indexed.filter((n): n is string => n !== undefined)))
      this.#byName.set(
        name,
        this.#rules.filter((_, i) => indexed[i] === undefined || indexed[i] === name),
      );
  }

  /** The rules' ids and effects, in order (for `npm run admin -- policy test` and the docs). */
  get rules(): ReadonlyArray<Readonly<PolicyRuleSpec>> {
    return this.#rules.map((r) => r.spec);
  }

  /** What an `approve` rule asks for, by its id (the approvals part reads it when a decision comes in). */
  approvalRule(ruleId: string): ApprovalRule | undefined {
    return this.#approvals.get(ruleId);
  }

  /** The first rule whose condition is exactly `true`, else the default; a condition that errors is a deny naming its rule. */
  decide(input: PolicyInput): Decision {
    const candidates = this.#byName.get(input.tool.name) ?? this.#unindexed;
    if (candidates.length > 0) {
      const vars = variablesOf(input);
      for (const rule of candidates) {
        let result: unknown;
        try {
          result = rule.test(vars);
        } catch (err) {
          result = err instanceof Error ? err : new Error(String(err));
        }
        if (result === true) return rule.decision;
        if (isCelError(result) || result instanceof Error)
          return {
            effect: 'deny',
            ruleId: rule.spec.id,
            reason: `Policy rule ${rule.spec.id} could not be evaluated, so the call is refused.`,
            unevaluated: true,
          };
      }
    }
    return this.defaultEffect === 'allow'
      ? { effect: 'allow', ruleId: undefined }
      : { effect: 'deny', ruleId: DEFAULT_RULE_ID, reason: 'No policy rule allows this call.' };
  }
}

function variablesOf(input: PolicyInput): Record<string, CelInput> {
  return {
    principal: person(input.principal),
    client: new Map<string, CelInput>([
      ['id', input.client.id],
      ['name', input.client.name],
    ]),
    tool: new Map<string, CelInput>([
      ['name', input.tool.name],
      ['upstream', input.tool.upstream],
      ['annotations', annotationsValue(input.tool.annotations)],
    ]),
    args: celValue(input.args ?? {}),
    provider: input.provider,
    account: new Map<string, CelInput>([
      ['login', input.account.login],
      ['scopes', [...input.account.scopes]],
    ]),
    service: new Map<string, CelInput>([['id', input.service.id]]),
    now: celValue(input.now),
  };
}

function person(p: PolicyPerson): CelInput {
  return new Map<string, CelInput>([
    ['iss', p.iss],
    ['sub', p.sub],
    ['claims', celValue(p.claims)],
  ]);
}

/** An `approvers` condition: exactly `true` lets the person approve; anything else, an error included, does not. */
function mayApprove(test: Test, approver: PolicyPerson): boolean {
  try {
    return test({ approver: person(approver) }) === true;
  } catch {
    return false;
  }
}
