// Issue 19, points 2, 5, 6 and 7: what an upstream does with a user's token, or to other users,
// fails that upstream's calls and nothing else. Real parts: the broker in-process with its IdP,
// the GitHub stand-in (the provider the token is checked at), the official SDK client, and hostile
// upstreams (test/support/hostile-upstream.ts) that refuse good tokens, ask for scopes nobody
// allowed them, list what only one user's token can see, or hold calls open.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { registry } from '../src/observability/metrics.js';
import { connectGitHub, providersFile } from './support/gateway.js';
import { startHostileUpstream, type HostileRequest } from './support/hostile-upstream.js';
import { closing, envelope, rawCall, resultText } from './support/mcp.js';
import { readConnection } from './support/seed.js';
import { Browser } from './support/browser.js';
import { signIn } from './support/stack.js';
import { clientAs, useStack, useSuite } from './support/suite.js';

/** How long a test waits for an answer the broker owes: far below the client's own 60 s. */
const ANSWER_WITHIN_MS = 15_000;
const CALLS_IN_FLIGHT = 2;

const tool = (name: string, description = `${name} (a tool)`) => ({ name, description, inputSchema: { type: 'object' } });

/** Five hostile upstreams behind one broker; all 2026-07-28. */
async function startUpstreams() {
  const flaky = await startHostileUpstream();
  const scoped = await startHostileUpstream();
  const personal = await startHostileUpstream();
  const shared = await startHostileUpstream();
  const slow = await startHostileUpstream();
  const file = providersFile({
    upstreams: [
      { id: 'flaky', url: flaky.url, provider: 'github', scopes: ['repo'] },
      { id: 'scoped', url: scoped.url, provider: 'github', scopes: { required: ['repo'], allow: ['read:user'] } },
      { id: 'personal', url: personal.url, provider: 'github' },
      { id: 'shared', url: shared.url, provider: 'github', tools: { shareSeen: true } },
      { id: 'slow', url: slow.url, auth: 'none', callsInFlightPerUser: CALLS_IN_FLIGHT },
    ],
  });
  const all = [flaky, scoped, personal, shared, slow];
  return {
    flaky,
    scoped,
    personal,
    shared,
    slow,
    file,
    reset: () => all.forEach((u) => u.reset()),
    async close() {
      await Promise.all(all.map((u) => u.close()));
      file.remove();
    },
  };
}

/** The current value of a counter of the broker's registry for these labels (0 when never counted). */
async function counted(name: string, labels: Record<string, string>): Promise<number> {
  const metric = registry.getSingleMetric(name);
  assert.ok(metric, `${name} is registered`);
  const { values } = await metric.get();
  const match = values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return match?.value ?? 0;
}

/** A promise and the function that settles it. */
function gate(): { opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe('tokens and users: one upstream cannot break a connection, widen it, show it to others or crowd them out (issue 19)', () => {
  const upstreams = useSuite('the hostile upstreams', startUpstreams);
  const stack = useStack(() => ({ holdSeconds: 1, env: { PROVIDERS_FILE: upstreams.file.path } }));
  afterEach(() => {
    upstreams.reset();
    stack.github.faults = {};
  });

  const callRaw = async (sub: string, name: string, args: Record<string, unknown> = {}) =>
    rawCall(stack.mcpUrl, await stack.token(sub), { method: 'tools/call', params: { name, arguments: args, _meta: envelope() } });
  const call = async (sub: string, name: string, args: Record<string, unknown> = {}) => {
    const client = await clientAs(stack, sub);
    return closing(client, (c) => c.callTool({ name, arguments: args }, { timeout: ANSWER_WITHIN_MS }) as Promise<CallToolResult>);
  };
  const names = async (sub: string) => {
    const client = await clientAs(stack, sub);
    return closing(client, async (c) => (await c.listTools(undefined, { timeout: ANSWER_WITHIN_MS })).tools.map((t) => t.name));
  };
  const refusing401 = () =>
    upstreams.flaky.on('tools/call', () => ({
      status: 401,
      headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
      error: { code: -32001, message: 'bad token' },
    }));

  describe("an upstream's 401 cannot break the user's connection for everything else (point 2)", () => {
    it('keeps the connection when GitHub still accepts the token an upstream refuses: a tool error naming the upstream, the built-in tools work on', async () => {
      const { accessToken } = await connectGitHub(stack, 'ann', 'octocat');
      refusing401();
      const before = await counted('broker_upstream_token_refusals_total', { upstream: 'flaky', provider_verdict: 'accepted' });
      const r = await callRaw('ann', 'flaky_echo');
      assert.equal(r.json.result?.isError, true, r.text);
      assert.equal(r.json.result?.resultType ?? 'complete', 'complete', 'no reconnect link');
      assert.match(
        resultText(r.json.result),
        /"flaky" refused your GitHub token, which GitHub itself has not refused, so your connection is unchanged/,
      );
      assert.ok(
        upstreams.flaky.calls('tools/call').every((c: HostileRequest) => c.token === accessToken),
        "the upstream got only ann's token",
      );
      const row = await readConnection(stack.env, 'ann', 'github');
      assert.equal(row?.status, 'active', 'the connection is untouched');
      assert.equal(
        await counted('broker_upstream_token_refusals_total', { upstream: 'flaky', provider_verdict: 'accepted' }),
        before + 1,
        'the refusal is counted',
      );
      assert.ok(stack.logs.some((l) => l.includes('"upstream_token_refused"') && l.includes('"flaky"') && l.includes('accepted')));
      // Everything else that uses the connection goes on.
      assert.match(resultText(await call('ann', 'github_whoami')), /octocat/);
      assert.equal(resultText(await call('ann', 'scoped_echo')), 'ok', 'another upstream of the same provider');
    });

    it('marks the connection reauth_required and asks to reconnect when GitHub refuses the token too', async () => {
      await connectGitHub(stack, 'ben', 'hubot');
      refusing401();
      stack.github.faults = { api: 401 };
      const before = await counted('broker_upstream_token_refusals_total', { upstream: 'flaky', provider_verdict: 'refused' });
      const r = await callRaw('ben', 'flaky_echo');
      assert.equal(r.json.result?.resultType, 'input_required', r.text);
      assert.match(r.json.result.inputRequests.connect_account.params.url, /\/connect\/github\?req=/);
      const row = await readConnection(stack.env, 'ben', 'github');
      assert.equal(row?.status, 'reauth_required');
      assert.equal(row?.status_reason, 'upstream_401');
      assert.equal(await counted('broker_upstream_token_refusals_total', { upstream: 'flaky', provider_verdict: 'refused' }), before + 1);
    });
  });

  describe("no user sees what another user's token fetched (point 5)", () => {
    const privateTools = (request: HostileRequest) => ({
      result: { tools: request.token ? [tool('secret_plans', 'Tool of gh2 (private repos: gh2/secret-plans)')] : [] },
    });

    it('shows a user who has not connected the connect tool, never the list another user fetched with their token', async () => {
      upstreams.personal.on('tools/list', privateTools);
      await connectGitHub(stack, 'cleo', 'octocat');
      assert.ok((await names('cleo')).includes('personal_secret_plans'), "cleo's own live list");
      const listed = await names('dan');
      assert.ok(!listed.some((n) => n.startsWith('personal_') && n !== 'personal_connect'), listed.join(' '));
      assert.ok(listed.includes('personal_connect'));
      const r = await callRaw('dan', 'personal_secret_plans');
      assert.equal(r.json.result?.resultType, 'input_required', 'a call asks dan to connect first');
      assert.equal(upstreams.personal.calls('tools/call').length, 0, 'nothing reached the upstream for dan');
    });

    it('shows the definitions other users fetched only for an upstream whose operator set tools.shareSeen, and the live list of an auth: none upstream', async () => {
      upstreams.shared.on('tools/list', privateTools);
      upstreams.slow.on('tools/list', () => ({ result: { tools: [tool('open_tool')] } }));
      await connectGitHub(stack, 'eve', 'octocat');
      assert.ok((await names('eve')).includes('shared_secret_plans'));
      const listed = await names('fay');
      assert.ok(listed.includes('shared_secret_plans'), 'the operator opted in for "shared"');
      assert.ok(listed.includes('slow_open_tool'), 'auth: none: the live list, fetched with no credentials');
      assert.ok(!listed.includes('shared_connect'));
    });
  });

  describe('scope challenges are bounded by what the operator allowed each upstream (point 6)', () => {
    const challenge = (scopes: string) => () => ({
      status: 403,
      headers: { 'www-authenticate': `Bearer error="insufficient_scope", scope="${scopes}"` },
      raw: '',
    });

    it('answers a challenge for admin:org delete_repo with a tool error naming the upstream and the scopes, never a consent link', async () => {
      await connectGitHub(stack, 'gil', 'octocat', { scopes: ['repo'] });
      upstreams.scoped.on('tools/call', challenge('admin:org delete_repo'));
      const r = await callRaw('gil', 'scoped_echo');
      assert.equal(r.json.result?.isError, true, r.text);
      assert.equal(r.json.result?.inputRequests, undefined, 'no consent link');
      assert.match(resultText(r.json.result), /"scoped" asked for more access \(admin:org, delete_repo\) than the operator allows for it/);
      assert.equal((await readConnection(stack.env, 'gil', 'github'))?.scopes, 'repo', 'the connection is as it was');
      assert.ok(stack.logs.some((l) => l.includes('"upstream_scope_refused"') && l.includes('admin:org delete_repo')));
      // Without scopes.allow only the upstream's scopes may be asked for.
      upstreams.flaky.on('tools/call', challenge('read:user'));
      const plain = await callRaw('gil', 'flaky_echo');
      assert.equal(plain.json.result?.isError, true, plain.text);
      assert.match(resultText(plain.json.result), /"flaky" asked for more access \(read:user\)/);
    });

    it('asks for a scope the operator listed in scopes.allow with the consent link, as before', async () => {
      await connectGitHub(stack, 'hal', 'octocat', { scopes: ['repo'] });
      upstreams.scoped.on('tools/call', challenge('read:user'));
      const r = await callRaw('hal', 'scoped_echo');
      assert.equal(r.json.result?.resultType, 'input_required', r.text);
      const ask = r.json.result.inputRequests.connect_account.params;
      assert.match(ask.url, /\/connect\/github\?req=/);
      assert.match(ask.message, /read:user/);
      // The consent page says the token goes to the upstreams that use GitHub connections, not that it stays here.
      const browser = new Browser();
      await signIn(browser, stack, 'hal');
      const consent = await browser.open(ask.url);
      const text = consent.html.replace(/<[^>]+>/g, '').replace(/\s+/g, ' ');
      assert.match(text, /This server sends it to: flaky, when you use its tools scoped, when you use its tools personal/);
      assert.doesNotMatch(text, /stays on this server/);
    });
  });

  describe('no noisy neighbour: calls in flight per user and upstream are capped (point 7)', () => {
    it("refuses at once a user's call past callsInFlightPerUser, while another user's call to the same upstream goes through", async () => {
      const held = gate();
      const arrived: string[] = [];
      upstreams.slow.on('tools/call', async (request) => {
        const who = String((request.params.arguments as { who?: unknown } | undefined)?.who);
        arrived.push(who);
        if (who.startsWith('ivy')) await held.opened;
        return { result: { content: [{ type: 'text', text: `done ${who}` }] } };
      });
      const before = await counted('broker_upstream_calls_refused_total', { upstream: 'slow' });
      const filling = Array.from({ length: CALLS_IN_FLIGHT }, (_, i) => call('ivy', 'slow_echo', { who: `ivy-${i}` }));
      try {
        while (arrived.filter((w) => w.startsWith('ivy')).length < CALLS_IN_FLIGHT) await new Promise((r) => setTimeout(r, 20));
        const refused = await call('ivy', 'slow_echo', { who: 'ivy-extra' });
        assert.equal(refused.isError, true);
        assert.match(resultText(refused), /You already have 2 calls in progress at the upstream MCP server "slow"/);
        assert.ok(!arrived.includes('ivy-extra'), 'never sent upstream');
        assert.equal(await counted('broker_upstream_calls_refused_total', { upstream: 'slow' }), before + 1);
        assert.equal(resultText(await call('jon', 'slow_echo', { who: 'jon' })), 'done jon', 'another user is not held up');
      } finally {
        held.open();
      }
      assert.deepEqual((await Promise.all(filling)).map(resultText), ['done ivy-0', 'done ivy-1']);
      assert.equal(resultText(await call('ivy', 'slow_echo', { who: 'ivy-after' })), 'done ivy-after', 'the slots are given back');
    });
  });
});
