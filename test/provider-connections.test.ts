// The broker's calls to providers go through one keep-alive pool (Node's global fetch, which
// openid-client uses too): a busy broker must not open a TCP connection per GitHub call. The
// stand-in counts the connections it accepts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GITHUB_APP, seedExpired } from './support/expiring-tokens.js';
import { envelope, rawCall, resultText } from './support/mcp.js';
import { readConnection, seedGitHubConnection } from './support/seed.js';
import { useStack } from './support/suite.js';

const CALLS = 20;

describe('provider HTTP reuses its connections (keep-alive)', () => {
  const stack = useStack(GITHUB_APP);
  const whoami = async (sub: string) =>
    resultText(
      (
        await rawCall(stack.mcpUrl, await stack.token(sub), {
          method: 'tools/call',
          params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
        })
      ).json?.result,
    );
  const hits = (method: string, path: string) => stack.github.requests.filter((r) => r.method === method && r.path === path).length;

  it(`makes ${CALLS} sequential github_whoami calls to GitHub over at most one new connection`, async () => {
    await seedGitHubConnection(stack, 'pool-kai', 'octocat');
    assert.match(await whoami('pool-kai'), /@octocat/); // the pool has its connection now
    const sockets = stack.github.connectionCount;
    const users = hits('GET', '/api/v3/user');
    for (let i = 0; i < CALLS; i++) assert.match(await whoami('pool-kai'), /@octocat/);
    assert.equal(hits('GET', '/api/v3/user') - users, CALLS, 'every call reached GitHub');
    const opened = stack.github.connectionCount - sockets;
    assert.ok(opened <= 1, `${CALLS} GitHub calls opened ${opened} connections`);
  });

  it(`refreshes through openid-client (${CALLS / 2} token refreshes, each followed by GET /user) over at most one new connection`, async () => {
    const subs = Array.from({ length: CALLS / 2 }, (_, i) => `pool-refresh-${i}`);
    for (const sub of subs) await seedExpired(stack.env, stack.github, sub, 'hubot');
    assert.match(await whoami('pool-kai'), /@octocat/);
    const sockets = stack.github.connectionCount;
    const refreshes = stack.github.refreshCount;
    for (const sub of subs) assert.match(await whoami(sub), /@hubot/);
    assert.equal(stack.github.refreshCount - refreshes, subs.length, 'every call refreshed its token at GitHub');
    assert.ok((await readConnection(stack.env, subs[0]!, 'github'))?.status === 'active');
    const opened = stack.github.connectionCount - sockets;
    assert.ok(opened <= 1, `${subs.length} refreshes and ${subs.length} GET /user opened ${opened} connections`);
  });
});
