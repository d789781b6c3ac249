// Issue 12 § Proof, end to end: the real broker (test/support/stack.ts) with the example issue
// service declared in `services:`, the example on its own loopback port and audience, and the
// official SDK client in both eras calling its `create_issue`. The user connects through the
// broker's own pages; the example creates the issue at the GitHub stand-in with the exchanged
// token; no message the client receives ever carries that token.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport, UrlElicitationRequiredError } from '@modelcontextprotocol/client';
import { Browser } from './support/browser.js';
import { readConnection } from './support/seed.js';
import { resultText } from './support/mcp.js';
import { completeConnect, type Stack } from './support/stack.js';
import { startIssueServiceStack, type IssueServiceStack } from './support/issue-service-stack.js';

const ARGS = { owner: 'octo-org', repo: 'hello', title: 'Filed through the broker' };

type Answer = { action: 'accept' | 'decline' | 'cancel' };

describe('the example issue service against the real broker, end to end', () => {
  let stack: Stack;
  let audience: string;
  let world: IssueServiceStack | undefined;
  /** Every body the clients received from the example service, to scan for tokens. */
  const received: string[] = [];

  const recordingFetch: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const copy = res.clone();
    received.push('');
    const slot = received.length - 1;
    void copy.text().then(
      (t) => (received[slot] = t),
      () => undefined,
    );
    return res;
  };

  async function client(sub: string, era: 'modern' | 'legacy', onUrl?: (url: string) => Promise<Answer>): Promise<Client> {
    const token = await stack.token(sub, { aud: audience });
    const c = new Client(
      { name: `e2e-${era}`, version: '1.0.0' },
      { capabilities: { elicitation: { url: {} } }, ...(era === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {}) },
    );
    c.setRequestHandler('elicitation/create', async (request) => {
      const params = request.params as { mode?: string; url?: string };
      if (params.mode === 'url' && onUrl) return onUrl(params.url!);
      return { action: 'decline' as const };
    });
    await c.connect(
      new StreamableHTTPClientTransport(new URL(audience), { authProvider: { token: async () => token }, fetch: recordingFetch }),
    );
    return c;
  }

  const connection = (sub: string) => readConnection(stack.env, sub, 'github');

  before(async () => {
    world = await startIssueServiceStack('issue-service-e2e-');
    ({ stack, audience } = world);
  });
  after(async () => {
    await world?.close();
  });

  /** After the client closed: nothing it received holds a GitHub token (access or refresh). */
  async function assertNoTokenReached(): Promise<void> {
    await new Promise((r) => setTimeout(r, 50));
    const all = received.join('\n');
    assert.ok(all.length > 0, 'the recorder saw the traffic');
    assert.doesNotMatch(all, /gh[uopr]_[A-Za-z0-9]/, 'no GitHub token shape in any message the client received');
    assert.doesNotMatch(all, /access_token|refresh_token/);
  }

  it('2026-07-28: input_required with the broker link → sign in and connect → the repeat creates the issue as that user', async () => {
    const issues = stack.github.issues.length;
    const seen: string[] = [];
    const browser = new Browser();
    const c = await client('alice', 'modern', async (url) => {
      seen.push(url);
      assert.equal(new URL(url).origin, stack.publicUrl, 'the connect link is on the broker origin');
      assert.match(new URL(url).pathname, /^\/connect\/github$/);
      const page = await completeConnect(browser, url, 'alice', { githubLogin: 'octocat' });
      assert.equal(page.status, 200, page.html);
      return { action: 'accept' };
    });
    const result = await c.callTool({ name: 'create_issue', arguments: ARGS });
    await c.close();
    assert.equal(seen.length, 1, 'one URL elicitation');
    assert.equal(result.isError, undefined, resultText(result));
    assert.match(resultText(result), /Created octo-org\/hello#\d+ as octocat/);
    assert.equal(stack.github.issues.length, issues + 1);
    const issue = stack.github.issues.at(-1)!;
    assert.equal(issue.author, 'octocat', "created with alice's GitHub token");
    assert.equal(issue.title, ARGS.title);
    assert.ok(await connection('alice'), 'alice has a connection at the broker');
    await assertNoTokenReached();
  });

  it('2026-07-28, connected already: no elicitation, the issue is created at once', async () => {
    const issues = stack.github.issues.length;
    const c = await client('alice', 'modern', async () => assert.fail('no elicitation for a connected user'));
    const result = await c.callTool({ name: 'create_issue', arguments: { ...ARGS, title: 'Second one' } });
    await c.close();
    assert.equal(result.isError, undefined, resultText(result));
    assert.equal(stack.github.issues.length, issues + 1);
    await assertNoTokenReached();
  });

  it('a second user gets their own connection and their own GitHub identity', async () => {
    const browser = new Browser();
    const c = await client('bob', 'modern', async (url) => {
      await completeConnect(browser, url, 'bob', { githubLogin: 'hubot' });
      return { action: 'accept' };
    });
    const result = await c.callTool({ name: 'create_issue', arguments: ARGS });
    await c.close();
    assert.equal(result.isError, undefined, resultText(result));
    assert.match(resultText(result), /as hubot/);
    assert.equal(stack.github.issues.at(-1)!.author, 'hubot');
    await assertNoTokenReached();
  });

  it('decline: a "nothing was done" result, no connection, no issue', async () => {
    const issues = stack.github.issues.length;
    const c = await client('carol', 'modern', async () => ({ action: 'decline' }));
    const result = await c.callTool({ name: 'create_issue', arguments: ARGS });
    await c.close();
    assert.equal(result.isError, undefined);
    assert.match(resultText(result), /nothing was done/);
    assert.equal(stack.github.issues.length, issues);
    assert.equal(await connection('carol'), undefined);
  });

  it('2025-11-25: -32042 with the broker link → connect → the plain repeat creates the issue', async () => {
    const issues = stack.github.issues.length;
    const c = await client('dora', 'legacy');
    let link = '';
    await assert.rejects(c.callTool({ name: 'create_issue', arguments: ARGS }), (err: unknown) => {
      assert.ok(err instanceof UrlElicitationRequiredError);
      assert.equal(err.code, -32042);
      link = err.elicitations[0]!.url;
      return true;
    });
    assert.equal(new URL(link).origin, stack.publicUrl);
    const page = await completeConnect(new Browser(), link, 'dora', { githubLogin: 'octocat' });
    assert.equal(page.status, 200, page.html);
    const result = await c.callTool({ name: 'create_issue', arguments: ARGS });
    await c.close();
    assert.equal(result.isError, undefined, resultText(result));
    assert.equal(stack.github.issues.length, issues + 1);
    assert.equal(stack.github.issues.at(-1)!.author, 'octocat');
    await assertNoTokenReached();
  });
});
