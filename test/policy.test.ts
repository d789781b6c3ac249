// The policy engine (src/policy/engine.ts) and its PROVIDERS_FILE section (src/config/policy.ts):
// compiled once, first match wins, fail closed, each effect and each input field a condition sees.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../src/config/errors.js';
import { policyFromSection } from '../src/config/policy.js';
import type { Policy, PolicyInput } from '../src/policy/index.js';
import { MAINTAINERS_DELETE_RULES } from './support/policy.js';

function compiled(section: unknown): Policy {
  const policy = policyFromSection(section);
  assert.ok(policy);
  return policy;
}

function input(over: Partial<PolicyInput> = {}): PolicyInput {
  return {
    principal: { iss: 'https://idp.test', sub: 'alice', claims: { groups: ['eng'] } },
    client: { id: 'claude-code', name: 'Claude Code' },
    tool: { name: 'github_whoami', upstream: '', annotations: {} },
    args: {},
    provider: 'github',
    account: { login: 'octocat', scopes: ['repo'] },
    service: { id: '' },
    now: new Date('2026-12-02T12:00:00Z'),
    ...over,
  };
}

function refusal(section: unknown): string {
  try {
    policyFromSection(section);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.message;
  }
  assert.fail('the policy was accepted');
}

const only = (when: string, effect = 'deny') => compiled({ rules: [{ id: 'r', when, effect, reason: 'no' }] });

describe('policy: compiled once, a bad rule stops start-up naming it', () => {
  it('names the rule and the CEL error of a condition that does not parse', () => {
    assert.match(
      refusal({ rules: [{ id: 'broken', when: 'tool.name ==', effect: 'deny' }] }),
      /^PROVIDERS_FILE policy\.rules\.broken\.when: not a valid condition: .+/,
    );
  });

  it('refuses an unknown effect, an approve rule without approvers, a duplicate id and approve fields on another effect', () => {
    assert.match(
      refusal({ rules: [{ id: 'x', when: 'true', effect: 'maybe' }] }),
      /policy\.rules\.x\.effect: must be allow, deny, approve or hide/,
    );
    assert.match(
      refusal({ rules: [{ id: 'x', when: 'true', effect: 'approve' }] }),
      /policy\.rules\.x\.approvers: an approve rule must say who may approve/,
    );
    assert.match(
      refusal({
        rules: [
          { id: 'x', when: 'true', effect: 'deny' },
          { id: 'x', when: 'false', effect: 'allow' },
        ],
      }),
      /policy\.rules\.x: the id is declared twice/,
    );
    assert.match(
      refusal({ rules: [{ id: 'x', when: 'true', effect: 'deny', quorum: 2 }] }),
      /policy\.rules\.x\.quorum: applies only to effect approve/,
    );
    assert.match(refusal({ default: 'maybe' }), /PROVIDERS_FILE policy\.default: must be allow or deny/);
    assert.match(refusal({ rules: [{ id: 'x', when: 'true', effect: 'deny', extra: 1 }] }), /policy\.rules\.x/);
  });

  it('refuses a condition naming something no input has (a typo would otherwise deny every call)', () => {
    assert.match(
      refusal({ rules: [{ id: 'typo', when: 'principl.sub == "a"', effect: 'deny' }] }),
      /policy\.rules\.typo\.when: .*"principl"/,
    );
    assert.match(
      refusal({ rules: [{ id: 'a', when: 'true', effect: 'approve', approvers: 'principal.sub == "x"' }] }),
      /policy\.rules\.a\.approvers: .*"principal"/,
    );
    // A comprehension's own variable is no typo.
    compiled({ rules: [{ id: 'ok', when: 'args.labels.exists(l, l == "x") && type(args) == map', effect: 'deny' }] });
  });

  it('a PROVIDERS_FILE with a bad rule stops loadConfig', async () => {
    const { loadConfig } = await import('../src/config/env.js');
    const { providersFile } = await import('./support/gateway.js');
    const file = providersFile({ policy: { rules: [{ id: 'bad', when: '(', effect: 'deny' }] } });
    try {
      const env = { ...BASE_ENV, PROVIDERS_FILE: file.path };
      assert.throws(
        () => loadConfig(env),
        (err: unknown) => err instanceof ConfigError && /policy\.rules\.bad\.when/.test(err.message),
      );
    } finally {
      file.remove();
    }
  });

  it('has a version that changes with any edit and not with key order', () => {
    const a = compiled({ default: 'allow', rules: [{ id: 'r', when: 'true', effect: 'deny', reason: 'no' }] });
    const b = compiled({ rules: [{ reason: 'no', effect: 'deny', when: 'true', id: 'r' }], default: 'allow' });
    const c = compiled({ default: 'allow', rules: [{ id: 'r', when: 'true', effect: 'deny', reason: 'No' }] });
    assert.equal(a.version, b.version);
    assert.notEqual(a.version, c.version);
    assert.equal(policyFromSection(undefined), undefined);
  });
});

describe('policy: decisions', () => {
  it('first match wins, else the default (allow, or deny naming "(default)")', () => {
    const policy = compiled({
      rules: [
        { id: 'first', when: 'principal.sub == "alice"', effect: 'deny', reason: 'first' },
        { id: 'second', when: 'true', effect: 'allow' },
      ],
    });
    assert.deepEqual(policy.decide(input()), { effect: 'deny', ruleId: 'first', reason: 'first' });
    assert.deepEqual(policy.decide(input({ principal: { iss: 'i', sub: 'bob', claims: {} } })), { effect: 'allow', ruleId: 'second' });
    assert.deepEqual(compiled({ rules: [] }).decide(input()), { effect: 'allow', ruleId: undefined });
    assert.deepEqual(compiled({ default: 'deny' }).decide(input()), {
      effect: 'deny',
      ruleId: '(default)',
      reason: 'No policy rule allows this call.',
    });
  });

  it('each effect: allow, deny with its reason (or one naming the rule), hide, approve with its rule', () => {
    assert.deepEqual(only('true', 'allow').decide(input()), { effect: 'allow', ruleId: 'r' });
    assert.deepEqual(only('true', 'deny').decide(input()), { effect: 'deny', ruleId: 'r', reason: 'no' });
    assert.deepEqual(compiled({ rules: [{ id: 'q', when: 'true', effect: 'deny' }] }).decide(input()), {
      effect: 'deny',
      ruleId: 'q',
      reason: 'Refused by policy rule q.',
    });
    assert.deepEqual(compiled({ rules: [{ id: 'h', when: 'true', effect: 'hide' }] }).decide(input()), { effect: 'hide', ruleId: 'h' });
    const approve = compiled({
      rules: [
        {
          id: 'a',
          when: 'true',
          effect: 'approve',
          approvers: '"maintainers" in approver.claims.groups',
          quorum: 2,
          ttlSeconds: 600,
          reuse: true,
        },
      ],
    });
    const decision = approve.decide(input());
    assert.equal(decision.effect, 'approve');
    assert.ok(decision.effect === 'approve');
    assert.equal(decision.approval, approve.approvalRule('a'));
    assert.deepEqual(
      {
        quorum: decision.approval.quorum,
        selfApproval: decision.approval.selfApproval,
        ttl: decision.approval.ttlSeconds,
        reuse: decision.approval.reuse,
      },
      { quorum: 2, selfApproval: false, ttl: 600, reuse: true },
    );
    assert.equal(decision.approval.mayApprove({ iss: 'i', sub: 'm', claims: { groups: ['maintainers'] } }), true);
    assert.equal(decision.approval.mayApprove({ iss: 'i', sub: 'e', claims: { groups: ['eng'] } }), false);
    // An approvers condition that errors lets nobody approve.
    assert.equal(decision.approval.mayApprove({ iss: 'i', sub: 'n', claims: {} }), false);
    assert.equal(approve.approvalRule('nope'), undefined);
    assert.equal(compiled({ rules: [{ id: 'a', when: 'true', effect: 'approve', approvers: 'true' }] }).approvalRule('a')?.ttlSeconds, 900);
  });

  it('fails closed: a condition that errors at run time is a deny naming the rule, flagged unevaluated', () => {
    const policy = only('"x" in principal.claims.groups_missing', 'allow');
    assert.deepEqual(policy.decide(input()), {
      effect: 'deny',
      ruleId: 'r',
      reason: 'Policy rule r could not be evaluated, so the call is refused.',
      unevaluated: true,
    });
    // Wrong type: a string compared with an int.
    assert.equal(only('args.count > 3', 'allow').decide(input({ args: { count: 'many' } })).effect, 'deny');
    // has() makes the same rule safe.
    assert.equal(only('has(principal.claims.groups_missing) && "x" in principal.claims.groups_missing').decide(input()).effect, 'allow');
  });

  it('matches only on exactly true: a non-boolean result does not match', () => {
    assert.deepEqual(only('principal.sub').decide(input()), { effect: 'allow', ruleId: undefined });
    assert.deepEqual(only('1').decide(input()), { effect: 'allow', ruleId: undefined });
    assert.deepEqual(only('"true"').decide(input()), { effect: 'allow', ruleId: undefined });
  });

  it('skips rules indexed by another tool name without changing any outcome', () => {
    const policy = compiled({
      rules: [
        { id: 'a', when: 'tool.name == "one" && principal.claims.nope == 1', effect: 'deny' },
        { id: 'b', when: '"two" == tool.name', effect: 'hide' },
        { id: 'c', when: 'tool.name == "one" || tool.name == "three"', effect: 'deny', reason: 'c' },
      ],
    });
    assert.equal(
      policy.decide(input({ tool: { name: 'one', upstream: '', annotations: {} } })).ruleId,
      'a',
      'an error in its own tool still denies',
    );
    assert.deepEqual(policy.decide(input({ tool: { name: 'two', upstream: '', annotations: {} } })), { effect: 'hide', ruleId: 'b' });
    assert.equal(
      policy.decide(input({ tool: { name: 'three', upstream: '', annotations: {} } })).ruleId,
      'c',
      'a disjunction is not indexed',
    );
    assert.equal(policy.decide(input({ tool: { name: 'four', upstream: '', annotations: {} } })).effect, 'allow');
  });
});

describe('policy: every input a condition sees', () => {
  const sees = (when: string, over: Partial<PolicyInput> = {}) => only(when).decide(input(over)).effect === 'deny';

  it('principal.iss, .sub and .claims (nested, lists)', () => {
    assert.ok(sees('principal.iss == "https://idp.test" && principal.sub == "alice"'));
    assert.ok(sees('"eng" in principal.claims.groups'));
    assert.ok(!sees('"eng" in principal.claims.groups', { principal: { iss: 'i', sub: 'b', claims: { groups: ['ops'] } } }));
    assert.ok(sees('principal.claims.org.team == "core"', { principal: { iss: 'i', sub: 'b', claims: { org: { team: 'core' } } } }));
  });

  it('client.id and client.name', () => {
    assert.ok(sees('client.id == "claude-code" && client.name == "Claude Code"'));
    assert.ok(!sees('client.id == "claude-code"', { client: { id: 'other', name: '' } }));
  });

  it('tool.name, tool.upstream and tool.annotations (every MCP hint present, null when undeclared)', () => {
    const tool = { name: 'github_mcp_delete_repository', upstream: 'github', annotations: { destructiveHint: true } };
    assert.ok(sees('tool.name == "github_mcp_delete_repository" && tool.upstream == "github"', { tool }));
    assert.ok(sees('tool.annotations.destructiveHint == true', { tool }));
    assert.ok(!sees('tool.annotations.destructiveHint == true'), 'undeclared: null, no error');
    assert.ok(sees('tool.annotations.readOnlyHint == null'));
    assert.ok(sees('tool.upstream == ""'));
  });

  it('args: objects as maps, lists, whole numbers as int (compared with int and double), strings, booleans, null', () => {
    const args = { count: 4, ratio: 0.5, labels: ['a', 'b'], repo: { name: 'x' }, force: true, none: null };
    assert.ok(sees('args.count > 3 && args.count == 4 && args.count < 4.5', { args }));
    assert.ok(sees('args.ratio < 1.0 && size(args.labels) == 2 && "b" in args.labels', { args }));
    assert.ok(sees('args.repo.name == "x" && args.force && args.none == null', { args }));
    assert.ok(sees('args.repo.name.matches("^x$")', { args }));
    assert.ok(sees('!has(args.missing)', { args }));
  });

  it('provider, account.login, account.scopes, service.id and now', () => {
    assert.ok(sees('provider == "github"'));
    assert.ok(sees('account.login == "octocat" && "repo" in account.scopes'));
    assert.ok(sees('account.login == ""', { account: { login: '', scopes: [] } }));
    assert.ok(sees('service.id == "issue-bot"', { service: { id: 'issue-bot' } }));
    assert.ok(sees('now > timestamp("2026-01-01T00:00:00Z") && now.getHours("UTC") == 12'));
  });

  it('readsAccount only when a condition names account', () => {
    assert.equal(only('account.login == "x"').readsAccount, true);
    assert.equal(only('principal.sub == "x"').readsAccount, false);
  });

  it('a hostile regular expression runs in linear time (RE2)', () => {
    const started = performance.now();
    only('args.s.matches("^(a+)+$")', 'deny').decide(input({ args: { s: `${'a'.repeat(5000)}!` } }));
    assert.ok(performance.now() - started < 2000);
  });
});

describe('npm run admin -- policy test', () => {
  const run = async (args: string[], policy: unknown = EXAMPLE_POLICY) => {
    const { runAdmin } = await import('../src/cli/admin.js');
    const { providersFile } = await import('./support/gateway.js');
    const file = providersFile({ policy });
    let out = '';
    let err = '';
    const stream = (add: (s: string) => void) => ({ write: (c: string) => (add(String(c)), true) }) as unknown as NodeJS.WritableStream;
    try {
      const code = await runAdmin(['policy', 'test', ...args], {
        stdout: stream((s) => (out += s)),
        stderr: stream((s) => (err += s)),
        env: { ...BASE_ENV, PROVIDERS_FILE: file.path },
      });
      return { code, out, err };
    } finally {
      file.remove();
    }
  };

  it('prints the decision and the rule, from the flags alone (nothing called, no database read)', async () => {
    const denied = await run([
      '--as',
      'https://idp.test',
      'erin',
      '--tool',
      'github_mcp_delete_repository',
      '--claims',
      '{"groups":["eng"]}',
    ]);
    assert.equal(denied.code, 0, denied.err);
    assert.match(
      denied.out,
      /^decision: deny\nrule: only-maintainers-delete\nreason: Only maintainers may delete repositories\.\npolicy version: \S+\n$/,
    );

    const approve = await run([
      '--as',
      'https://idp.test',
      'mia',
      '--tool',
      'github_mcp_delete_repository',
      '--claims',
      '{"groups":["maintainers"]}',
      '--json',
    ]);
    const json = JSON.parse(approve.out) as Record<string, unknown>;
    assert.equal(json.effect, 'approve');
    assert.equal(json.rule, 'delete-needs-a-second-maintainer');
    assert.deepEqual(json.approval, { quorum: 1, selfApproval: false, ttlSeconds: 900, reuse: false });

    const hidden = await run([
      '--as',
      'i',
      's',
      '--tool',
      'x',
      '--annotations',
      '{"destructiveHint":true}',
      '--client',
      'cursor',
      '--json',
    ]);
    assert.equal(JSON.parse(hidden.out).effect, 'hide');
    const shown = await run(['--as', 'i', 's', '--tool', 'x', '--annotations', '{"destructiveHint":true}', '--client', 'claude-code']);
    assert.match(shown.out, /^decision: allow\nrule: \(none matched; the default\)\n/);

    const exchange = await run(['--as', 'i', 's', '--service', 'issue-bot', '--claims', '{"groups":["sales"]}', '--json']);
    assert.equal(JSON.parse(exchange.out).rule, 'issue-bot-only-eng');
  });

  it('refuses bad usage in one line (exit 2): no --as, arguments that are not JSON', async () => {
    const noAs = await run(['--tool', 'x']);
    assert.equal(noAs.code, 2);
    assert.match(noAs.err, /"policy test" needs --as <iss> <sub>/);
    const bad = await run(['--as', 'i', 's', '--args', '{nope']);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--args must be JSON/);
  });
});

const BASE_ENV = {
  PUBLIC_URL: 'http://127.0.0.1:3000',
  OIDC_ISSUER: 'http://127.0.0.1:9/idp',
  OIDC_CLIENT_ID: 'c',
  OIDC_CLIENT_SECRET: 's',
  GITHUB_CLIENT_ID: 'g',
  GITHUB_CLIENT_SECRET: 'gs',
  BROKER_SECRET: 'x'.repeat(43),
  TOKEN_ENCRYPTION_KEY: Buffer.alloc(32, 1).toString('base64'),
};

const EXAMPLE_POLICY = {
  default: 'allow',
  rules: [
    ...MAINTAINERS_DELETE_RULES,
    {
      id: 'issue-bot-only-eng',
      when: 'service.id == "issue-bot" && !("eng" in principal.claims.groups)',
      effect: 'deny',
      reason: 'eng only',
    },
    { id: 'hide-destructive-elsewhere', when: 'tool.annotations.destructiveHint == true && client.id != "claude-code"', effect: 'hide' },
  ],
};
