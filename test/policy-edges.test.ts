// The policy applied where tokens are used (issue 22's "Done when"): built-in tools, gateway tools
// through a real upstream fixture, and the token exchange; and the MCP edge's translation of an
// approval gate's outcomes. Real parts: the test IdP (tokens carrying `groups`), the GitHub
// stand-in, the SDK-built upstream fixture, SQLite. The approval gate here is a TEST DOUBLE of the
// ApprovalGate interface (src/policy/types.ts): it answers what each test sets; the real gate
// (src/approvals/) has its own end-to-end tests.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import type { ApprovalGate, ApprovalOutcome, ApprovalRule, ApprovalSubject } from '../src/policy/index.js';
import { connectGitHub, providersFile, standInVerifier } from './support/gateway.js';
import { envelope, legacyClient, rawCall, resultText } from './support/mcp.js';
import { startStack, type Stack } from './support/stack.js';
import { MAINTAINERS_DELETE_RULES } from './support/policy.js';
import { startUpstreamServer, type UpstreamServer } from './support/upstream-server.js';
import { eventually } from './support/eventually.js';
import { postTokenExchange } from './support/token-exchange.js';

/** A test double of the approval gate: records each check, answers with `answer`. */
class TestGate implements ApprovalGate {
  readonly checks: Array<{ subject: ApprovalSubject; rule: ApprovalRule; holdMs: number }> = [];
  answer: (subject: ApprovalSubject) => ApprovalOutcome = () => ({
    kind: 'pending',
    requestId: 'req-1',
    statusUrl: 'http://127.0.0.1:1/approvals/req-1',
    expiresAt: Date.now() + 60_000,
  });
  async check(subject: ApprovalSubject, rule: ApprovalRule, holdMs: number): Promise<ApprovalOutcome> {
    this.checks.push({ subject, rule, holdMs });
    return this.answer(subject);
  }
}

const BOT = { id: 'issue-bot', secret: 'issue-bot-secret-0123456789', audience: 'https://issue-bot.test/mcp' };
/** The issue-bot service as the suites' PROVIDERS_FILE declares it (its grants come from the policy's rules). */
const BOT_SERVICE = { id: BOT.id, audiences: [BOT.audience], auth: 'client_secret_basic', allow: { github: [] } };

const UPSTREAM_TOOLS = [
  {
    name: 'delete_repository',
    description: 'Deletes a repository',
    inputSchema: { type: 'object', properties: {} },
    annotations: { destructiveHint: true },
  },
  {
    name: 'drop_branch',
    description: 'Deletes a branch',
    inputSchema: { type: 'object', properties: {} },
    annotations: { destructiveHint: true },
  },
  { name: 'echo', description: 'Echoes text back', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } },
];

const POLICY = {
  default: 'allow',
  rules: [
    ...MAINTAINERS_DELETE_RULES,
    {
      id: 'issue-bot-asks-for-ops',
      when: 'service.id == "issue-bot" && "ops" in principal.claims.groups',
      effect: 'approve',
      approvers: 'true',
    },
    {
      id: 'issue-bot-only-eng',
      when: 'service.id == "issue-bot" && !("eng" in principal.claims.groups)',
      effect: 'deny',
      reason: 'issue-bot may get tokens only for users in eng.',
    },
    { id: 'hide-destructive-elsewhere', when: 'tool.annotations.destructiveHint == true && client.id != "claude-code"', effect: 'hide' },
    {
      id: 'contractors-keep-accounts',
      when: 'tool.name == "disconnect_account" && "contractors" in principal.claims.groups',
      effect: 'deny',
      reason: 'Contractors cannot disconnect accounts.',
    },
    {
      id: 'no-whoami-for-bots',
      when: 'tool.name == "github_whoami" && has(principal.claims.bot) && principal.claims.bot == true',
      effect: 'hide',
    },
    {
      id: 'auditors-ask-to-list',
      when: 'tool.name == "list_connections" && has(principal.claims.groups) && "auditors" in principal.claims.groups',
      effect: 'approve',
      approvers: 'true',
    },
    {
      id: 'echo-needs-approval',
      when: 'tool.name == "github_mcp_echo" && args.text == "approve me"',
      effect: 'approve',
      approvers: 'true',
    },
    { id: 'echo-broken', when: 'tool.name == "github_mcp_echo" && args.text == "broken" && args.nothing.deeper == 1', effect: 'allow' },
  ],
};

describe('policy at the edges: built-in tools, the gateway and the token exchange', () => {
  let stack: Stack;
  let upstream: UpstreamServer;
  let file: { path: string; remove(): void };
  const gate = new TestGate();

  before(async () => {
    upstream = await startUpstreamServer({
      era: 'modern',
      verify: standInVerifier(() => stack.github),
      tools: UPSTREAM_TOOLS as never,
    });
    file = providersFile({
      upstreams: [{ id: 'github', url: upstream.url, provider: 'github', toolPrefix: 'github_mcp_' }],
      services: [BOT_SERVICE],
      policy: POLICY,
    });
    stack = await startStack({
      holdSeconds: 1,
      env: { PROVIDERS_FILE: file.path, SERVICE_ISSUE_BOT_SECRET: BOT.secret },
      brokerOptions: () => ({ approvalGate: gate }),
    });
  });
  after(async () => {
    await stack?.close();
    await upstream?.close();
    file?.remove();
  });

  const token = (sub: string, claims: Record<string, unknown>, aud?: string) =>
    stack.idp.mintAccessToken({ sub, claims, ...(aud ? { aud } : {}) });
  const as = (name: string, capabilities?: Record<string, unknown>) => {
    const e = envelope(capabilities);
    return { ...e, 'io.modelcontextprotocol/clientInfo': { name, version: '1.0.0' } };
  };
  const call = async (
    tok: string,
    name: string,
    args: Record<string, unknown> = {},
    meta = envelope(),
    extra: Record<string, unknown> = {},
  ) => rawCall(stack.mcpUrl, tok, { method: 'tools/call', params: { name, arguments: args, _meta: meta, ...extra } });
  const list = async (tok: string, meta = envelope()) => {
    const res = await rawCall(stack.mcpUrl, tok, { method: 'tools/list', params: { _meta: meta } });
    return (res.json.result.tools as Array<{ name: string }>).map((t) => t.name);
  };
  const auditRows = () => {
    const db = new Database(stack.env.DATABASE_PATH!, { readonly: true });
    try {
      return db.prepare("SELECT subject, provider, detail FROM audit_events WHERE event = 'policy_decision' ORDER BY id").all() as Array<{
        subject: string;
        provider: string | null;
        detail: string;
      }>;
    } finally {
      db.close();
    }
  };

  it('(a) only maintainers may call github_mcp_delete_repository: a deny for others, neither listed nor forwarded, audited without arguments', async () => {
    await connectGitHub(stack, 'erin', 'octocat');
    const erin = await token('erin', { groups: ['eng'] });
    assert.ok(!(await list(erin, as('claude-code'))).includes('github_mcp_delete_repository'));
    const before = upstream.calls('delete_repository').length;
    const res = await call(erin, 'github_mcp_delete_repository', { repo: 'secret-name' }, as('claude-code'));
    assert.equal(res.json.result?.isError, true, res.text);
    assert.equal(resultText(res.json.result), 'Only maintainers may delete repositories.');
    assert.equal(upstream.calls('delete_repository').length, before, 'never forwarded');
    const row = await eventually('the audit row', () =>
      auditRows().find((r) => r.subject === 'erin' && r.detail.includes('only-maintainers-delete')),
    );
    assert.equal(row.detail, 'rule=only-maintainers-delete effect=deny tool=github_mcp_delete_repository');
    assert.equal(row.provider, 'github');
    assert.ok(!JSON.stringify(auditRows()).includes('secret-name'), 'no argument value in the audit');
  });

  it('(a) a maintainer is asked for approval (input_required to the status page); the held repeat runs the call once approved', async () => {
    await connectGitHub(stack, 'mia', 'octocat');
    const mia = await token('mia', { groups: ['maintainers'] });
    assert.ok((await list(mia, as('claude-code'))).includes('github_mcp_delete_repository'), 'an approve rule lists the tool');
    gate.checks.length = 0;
    const before = upstream.calls('delete_repository').length;
    const asked = await call(mia, 'github_mcp_delete_repository', { repo: 'old' }, as('claude-code'));
    assert.equal(asked.json.result?.resultType, 'input_required', asked.text);
    assert.deepEqual(asked.json.result.inputRequests.approval.params, {
      mode: 'url',
      message: 'Waiting for approval of github_mcp_delete_repository. Open the link to follow the request; call again once it is decided.',
      url: 'http://127.0.0.1:1/approvals/req-1',
    });
    assert.equal(upstream.calls('delete_repository').length, before);
    const first = gate.checks.at(-1)!;
    assert.equal(first.holdMs, 0, 'the first ask does not hold');
    assert.equal(first.rule.ruleId, 'delete-needs-a-second-maintainer');
    assert.equal(first.subject.requester.subject, 'mia');
    assert.deepEqual(first.subject.requesterClaims.groups, ['maintainers']);
    assert.equal(first.subject.clientName, 'claude-code');
    assert.deepEqual(
      {
        tool: first.subject.tool,
        upstream: first.subject.upstream,
        args: first.subject.args,
        provider: first.subject.provider,
        account: first.subject.account,
      },
      { tool: 'github_mcp_delete_repository', upstream: 'github', args: { repo: 'old' }, provider: 'github', account: 'octocat' },
    );
    assert.match(first.subject.argsDigest, /^[A-Za-z0-9_-]{43}$/);
    assert.match(first.subject.policyVersion, /^[A-Za-z0-9_-]{43}$/);

    gate.answer = () => ({ kind: 'approved', requestId: 'req-1' });
    const done = await call(mia, 'github_mcp_delete_repository', { repo: 'old' }, as('claude-code'), {
      requestState: asked.json.result.requestState,
      inputResponses: { approval: { action: 'accept' } },
    });
    assert.notEqual(done.json.result?.resultType, 'input_required', done.text);
    assert.equal(upstream.calls('delete_repository').length, before + 1, 'forwarded once approved');
    assert.equal(gate.checks.at(-1)!.holdMs, 1000, 'the repeat holds (REPEAT_HOLD_SECONDS)');
    gate.answer = new TestGate().answer;
  });

  it('approval: denied is a tool error with the reason; a client without URL elicitation gets the link in the result', async () => {
    await connectGitHub(stack, 'dan', 'octocat');
    const dan = await token('dan', { groups: ['eng'] });
    gate.answer = () => ({ kind: 'denied', requestId: 'req-2', reason: 'not today' });
    const denied = await call(dan, 'github_mcp_echo', { text: 'approve me' }, as('claude-code'));
    assert.equal(denied.json.result?.isError, true, denied.text);
    assert.equal(resultText(denied.json.result), 'The call of github_mcp_echo was not approved: not today. Nothing was done.');

    gate.answer = new TestGate().answer;
    const linked = await call(dan, 'github_mcp_echo', { text: 'approve me' }, as('claude-code', {}));
    assert.equal(linked.json.result?.isError, undefined, linked.text);
    assert.equal(linked.json.result.structuredContent.status, 'approval_required');
    assert.equal(linked.json.result.structuredContent.approval_url, 'http://127.0.0.1:1/approvals/req-1');
    assert.match(resultText(linked.json.result), /needs approval first.*http:\/\/127\.0\.0\.1:1\/approvals\/req-1/);
    // Other arguments: no approval asked, the call runs.
    const plain = await call(dan, 'github_mcp_echo', { text: 'hello' }, as('claude-code'));
    assert.equal(resultText(plain.json.result), 'hello');
  });

  it('built-in tools under an approve rule: input_required, the link as a tool error where the output has no room for it, and the tool runs once approved', async () => {
    const ava = await token('ava', { groups: ['auditors'] });
    gate.answer = new TestGate().answer;
    const asked = await call(ava, 'list_connections');
    assert.equal(asked.json.result?.resultType, 'input_required', asked.text);
    assert.equal(asked.json.result.inputRequests.approval.params.url, 'http://127.0.0.1:1/approvals/req-1');
    const noUrl = await call(ava, 'list_connections', {}, as('claude-code', {}));
    assert.equal(noUrl.json.result?.isError, true, noUrl.text);
    assert.match(resultText(noUrl.json.result), /needs approval first.*\/approvals\/req-1/);
    gate.answer = () => ({ kind: 'approved', requestId: 'req-1' });
    const done = await call(ava, 'list_connections', {}, envelope(), {
      requestState: asked.json.result.requestState,
      inputResponses: { approval: { action: 'accept' } },
    });
    assert.deepEqual(done.json.result?.structuredContent?.connections, [], done.text);
    assert.equal(gate.checks.at(-1)!.subject.tool, 'list_connections');
    assert.equal(gate.checks.at(-1)!.subject.upstream, '');
    gate.answer = new TestGate().answer;
  });

  it('fails closed: a rule that cannot be evaluated refuses the call naming the rule, and is audited', async () => {
    const dan = await token('dan', { groups: ['eng'] });
    const res = await call(dan, 'github_mcp_echo', { text: 'broken' }, as('claude-code'));
    assert.equal(res.json.result?.isError, true, res.text);
    assert.equal(resultText(res.json.result), 'Policy rule echo-broken could not be evaluated, so the call is refused.');
    await eventually('the audit row', () =>
      auditRows().find((r) => r.detail === 'rule=echo-broken effect=deny unevaluated tool=github_mcp_echo'),
    );
  });

  it('(c) destructive upstream tools are hidden from clients other than claude-code: not listed, and refused as unknown', async () => {
    await connectGitHub(stack, 'cleo', 'octocat');
    const cleo = await token('cleo', { groups: ['maintainers'] });
    const elsewhere = await list(cleo, as('other-assistant'));
    assert.ok(!elsewhere.includes('github_mcp_drop_branch'));
    assert.ok(elsewhere.includes('github_mcp_echo'), JSON.stringify(elsewhere));
    const there = await list(cleo, as('claude-code'));
    assert.ok(there.includes('github_mcp_drop_branch'), JSON.stringify(there));

    const before = upstream.calls('drop_branch').length;
    const hidden = await call(cleo, 'github_mcp_drop_branch', {}, as('other-assistant'));
    const unknown = await call(cleo, 'github_mcp_no_such_tool', {}, as('other-assistant'));
    assert.equal(hidden.json.error?.code, -32602, hidden.text);
    assert.equal(hidden.json.error.message.replace('drop_branch', 'X'), unknown.json.error.message.replace('no_such_tool', 'X'));
    assert.equal(upstream.calls('drop_branch').length, before, 'never forwarded');
    // From claude-code it is forwarded (the fixture itself does not implement it, which is its own answer).
    await call(cleo, 'github_mcp_drop_branch', {}, as('claude-code'));
    assert.equal(upstream.calls('drop_branch').length, before + 1);
  });

  it('built-in tools: a deny is a tool error with the reason; a hidden one is neither listed nor callable (the SDK’s own unknown-tool error)', async () => {
    const carl = await token('carl', { groups: ['contractors'] });
    // From claude-code: elsewhere, hide-destructive-elsewhere (an earlier rule) hides disconnect_account first.
    const denied = await call(carl, 'disconnect_account', { provider: 'github' }, as('claude-code'));
    assert.equal(denied.json.result?.isError, true, denied.text);
    assert.equal(resultText(denied.json.result), 'Contractors cannot disconnect accounts.');
    assert.ok(!(await list(carl, as('claude-code'))).includes('disconnect_account'), 'a denied tool is not listed');

    const bot = await token('robo', { groups: ['eng'], bot: true });
    assert.ok(!(await list(bot)).includes('github_whoami'));
    assert.ok((await list(carl)).includes('github_whoami'));
    const hidden = await call(bot, 'github_whoami');
    const unknown = await call(bot, 'no_such_tool');
    assert.equal(hidden.json.error?.code, -32602, hidden.text);
    assert.equal(hidden.json.error.message, 'Tool github_whoami not found');
    assert.equal(unknown.json.error.message, 'Tool no_such_tool not found');
  });

  it('(b) issue-bot may get tokens only for users in eng: access_denied with the rule’s reason otherwise, audited', async () => {
    await connectGitHub(stack, 'eve', 'octocat');
    await connectGitHub(stack, 'sam', 'octocat');
    const inEng = await token('eve', { groups: ['eng'] }, BOT.audience);
    const ok = await postTokenExchange(stack.publicUrl, BOT, { subject_token: inEng });
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
    assert.equal(typeof ok.json.access_token, 'string');

    const sales = await token('sam', { groups: ['sales'] }, BOT.audience);
    const refused = await postTokenExchange(stack.publicUrl, BOT, { subject_token: sales });
    assert.equal(refused.status, 400);
    assert.deepEqual(refused.json, { error: 'access_denied', error_description: 'issue-bot may get tokens only for users in eng.' });
    await eventually('the audit row', () =>
      auditRows().find((r) => r.subject === 'sam' && r.detail === 'rule=issue-bot-only-eng effect=deny service=issue-bot'),
    );
  });

  it('the exchange under an approve rule: interaction_required with the approval_uri while pending, the token once approved, access_denied when refused', async () => {
    await connectGitHub(stack, 'ola', 'octocat');
    const ops = await token('ola', { groups: ['ops', 'eng'] }, BOT.audience);
    gate.answer = new TestGate().answer;
    const pending = await postTokenExchange(stack.publicUrl, BOT, { subject_token: ops, wait: '2' });
    assert.equal(pending.status, 400, JSON.stringify(pending.json));
    assert.equal(pending.json.error, 'interaction_required');
    assert.equal(pending.json.reason, 'approval_required');
    assert.equal(pending.json.approval_uri, 'http://127.0.0.1:1/approvals/req-1');
    const checked = gate.checks.at(-1)!;
    assert.equal(checked.holdMs, 2000, 'held up to wait');
    assert.deepEqual(
      {
        service: checked.subject.serviceId,
        tool: checked.subject.tool,
        account: checked.subject.account,
        requester: checked.subject.requester.subject,
      },
      { service: 'issue-bot', tool: '', account: 'octocat', requester: 'ola' },
    );
    gate.answer = () => ({ kind: 'approved', requestId: 'req-1' });
    const granted = await postTokenExchange(stack.publicUrl, BOT, { subject_token: ops });
    assert.equal(granted.status, 200, JSON.stringify(granted.json));
    gate.answer = () => ({ kind: 'denied', requestId: 'req-1', reason: 'no' });
    const refused = await postTokenExchange(stack.publicUrl, BOT, { subject_token: ops });
    assert.deepEqual(refused.json, { error: 'access_denied', error_description: 'The exchange was not approved: no.' });
    gate.answer = new TestGate().answer;
  });

  it('a 2025-11-25 client waiting for approval gets -32042 with the status page as its URL elicitation', async () => {
    const mia = await token('mia', { groups: ['maintainers'] });
    gate.answer = new TestGate().answer;
    const client = await legacyClient({ url: stack.mcpUrl, token: mia });
    try {
      await assert.rejects(
        client.callTool({ name: 'github_mcp_delete_repository', arguments: { repo: 'old' } }),
        (err: { code?: number; data?: { elicitations?: Array<{ url?: string }> } }) =>
          err.code === -32042 && err.data?.elicitations?.[0]?.url === 'http://127.0.0.1:1/approvals/req-1',
      );
    } finally {
      await client.close();
    }
  });
});

describe('policy with the broker’s own approval gate, without upstreams', () => {
  let stack: Stack;
  let file: { path: string; remove(): void };
  before(async () => {
    file = providersFile({
      services: [BOT_SERVICE],
      policy: {
        rules: [
          { id: 'whoami-approved', when: 'tool.name == "github_whoami"', effect: 'approve', approvers: 'true' },
          { id: 'bot-approved', when: 'service.id == "issue-bot"', effect: 'approve', approvers: 'true' },
          { id: 'no-disconnect', when: 'tool.name == "disconnect_account"', effect: 'hide' },
        ],
      },
    });
    stack = await startStack({ env: { PROVIDERS_FILE: file.path, SERVICE_ISSUE_BOT_SECRET: BOT.secret } });
  });
  after(async () => {
    await stack?.close();
    file?.remove();
  });

  it('without upstreams too, a hidden built-in tool is neither listed nor callable', async () => {
    const tok = await stack.token('al');
    const listed = await rawCall(stack.mcpUrl, tok, { method: 'tools/list', params: { _meta: envelope() } });
    const names = (listed.json.result.tools as Array<{ name: string }>).map((t) => t.name);
    assert.ok(!names.includes('disconnect_account'), JSON.stringify(names));
    assert.ok(names.includes('list_connections'));
    const hidden = await rawCall(stack.mcpUrl, tok, {
      method: 'tools/call',
      params: { name: 'disconnect_account', arguments: { provider: 'github' }, _meta: envelope() },
    });
    assert.equal(hidden.json.error?.message, 'Tool disconnect_account not found', hidden.text);
  });

  it('an approve rule asks through the real gate: input_required to the status page, interaction_required with its approval_uri', async () => {
    const res = await rawCall(stack.mcpUrl, await stack.token('al'), {
      method: 'tools/call',
      params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
    });
    assert.equal(res.json.result?.resultType, 'input_required', res.text);
    const url = String(res.json.result.inputRequests.approval.params.url);
    assert.match(url, new RegExp(`^${stack.publicUrl.replace(/[.]/g, '\\.')}/approvals/apr_[A-Za-z0-9_-]+$`));
    const exchanged = await postTokenExchange(stack.publicUrl, BOT, {
      subject_token: await stack.idp.mintAccessToken({ sub: 'al', aud: BOT.audience }),
    });
    assert.equal(exchanged.status, 400);
    assert.equal(exchanged.json.error, 'interaction_required');
    assert.match(String(exchanged.json.approval_uri), /\/approvals\/apr_/);
    assert.notEqual(exchanged.json.approval_uri, url, 'the exchange is its own call, with its own request');
  });
});

describe('a rule that reads account: the decision and the tool share one read of the connection', () => {
  let stack: Stack;
  let file: { path: string; remove(): void };
  before(async () => {
    file = providersFile({
      services: [BOT_SERVICE],
      policy: {
        rules: [{ id: 'no-hubot', when: 'account.login == "hubot"', effect: 'deny', reason: 'The hubot account may not be used here.' }],
      },
    });
    stack = await startStack({ env: { PROVIDERS_FILE: file.path, SERVICE_ISSUE_BOT_SECRET: BOT.secret } });
    await connectGitHub(stack, 'al', 'octocat');
    await connectGitHub(stack, 'bo', 'hubot');
  });
  after(async () => {
    await stack?.close();
    file?.remove();
  });

  /** Runs `work` counting the broker's store reads of a connection row. */
  async function countingReads<T>(work: () => Promise<T>): Promise<{ result: T; reads: number }> {
    const connections = stack.broker.broker.store.connections;
    const find = connections.find;
    let reads = 0;
    connections.find = (...args) => {
      reads++;
      return find.apply(connections, args);
    };
    try {
      return { result: await work(), reads };
    } finally {
      connections.find = find;
    }
  }
  const whoami = async (sub: string) =>
    rawCall(stack.mcpUrl, await stack.token(sub), {
      method: 'tools/call',
      params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
    });

  it('an allowed call reads its connection once: the tool answers from the row the decision saw', async () => {
    const { result, reads } = await countingReads(() => whoami('al'));
    assert.equal(result.json.result?.structuredContent?.login, 'octocat', result.text);
    assert.equal(reads, 1, 'one store read of the connection for the decision and the tool together');
  });

  it('the account is still decided on: a refused account is a tool error with the reason, and the tool does not run', async () => {
    const before = stack.github.requests.length;
    const { result } = await countingReads(() => whoami('bo'));
    assert.equal(result.json.result?.isError, true, result.text);
    assert.equal(resultText(result.json.result), 'The hubot account may not be used here.');
    assert.equal(
      stack.github.requests.slice(before).filter((r) => r.path.endsWith('/user')).length,
      0,
      'GitHub was not asked who the account is',
    );
  });

  it('the token exchange too: one read for the decision and the token, and a refused account is access_denied', async () => {
    const exchange = async (sub: string) =>
      postTokenExchange(stack.publicUrl, BOT, { subject_token: await stack.idp.mintAccessToken({ sub, aud: BOT.audience }) });
    const { result, reads } = await countingReads(() => exchange('al'));
    assert.equal(result.status, 200, JSON.stringify(result.json));
    assert.equal(reads, 1);
    const refused = await exchange('bo');
    assert.deepEqual(refused.json, { error: 'access_denied', error_description: 'The hubot account may not be used here.' });
  });

  it('a later look at the connection in the same call reads afresh: a token GitHub refuses is refreshed or reconnected, never served from the first read', async () => {
    stack.github.expireAccessTokens('octocat');
    const { result, reads } = await countingReads(() => whoami('al'));
    assert.ok(reads >= 2, `the refused token sent the tool back to the store (${reads} reads)`);
    assert.notEqual(result.json.result?.isError, true, result.text);
  });
});
