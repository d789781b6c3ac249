import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GITHUB_APP } from './support/expiring-tokens.js';
import { comparable, connectGitHub, foreignMeta, useGateway } from './support/gateway.js';
import { closing, envelope, legacyClient, rawCall, resultText } from './support/mcp.js';
import { clientAs } from './support/suite.js';
import { readConnection } from './support/seed.js';
import { allContentResult } from './support/upstream-server.js';
import { JWT_IN_CLEAR } from './support/token-checks.js';

describe('gateway: 2025-11-25 upstream sessions, mid-call elicitation, and a 401 from the upstream (GitHub App tokens)', () => {
  const {
    stack,
    servers: { legacy, modern },
  } = useGateway(
    { legacy: { era: 'legacy', entry: { provider: 'github' } }, modern: { era: 'modern', entry: { provider: 'github' } } },
    { ...GITHUB_APP, holdSeconds: 1 },
  );

  const call = async (sub: string, name: string, args: Record<string, unknown> = {}, meta?: Record<string, unknown>) => {
    const client = await clientAs(stack, sub);
    return closing(client, (c) => c.callTool({ name, arguments: args, ...(meta ? { _meta: meta } : {}) }));
  };
  const initializes = (who: string) => legacy.requests.filter((r) => r.method === 'initialize' && r.who === who);

  it('initializes a 2025-11-25 upstream once per (principal, upstream) and sends its Mcp-Session-Id on every call', async () => {
    await connectGitHub(stack, 'alice', 'octocat');
    await connectGitHub(stack, 'bob', 'hubot');
    for (let i = 0; i < 3; i++) assert.equal(resultText(await call('alice', 'legacy_echo', { text: `a${i}` })), `a${i}`);
    assert.equal(resultText(await call('bob', 'legacy_echo', { text: 'b' })), 'b');
    // A 2025-11-25 client of the broker reaches it the same way.
    const old = await legacyClient({ url: stack.mcpUrl, token: await stack.token('alice') });
    assert.equal(resultText(await closing(old, (c) => c.callTool({ name: 'legacy_echo', arguments: { text: 'a-old' } }))), 'a-old');

    assert.equal(initializes('octocat').length, 1, "one handshake for alice's calls");
    assert.equal(initializes('hubot').length, 1, 'one for bob');
    const aliceCalls = legacy.calls('echo').filter((r) => r.who === 'octocat');
    const bobCalls = legacy.calls('echo').filter((r) => r.who === 'hubot');
    assert.equal(aliceCalls.length, 4);
    assert.equal(new Set(aliceCalls.map((r) => r.sessionId)).size, 1, "every call of alice's carries her one session");
    assert.ok(aliceCalls[0]!.sessionId && legacy.sessions.has(aliceCalls[0]!.sessionId));
    assert.notEqual(bobCalls[0]!.sessionId, aliceCalls[0]!.sessionId, 'bob has a session of his own');
    assert.ok(aliceCalls.every((r) => r.headers['mcp-protocol-version'] === '2025-11-25'));
    assert.ok(
      legacy.requests.every((r) => !Object.values(r.headers).some((v) => JWT_IN_CLEAR.test(v))),
      'no JWT (the MCP access tokens are JWTs) in any header the upstream got',
    );
    assert.ok(
      legacy.requests.every((r) => r.token === undefined || /^gh[ou]_/.test(r.token)),
      'only GitHub tokens as Bearer',
    );
  });

  it('re-establishes the session on a restarted broker instance, and when the upstream has forgotten it (404)', async () => {
    await connectGitHub(stack, 'carol', 'monalisa');
    await call('carol', 'legacy_echo', { text: '1' });
    const first = legacy.calls('echo').at(-1)!.sessionId;
    await stack.restart();
    assert.equal(resultText(await call('carol', 'legacy_echo', { text: '2' })), '2');
    const second = legacy.calls('echo').at(-1)!.sessionId;
    assert.notEqual(second, first, 'an instance that lacks the session makes its own');
    assert.equal(initializes('monalisa').length, 2);

    legacy.dropSessions();
    assert.equal(resultText(await call('carol', 'legacy_echo', { text: '3' })), '3', 'the call itself succeeds');
    const third = legacy.calls('echo').at(-1)!.sessionId;
    assert.ok(third && third !== second && legacy.sessions.has(third));
    assert.equal(initializes('monalisa').length, 3, 'one new handshake after the 404');
  });

  it('passes results of a 2025-11-25 upstream through unchanged', async () => {
    await connectGitHub(stack, 'dave', 'octocat');
    const result = await call('dave', 'legacy_all_content', {}, { 'acme.example/request': 'r-9' });
    const sent = legacy.calls('all_content').at(-1)!;
    assert.equal(sent.meta?.['acme.example/request'], 'r-9');
    assert.deepEqual(
      comparable(result as Record<string, unknown>),
      comparable(allContentResult(foreignMeta(sent.meta)) as unknown as Record<string, unknown>),
    );
  });

  it('declines a mid-call elicitation/create of a 2025-11-25 upstream and answers with a clear tool error', async () => {
    await connectGitHub(stack, 'erin', 'octocat');
    const before = legacy.requests.length;
    const result = await call('erin', 'legacy_ask');
    assert.equal(result.isError, true);
    assert.match(resultText(result), /"legacy" asked for input mid-call, which this broker cannot relay to your client yet/);
    const answered = legacy.requests.slice(before).filter((r) => r.method === 'response');
    assert.equal(answered.length, 1, 'the upstream got an answer to its elicitation/create (decline)');
  });

  it('answers a 401 after rotation with one single-flight refresh and one retry with the new token', async () => {
    const { accessToken: old } = await connectGitHub(stack, 'frank', 'frank-gh', { expiresAt: Date.now() + 3_600_000 });
    stack.github.expireAccessTokens('frank-gh'); // GitHub no longer takes it, though the broker thinks it is fresh
    const refreshesBefore = stack.github.refreshCount;
    const results = await Promise.all([1, 2, 3].map((i) => call('frank', 'modern_echo', { text: `f${i}` })));
    assert.deepEqual(
      results.map((r) => resultText(r)),
      ['f1', 'f2', 'f3'],
    );
    assert.equal(stack.github.refreshCount - refreshesBefore, 1, 'one refresh for three concurrent 401s');
    const tokens = modern.calls('echo').filter((r) => (r.arguments as { text?: string }).text?.startsWith('f'));
    const retried = tokens.filter((r) => r.who === 'frank-gh');
    assert.equal(retried.length, 3, 'each call retried once, accepted');
    assert.ok(
      retried.every((r) => r.token !== old),
      'with the new token',
    );
    assert.ok(
      modern.requests.some((r) => r.token === old && r.who === undefined),
      'after the old one was refused',
    );
    assert.equal((await readConnection(stack.env, 'frank', 'github'))?.status, 'active');
  });

  it('asks to reconnect when the upstream still answers 401 after the refresh and GitHub refuses the token too, marking the connection reauth_required', async () => {
    await connectGitHub(stack, 'gina', 'gina-gh', { expiresAt: Date.now() + 3_600_000 });
    const refreshesBefore = stack.github.refreshCount;
    modern.faults.unauthorized = true;
    stack.github.faults = { api: 401 };
    try {
      const r = await rawCall(stack.mcpUrl, await stack.token('gina'), {
        method: 'tools/call',
        params: { name: 'modern_echo', arguments: { text: 'g' }, _meta: envelope() },
      });
      assert.equal(r.json.result?.resultType, 'input_required', r.text);
      const ask = r.json.result.inputRequests.connect_account.params;
      assert.equal(ask.mode, 'url');
      assert.match(ask.message, /no longer accepts the saved connection/);
      assert.match(ask.url, /\/connect\/github\?req=/);
    } finally {
      delete modern.faults.unauthorized;
      stack.github.faults = {};
    }
    assert.equal(stack.github.refreshCount - refreshesBefore, 1, 'one refresh was tried first');
    const row = await readConnection(stack.env, 'gina', 'github');
    assert.equal(row?.status, 'reauth_required');
    assert.equal(row?.status_reason, 'upstream_401');
    // The rows are written after the answer: wait for them, not for a guess.
    await stack.broker.broker.forwardedCallsAudited();
    const audit = await stack.broker.broker.store.audit.list({ subject: 'gina', event: 'upstream_call' });
    assert.deepEqual(
      audit.map((a) => a.detail?.replace(/ms=\d+/, 'ms=N')),
      ['tool=echo outcome=unauthorized ms=N'],
    );
  });
});
