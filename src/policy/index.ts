// Who may call what: the `policy:` section compiled once (engine.ts), and the contract with the approvals (types.ts).
export {
  DEFAULT_RULE_ID,
  Policy,
  PolicyRuleError,
  type Decision,
  type PolicyEffect,
  type PolicyRuleSpec,
  type PolicySpec,
} from './engine.js';
export { celValue } from './values.js';
export type * from './types.js';
