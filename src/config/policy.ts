import { z } from 'zod';
import { Policy, PolicyRuleError, type PolicyRuleSpec } from '../policy/engine.js';
import { ConfigError } from './errors.js';
import { entryProblem, readConfigSections } from './file.js';

const ruleSchema = z
  .object({
    id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$/, 'letters, digits, ., _ and -, at most 80'),
    when: z.string().trim().min(1, 'must be a CEL condition'),
    effect: z.enum(['allow', 'deny', 'approve', 'hide'], { message: 'must be allow, deny, approve or hide' }),
    reason: z.string().trim().min(1).max(500).optional(),
    approvers: z.string().trim().min(1).optional(),
    quorum: z.number().int().min(1).max(20).optional(),
    selfApproval: z.boolean().optional(),
    ttlSeconds: z
      .number()
      .int()
      .min(30)
      .max(30 * 86_400)
      .optional(),
    reuse: z.boolean().optional(),
  })
  .strict()
  .superRefine((rule, ctx) => {
    if (rule.effect === 'approve') {
      if (rule.approvers === undefined)
        ctx.addIssue({ code: 'custom', path: ['approvers'], message: 'an approve rule must say who may approve' });
      return;
    }
    for (const key of ['approvers', 'quorum', 'selfApproval', 'ttlSeconds', 'reuse'] as const)
      if (rule[key] !== undefined) ctx.addIssue({ code: 'custom', path: [key], message: 'applies only to effect approve' });
  });

const policySchema = z
  .object({
    default: z.enum(['allow', 'deny'], { message: 'must be allow or deny' }).optional(),
    rules: z.array(z.unknown()).optional(),
  })
  .strict();

/** How long an approval stays valid when the rule does not say (seconds). */
export const DEFAULT_APPROVAL_TTL_SECONDS = 900;

/**
 * PROVIDERS_FILE `policy:` compiled (undefined without the file or the section): every problem is
 * one line naming the rule and the field, a CEL error included (docs/policy.md).
 */
export function loadPolicy(env: NodeJS.ProcessEnv): Policy | undefined {
  if (!env.PROVIDERS_FILE) return undefined;
  return policyFromSection(readConfigSections(env.PROVIDERS_FILE).policy);
}

/** The `policy:` section's value compiled; undefined when absent. */
export function policyFromSection(section: unknown): Policy | undefined {
  if (section === undefined) return undefined;
  const parsed = policySchema.safeParse(section);
  if (!parsed.success) entryProblem('policy', parsed.error.issues[0]!);
  const rules: PolicyRuleSpec[] = [];
  const ids = new Set<string>();
  (parsed.data.rules ?? []).forEach((input, i) => {
    const id = (input as { id?: unknown } | null)?.id;
    const named = typeof id === 'string' ? `policy.rules.${id}` : `policy.rules[${i}]`;
    const rule = ruleSchema.safeParse(input);
    if (!rule.success) entryProblem(named, rule.error.issues[0]!);
    if (ids.has(rule.data.id)) entryProblem(named, { path: [], message: 'the id is declared twice' });
    ids.add(rule.data.id);
    rules.push({
      id: rule.data.id,
      when: rule.data.when,
      effect: rule.data.effect,
      reason: rule.data.reason,
      approvers: rule.data.approvers,
      quorum: rule.data.quorum ?? 1,
      selfApproval: rule.data.selfApproval ?? false,
      ttlSeconds: rule.data.ttlSeconds ?? DEFAULT_APPROVAL_TTL_SECONDS,
      reuse: rule.data.reuse ?? false,
    });
  });
  try {
    return new Policy({ default: parsed.data.default ?? 'allow', rules });
  } catch (err) {
    if (err instanceof PolicyRuleError)
      throw new ConfigError(`PROVIDERS_FILE policy.rules.${err.ruleId}.${err.field}: not a valid condition: ${err.message}`);
    throw err;
  }
}
