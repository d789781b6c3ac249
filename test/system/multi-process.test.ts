import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Browser, textOf, type Page } from '../support/browser.js';
import { eventually, logged } from '../support/eventually.js';
import { freePort } from '../support/idp.js';
import { envelope, rawCall } from '../support/mcp.js';
import { PinnedBrowser, startMultiStack, useMultiStack, type MultiStack, type SpawnedBroker } from '../support/multi.js';
import { connectRequest } from '../support/reliability-flow.js';
import { completeConnect } from '../support/stack.js';
import { assertFirstIssueCreated } from '../support/github-checks.js';
import { connectsIn, recordingClient } from '../support/recording-client.js';

const ISSUE_ARGS = { owner: 'octo-org', repo: 'hello', title: 'Filed across processes' };
/** What a GitHub token issued by the stand-in looks like; none may ever show up outside the broker's DB. */
const GITHUB_TOKEN_SHAPE = /gh[opsur]_[A-Za-z0-9]{20,}/;

type RawReply = Awaited<ReturnType<typeof rawCall>>;

/** First leg of a tools/call the way a 2026-07-28 client with `elicitation.url` sends it. */
function firstCall(broker: SpawnedBroker, token: string, name: string, args: Record<string, unknown>): Promise<RawReply> {
  return rawCall(`${broker.url}/mcp`, token, { id: 1, method: 'tools/call', params: { name, arguments: args, _meta: envelope() } });
}

/** The repeated tools/call: new id, same name and arguments, the accepted elicitation and the echoed requestState. */
function repeatCall(
  broker: SpawnedBroker,
  token: string,
  name: string,
  args: Record<string, unknown>,
  requestState: string,
): Promise<RawReply> {
  return rawCall(`${broker.url}/mcp`, token, {
    id: 2,
    method: 'tools/call',
    params: { name, arguments: args, inputResponses: { connect_account: { action: 'accept' } }, requestState, _meta: envelope() },
  });
}

/** `GET http://host:port/path` entries of a browser's history that hit `origin`. */
function hitsOn(browser: Browser, origin: string): string[] {
  return browser.requests.filter((r) => r.split(' ')[1]!.startsWith(`${origin}/`));
}

function count(haystack: string, needle: string): number {
  return haystack.split(needle).length - 1;
}

/** Signs in and consents on the connect page, stopping at GitHub's authorize form. */
async function upToGitHub(browser: Browser, link: string, user: string): Promise<Page> {
  let page = await browser.open(link);
  if (/Development sign-in/.test(page.html)) page = await browser.submit(page, { fields: { login: user } });
  assert.equal(page.status, 200, textOf(page.html));
  page = await browser.submit(page, { button: 'allow' });
  assert.match(page.html, /GitHub stand-in/);
  return page;
}

describe('two broker processes sharing one database behind one PUBLIC_URL', () => {
  let stack: MultiStack;
  let a: SpawnedBroker;
  let b: SpawnedBroker;

  before(async () => {
    stack = await startMultiStack({ holdSeconds: 5 });
    const portB = await freePort();
    [a, b] = await Promise.all([stack.spawn(), stack.spawn(portB)]);
    assert.equal(a.url, stack.publicUrl);
    assert.notEqual(b.url, a.url);
  });
  after(() => stack.close());

  it('completes on process B a link minted by process A, and the repeat on B creates the issue', async () => {
    const token = await stack.token('alice');
    const { link, requestState } = connectRequest(await firstCall(a, token, 'github_create_issue', ISSUE_ARGS));
    const url = new URL(link);
    assert.equal(url.origin, stack.publicUrl, 'links carry PUBLIC_URL whichever process made them');
    assert.equal(url.pathname, '/connect/github');

    const browser = new PinnedBrowser(stack.publicUrl, b.url);
    const finalPage = await completeConnect(browser, link, 'alice');
    assert.equal(finalPage.status, 200);
    assert.match(textOf(finalPage.html), /Connected as @octocat/);
    assert.deepEqual(hitsOn(browser, a.url), [], 'the browser never reached process A');
    const onB = hitsOn(browser, b.url);
    assert.ok(onB.includes(`GET ${b.url}/auth/callback`), 'sign-in callback handled by B');
    assert.ok(onB.includes(`POST ${b.url}/connect/github`), 'consent handled by B');
    assert.ok(onB.includes(`GET ${b.url}/connect/github/callback`), 'GitHub callback handled by B');
    assert.equal(count(b.output(), '"event":"connection_created"'), 1);
    assert.equal(count(a.output(), '"event":"connection_created"'), 0);

    const reply = await repeatCall(b, token, 'github_create_issue', ISSUE_ARGS, requestState);
    assert.equal(reply.status, 200);
    assert.equal(reply.json.result.resultType, 'complete', reply.text);
    assert.equal(reply.json.result.isError, undefined);
    assertFirstIssueCreated(stack.github, reply.json.result.structuredContent);

    for (const text of [reply.text, a.output(), b.output(), finalPage.html, ...browser.requests]) {
      assert.doesNotMatch(text, GITHUB_TOKEN_SHAPE, 'no GitHub token outside the store');
      assert.ok(!text.includes(token), 'the MCP access token is never echoed or logged');
    }
  });

  it('answers a repeat held on process A within a second of the GitHub callback landing on process B', async () => {
    const token = await stack.token('bob');
    const args = { ...ISSUE_ARGS, title: 'Held on A, woken by B' };
    const { link, requestState } = connectRequest(await firstCall(a, token, 'github_create_issue', args));
    const browser = new PinnedBrowser(stack.publicUrl, b.url);
    const authorize = await upToGitHub(browser, link, 'bob');

    const heldSince = Date.now();
    let answeredAt = 0;
    const heldBefore = logged(a.output(), 'repeat_held');
    const held = repeatCall(a, token, 'github_create_issue', args, requestState).then((r) => {
      answeredAt = Date.now();
      return r;
    });
    await eventually('A to hold the repeat', () => logged(a.output(), 'repeat_held') > heldBefore);
    assert.equal(answeredAt, 0, 'the repeat is held while the user is still at GitHub');

    const callbackStartedAt = Date.now();
    const connected = await browser.submit(authorize, { button: 'authorize', fields: { login: 'hubot' } });
    const callbackDoneAt = Date.now();
    assert.equal(connected.status, 200);
    assert.match(textOf(connected.html), /Connected as @hubot/);
    assert.deepEqual(hitsOn(browser, a.url), [], 'the callback landed on B, not A');

    const reply = await held;
    assert.ok(answeredAt >= callbackStartedAt, 'not answered before the callback');
    assert.ok(answeredAt - callbackDoneAt < 1000, `A answered ${answeredAt - callbackDoneAt} ms after B's callback (want < 1000)`);
    assert.ok(answeredAt - heldSince < 5000, 'woken by the callback, not by the end of the hold');
    assert.equal(reply.json.result.resultType, 'complete', reply.text);
    assert.deepEqual(reply.json.result.structuredContent, {
      status: 'created',
      number: 2,
      url: `${stack.github.webUrl}/octo-org/hello/issues/2`,
      repository: 'octo-org/hello',
    });
    assert.equal(stack.github.issues.at(-1)!.author, 'hubot');
    assert.equal(count(b.output(), '"event":"connection_created"'), 2);
    assert.equal(count(a.output(), '"event":"connection_created"'), 0);
    assert.doesNotMatch(reply.text, GITHUB_TOKEN_SHAPE);
    assert.doesNotMatch(a.output() + b.output(), GITHUB_TOKEN_SHAPE);
  });
});

describe('restarting a broker process', () => {
  const stack = useMultiStack({ holdSeconds: 2 });

  it('keeps every connection across a SIGTERM restart: github_whoami on the new process needs no new elicitation', async () => {
    const first = await stack.spawn();
    const token = await stack.token('alice');
    const connecting = await recordingClient(first.url, token, connectsIn(new Browser(), 'alice'));
    const connected = await connecting.client.callTool({ name: 'github_whoami', arguments: {} });
    await connecting.client.close();
    assert.equal(connecting.elicited.length, 1, 'connecting took exactly one elicitation');
    assert.deepEqual(connected.structuredContent, { status: 'connected', login: 'octocat', id: '583231' });

    const code = await first.stop('SIGTERM');
    assert.equal(code, 0);
    assert.match(first.output(), /"event":"shutting_down","signal":"SIGTERM"/);
    assert.doesNotMatch(first.output(), /shutdown_failed/);

    const second = await stack.spawn();
    assert.equal(second.url, first.url);
    const again = await recordingClient(second.url, await stack.token('alice'));
    const result = await again.client.callTool({ name: 'github_whoami', arguments: {} });
    await again.client.close();
    assert.deepEqual(again.elicited, [], 'no elicitation after the restart');
    assert.equal(result.isError, undefined);
    assert.deepEqual(result.structuredContent, { status: 'connected', login: 'octocat', id: '583231' });
    assert.doesNotMatch(first.output() + second.output(), GITHUB_TOKEN_SHAPE);
  });
});

describe('stopping a process while a repeat is held', () => {
  const stack = useMultiStack({ holdSeconds: 20 });

  it('exits with code 0 within a few seconds of SIGTERM while a repeated tools/call is being held', async () => {
    const broker = await stack.spawn();
    const token = await stack.token('carol');
    const { requestState } = connectRequest(await firstCall(broker, token, 'github_whoami', {}));
    let settledAt = 0;
    const held = repeatCall(broker, token, 'github_whoami', {}, requestState).then(
      (r) => ((settledAt = Date.now()), r),
      (err: unknown) => ((settledAt = Date.now()), err),
    );
    await eventually('the broker to hold the repeat', () => logged(broker.output(), 'repeat_held') > 0);
    assert.equal(settledAt, 0, 'the repeat is being held');

    const signalledAt = Date.now();
    const code = await broker.stop('SIGTERM');
    const exitedAt = Date.now();
    await held;
    assert.equal(code, 0);
    assert.ok(exitedAt - signalledAt < 5000, `exited ${exitedAt - signalledAt} ms after SIGTERM (want < 5000; the hold is 20 s)`);
    assert.ok(settledAt > 0 && settledAt - signalledAt < 5000, 'the held call did not outlive the process');
    assert.match(broker.output(), /"event":"shutting_down","signal":"SIGTERM"/);
    assert.doesNotMatch(broker.output(), /shutdown_failed|Error:| {4}at /);
  });
});
