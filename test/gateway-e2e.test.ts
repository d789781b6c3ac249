// The gateway as a whole, through the broker's own /mcp endpoint (issue 13's proofs): an upstream's
// input_required relayed with its requestState sealed in ours, and a 403 scope challenge answered
// with the incremental-scope elicitation and a repeated call that succeeds with the new token.
// Real parts: the test IdP, the GitHub stand-in, the SDK-built upstream fixture (2026-07-28) and the
// official 2026-07-28 client.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { inputRequired } from '@modelcontextprotocol/server';
import { Browser } from './support/browser.js';
import { connectGitHub, providersFile, standInVerifier } from './support/gateway.js';
import { envelope, modernClient, rawCall, resultText, type ElicitAnswer } from './support/mcp.js';
import { readConnection } from './support/seed.js';
import { completeConnect, startStack, type Stack } from './support/stack.js';
import { startUpstreamServer, type UpstreamServer } from './support/upstream-server.js';

async function closing<T>(client: Client, fn: (client: Client) => Promise<T>): Promise<T> {
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

/** What the fixture's `confirm` asks, exactly as it builds it. */
const CONFIRM_REQUESTS = {
  confirm: inputRequired.elicit({ message: 'Really?', requestedSchema: { type: 'object', properties: {} } }),
};

describe('gateway end to end: relayed input_required and scope challenges through the broker', () => {
  let stack: Stack;
  let github: UpstreamServer;
  let file: { path: string; remove(): void };

  before(async () => {
    github = await startUpstreamServer({ era: 'modern', verify: standInVerifier(() => stack.github) });
    file = providersFile({ upstreams: [{ id: 'github', url: github.url, provider: 'github', scopes: ['repo'] }] });
    stack = await startStack({ holdSeconds: 1, env: { PROVIDERS_FILE: file.path } });
  });
  after(async () => {
    await stack.close();
    await github.close();
    file.remove();
  });

  const first = async (sub: string) => {
    const res = await rawCall(stack.mcpUrl, await stack.token(sub), {
      method: 'tools/call',
      params: { name: 'github_confirm', arguments: {}, _meta: envelope() },
    });
    assert.equal(res.json.result?.resultType, 'input_required', res.text);
    return res.json.result as { inputRequests: Record<string, unknown>; requestState: string };
  };
  const repeat = async (sub: string, requestState: string, inputResponses: Record<string, unknown>) =>
    rawCall(stack.mcpUrl, await stack.token(sub), {
      method: 'tools/call',
      params: { name: 'github_confirm', arguments: {}, requestState, inputResponses, _meta: envelope() },
    });

  it("relays the upstream's inputRequests unchanged and hands it back its own requestState byte-exact with the answer as given: accept, decline, cancel", async () => {
    await connectGitHub(stack, 'rita', 'octocat');
    const answers: ElicitAnswer[] = [{ action: 'accept', content: { note: 'yes «really»' } }, { action: 'decline' }, { action: 'cancel' }];
    for (const answer of answers) {
      const asked = await first('rita');
      assert.deepEqual(asked.inputRequests, CONFIRM_REQUESTS, 'the upstream’s inputRequests, unchanged');
      assert.notEqual(asked.requestState, 'upstream-opaque-state');
      assert.ok(!asked.requestState.includes('upstream-opaque-state'), 'the upstream state is sealed, not readable');
      const done = await repeat('rita', asked.requestState, { confirm: answer });
      assert.equal(done.json.result?.isError, undefined, done.text);
      assert.equal(resultText(done.json.result), `confirmed: ${answer.action}`);
      const received = github.calls('confirm').at(-1)!;
      assert.equal(received.requestState, 'upstream-opaque-state', 'its own state, byte-exact');
      assert.deepEqual(received.inputResponses, { confirm: answer }, 'the answer as given');
      assert.equal(received.who, 'octocat');
    }

    // The official client, answering the relayed form itself.
    const forms: Array<{ message: string; schema: unknown }> = [];
    const client = await modernClient({
      url: stack.mcpUrl,
      token: await stack.token('rita'),
      onForm: async (message, schema) => {
        forms.push({ message, schema });
        return { action: 'accept', content: {} };
      },
    });
    const result = await closing(client, (c) => c.callTool({ name: 'github_confirm', arguments: {} }));
    assert.equal(resultText(result), 'confirmed: accept');
    assert.deepEqual(forms, [{ message: 'Really?', schema: { type: 'object', properties: {} } }]);
    assert.equal(github.calls('confirm').at(-1)!.requestState, 'upstream-opaque-state');
  });

  it('refuses a tampered state and a state replayed by another user with -32602, forwarding neither', async () => {
    await connectGitHub(stack, 'tess', 'octocat');
    await connectGitHub(stack, 'ugo', 'hubot');
    const asked = await first('tess');
    const calls = github.calls('confirm').length;
    const s = asked.requestState;
    const i = Math.floor(s.length / 2);
    const tampered = s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
    const bad = await repeat('tess', tampered, { confirm: { action: 'accept', content: {} } });
    assert.equal(bad.json.error?.code, -32602, bad.text);
    const foreign = await repeat('ugo', asked.requestState, { confirm: { action: 'accept', content: {} } });
    assert.equal(foreign.json.error?.code, -32602, foreign.text);
    assert.equal(github.calls('confirm').length, calls, 'nothing reached the upstream');
    // The owner's state still works.
    const done = await repeat('tess', asked.requestState, { confirm: { action: 'accept', content: {} } });
    assert.equal(resultText(done.json.result), 'confirmed: accept', done.text);
  });

  it('answers a 403 insufficient_scope with the incremental-scope elicitation for exactly the missing scopes; the repeat reaches the upstream with the new token', async () => {
    const old = await connectGitHub(stack, 'sam', 'octocat', { scopes: ['repo'] });
    github.faults.forbiddenScope = 'repo admin:org';
    const browser = new Browser();
    const asked: Array<{ url: string; message: string }> = [];
    try {
      const client = await modernClient({
        url: stack.mcpUrl,
        token: await stack.token('sam'),
        onUrl: async (url, message) => {
          asked.push({ url, message });
          const page = await completeConnect(browser, url, 'sam', { githubLogin: 'octocat' });
          assert.equal(page.status, 200);
          delete github.faults.forbiddenScope;
          return { action: 'accept' };
        },
      });
      const result = await closing(client, (c) => c.callTool({ name: 'github_echo', arguments: { text: 'scoped' } }));
      assert.equal(resultText(result), 'scoped');
      assert.equal(asked.length, 1);
      assert.match(asked[0]!.url, /\/connect\/github\?req=[A-Za-z0-9_-]{43}$/);
      assert.match(asked[0]!.message, /\(admin:org\)/, 'exactly the missing scope');
      assert.doesNotMatch(asked[0]!.message, /\brepo\b.*admin:org|admin:org.*\brepo\b/);
      const scopes = (await readConnection(stack.env, 'sam', 'github'))!.scopes.split(' ');
      assert.ok(scopes.includes('admin:org') && scopes.includes('repo'), scopes.join(' '));
      const calls = github.calls('echo').filter((r) => (r.arguments as { text?: string }).text === 'scoped');
      assert.equal(calls.at(0)!.token, old.accessToken, 'the first try with the old token');
      assert.notEqual(calls.at(-1)!.token, old.accessToken, 'the repeat with the new token');
      assert.equal(calls.at(-1)!.who, 'octocat');
    } finally {
      delete github.faults.forbiddenScope;
    }
  });
});
