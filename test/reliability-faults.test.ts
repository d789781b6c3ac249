// Provider faults: GitHub's token endpoint and REST API misbehave (test/support/github-standin.ts
// `faults`). Each fault must end in something a person or a model can act on — a clear page or a
// clear tool result — with nothing half-stored, no token shown, and a plain way to try again.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Browser, textOf, type Page } from './support/browser.js';
import { rawCall, envelope } from './support/mcp.js';
import {
  GITHUB_TOKEN_SHAPE,
  STACK_TRACE,
  authorizeAtGitHub,
  connectRequest,
  firstCall,
  repeatCall,
  upToGitHub,
  withDb,
  type RawReply,
} from './support/reliability-flow.js';
import { openDatabase } from '../src/store/sqlite/database.js';
import { seedGitHubConnection } from './support/seed.js';
import { completeConnect, heldCalls, type Stack } from './support/stack.js';
import type { StandInFaults } from './support/github-standin.js';
import { useStack } from './support/suite.js';

const ISSUE = { owner: 'octo-org', repo: 'faults' };

function connectionCount(stack: Stack, sub: string): number {
  return withDb(
    stack.env.DATABASE_PATH!,
    (db) => (db.prepare('SELECT COUNT(*) AS n FROM connections WHERE subject = ?').get(sub) as { n: number }).n,
  );
}

function pendingStatuses(stack: Stack, sub: string): string[] {
  return withDb(stack.env.DATABASE_PATH!, (db) =>
    (
      db.prepare('SELECT status FROM pending_connections WHERE subject = ? ORDER BY created_at, rowid').all(sub) as Array<{
        status: string;
      }>
    ).map((r) => r.status),
  );
}

/** A complete tool result (not input_required) of a raw tools/call reply. */
function toolResult(reply: RawReply): { isError?: boolean; text: string; structuredContent?: Record<string, unknown> } {
  assert.equal(reply.status, 200, reply.text);
  const result = reply.json?.result;
  assert.equal(result?.resultType, 'complete', reply.text);
  return { ...result, text: (result.content as Array<{ text?: string }>).map((c) => c.text ?? '').join('\n') };
}

/**
 * The callback page must be an HTML error page with sentences for a person — what happened ("Connection
 * not completed", naming GitHub), that nothing was connected, and to try again — and no stack
 * trace, no token, no authorization code.
 */
function assertClearErrorPage(page: Page, status: number): void {
  assert.equal(page.status, status, textOf(page.html).slice(0, 300));
  assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
  const text = textOf(page.html);
  assert.match(page.html, /<h1>Connection not completed<\/h1>/);
  assert.match(text, /GitHub [^.]{3,120}\./, `a sentence naming GitHub's problem: ${text.slice(0, 400)}`);
  assert.match(text, /Nothing was connected/);
  assert.match(text, /try again/i);
  assert.doesNotMatch(page.html, STACK_TRACE);
  assert.doesNotMatch(page.html, GITHUB_TOKEN_SHAPE);
  const code = new URL(page.url).searchParams.get('code');
  if (code) assert.ok(!page.html.includes(code), 'the authorization code is not echoed');
}

/**
 * After a failed callback: the old link is burnt (410), the callback cannot be replayed (400), the
 * repeated tools/call at once offers a NEW link, and with the fault cleared that link connects and a
 * repeat creates the issue.
 */
async function assertRecovers(
  stack: Stack,
  o: {
    browser: Browser;
    sub: string;
    login: string;
    token: string;
    link: string;
    requestState: string;
    callbackUrl: string;
    args: Record<string, unknown>;
  },
): Promise<void> {
  const reopened = await o.browser.open(o.link);
  assert.equal(reopened.status, 410, 'the pending link cannot start a second authorization');
  assert.match(textOf(reopened.html), /This link was already used/);
  const replay = await o.browser.open(o.callbackUrl);
  assert.equal(replay.status, 400, 'the callback cannot be replayed');
  assert.match(textOf(replay.html), /This authorization response is not valid, has expired or was already used\. Nothing was connected\./);

  const startedAt = Date.now();
  const again = connectRequest(await repeatCall(stack.mcpUrl, o.token, 'github_create_issue', o.args, o.requestState));
  assert.ok(Date.now() - startedAt < 4000, 'a failed flow is not held: the repeat asks again at once');
  assert.notEqual(again.link, o.link, 'a new link, not the burnt one');

  const done = await completeConnect(o.browser, again.link, o.sub, { githubLogin: o.login });
  assert.equal(done.status, 200);
  assert.match(textOf(done.html), new RegExp(`Connected as @${o.login}`));
  const created = toolResult(await repeatCall(stack.mcpUrl, o.token, 'github_create_issue', o.args, again.requestState));
  assert.equal(created.isError, undefined, created.text);
  assert.equal(created.structuredContent?.status, 'created');
  assert.equal(connectionCount(stack, o.sub), 1);
  assert.equal(stack.github.issues.at(-1)?.title, o.args.title);
  assert.equal(stack.github.issues.at(-1)?.author, o.login);
}

function assertCleanLogs(stack: Stack): void {
  for (const line of stack.logs) {
    assert.doesNotMatch(line, GITHUB_TOKEN_SHAPE, 'no GitHub token in the logs');
    assert.doesNotMatch(line, /"level":"error"/, `no error-level log line: ${line}`);
  }
}

describe('GitHub token endpoint faults during the callback (PROVIDER_TIMEOUT_SECONDS=1)', { timeout: 60_000 }, () => {
  const stack = useStack({ holdSeconds: 5, env: { PROVIDER_TIMEOUT_SECONDS: '1' } });

  // What the page must name: GitHub being down / answering badly, or GitHub refusing the code.
  const cases: Array<{ fault: NonNullable<StandInFaults['token']>; says: RegExp }> = [
    {
      fault: 'http500',
      says: /GitHub did not (answer properly|complete the authorization) \(it may be down\)\. Please try again in a moment\./,
    },
    {
      fault: 'timeout',
      says: /GitHub did not (answer properly|complete the authorization|answer in time)[^.]*\. Please try again in a moment\./,
    },
    {
      fault: 'malformed',
      says: /GitHub (did not (answer properly|complete the authorization) \(it may be down\)|sent an unreadable answer)\. Please try again in a moment\./,
    },
    { fault: 'error200', says: /GitHub did not accept the authorization \(it may have expired\)\. Please start again\./ },
  ];
  for (const { fault, says } of cases) {
    it(`ends a token-endpoint "${fault}" in a 502 page saying so, stores nothing, burns the link, and connects on retry once the fault clears`, async () => {
      const sub = `token-${fault}`;
      const login = `gh-${fault}`;
      const token = await stack.token(sub);
      const args = { ...ISSUE, title: `after token fault ${fault}` };
      const issuesBefore = stack.github.issues.length;
      const { link, requestState } = connectRequest(await firstCall(stack.mcpUrl, token, 'github_create_issue', args));
      const browser = new Browser();
      const authorize = await upToGitHub(browser, link, sub);

      stack.github.faults = { token: fault };
      const startedAt = Date.now();
      let page: Page;
      try {
        page = await authorizeAtGitHub(browser, authorize, login);
      } finally {
        stack.github.faults = {};
      }
      const took = Date.now() - startedAt;
      assertClearErrorPage(page, 502);
      assert.match(textOf(page.html), says);
      if (fault === 'timeout') assert.ok(took >= 900 && took < 5000, `gave up after the 1 s provider timeout (took ${took} ms)`);
      assert.equal(connectionCount(stack, sub), 0, 'no connection row');
      assert.deepEqual(pendingStatuses(stack, sub), ['failed'], 'the pending connection is settled as failed');
      assert.equal(stack.github.issues.length, issuesBefore);

      await assertRecovers(stack, { browser, sub, login, token, link, requestState, callbackUrl: page.url, args });
      assert.deepEqual(pendingStatuses(stack, sub), ['failed', 'completed']);
      assertCleanLogs(stack);
    });
  }
});

describe('GitHub API faults during a tool call', { timeout: 60_000 }, () => {
  const stack = useStack({ holdSeconds: 5, env: { PROVIDER_TIMEOUT_SECONDS: '1' } });

  async function connectFully(sub: string, login: string, browser: Browser): Promise<string> {
    const token = await stack.token(sub);
    const { link, requestState } = connectRequest(await firstCall(stack.mcpUrl, token, 'github_whoami', {}));
    const page = await completeConnect(browser, link, sub, { githubLogin: login });
    assert.match(textOf(page.html), new RegExp(`Connected as @${login}`));
    const whoami = toolResult(await repeatCall(stack.mcpUrl, token, 'github_whoami', {}, requestState));
    assert.equal(whoami.structuredContent?.login, login);
    return token;
  }

  const listed = async (token: string) => {
    const reply = await rawCall(stack.mcpUrl, token, {
      id: 3,
      method: 'tools/call',
      params: { name: 'list_connections', arguments: {}, _meta: envelope() },
    });
    return (toolResult(reply).structuredContent!.connections as Array<{ provider: string; login: string }>).map(
      (c) => `${c.provider}:${c.login}`,
    );
  };

  const cases: Array<{ fault: 403 | 429 | 500; issue: RegExp; whoami: RegExp; names: string }> = [
    {
      fault: 403,
      issue: /rate limit was reached while trying to create (an|the) issue in octo-org\/faults; try again in about \d+ s\./,
      whoami: /rate limit was reached .*try again in about \d+ s\./,
      names: 'the rate limit',
    },
    {
      fault: 429,
      issue: /rate limit was reached while trying to create (an|the) issue in octo-org\/faults; try again in about 60 s\./,
      whoami: /rate limit was reached .*try again in about 60 s\./,
      names: 'the rate limit and Retry-After',
    },
    {
      fault: 500,
      issue: /GitHub had a problem \(HTTP 500\) while trying to create (an|the) issue in octo-org\/faults; try again in a moment\./,
      whoami: /GitHub had a problem \(HTTP 500\).*try again in a moment\./,
      names: 'a GitHub problem',
    },
  ];
  for (const { fault, issue, whoami, names } of cases) {
    it(`answers a GitHub API ${fault} with an isError result naming ${names}, keeps the stored connection, and works again once GitHub recovers`, async () => {
      const sub = `api-${fault}`;
      const login = `gh-api-${fault}`;
      const token = await connectFully(sub, login, new Browser());
      const issuesBefore = stack.github.issues.length;
      const args = { ...ISSUE, title: `during api fault ${fault}` };

      stack.github.faults = { api: fault };
      let created: ReturnType<typeof toolResult>;
      let who: ReturnType<typeof toolResult>;
      try {
        created = toolResult(await firstCall(stack.mcpUrl, token, 'github_create_issue', args));
        who = toolResult(await firstCall(stack.mcpUrl, token, 'github_whoami', {}));
      } finally {
        stack.github.faults = {};
      }
      assert.equal(created.isError, true);
      assert.match(created.text, issue);
      assert.equal(who.isError, true);
      assert.match(who.text, whoami);
      for (const text of [created.text, who.text]) {
        assert.doesNotMatch(text, STACK_TRACE);
        assert.doesNotMatch(text, GITHUB_TOKEN_SHAPE);
      }
      assert.equal(stack.github.issues.length, issuesBefore, 'no issue was created');

      assert.equal(connectionCount(stack, sub), 1, 'the stored connection is not deleted');
      assert.deepEqual(await listed(token), [`github:${login}`], 'list_connections still lists it');
      const retried = toolResult(await firstCall(stack.mcpUrl, token, 'github_create_issue', args));
      assert.equal(retried.isError, undefined, retried.text);
      assert.equal(retried.structuredContent?.status, 'created', 'once the fault clears the same connection works without reconnecting');
      assert.equal(stack.github.issues.at(-1)?.author, login);
      assertCleanLogs(stack);
    });
  }

  it('answers a GitHub API 401 by naming reconnect (isError, or a URL elicitation to reconnect), never deletes the row, and a completed reconnect makes the call act', async () => {
    const sub = 'api-401';
    const login = 'gh-api-401';
    const browser = new Browser();
    const token = await connectFully(sub, login, browser);
    const issuesBefore = stack.github.issues.length;
    const args = { ...ISSUE, title: 'during api fault 401' };

    stack.github.faults = { api: 401 };
    let reply: RawReply;
    try {
      reply = await firstCall(stack.mcpUrl, token, 'github_create_issue', args);
    } finally {
      stack.github.faults = {};
    }
    assert.equal(reply.status, 200, reply.text);
    assert.doesNotMatch(reply.text, STACK_TRACE);
    assert.doesNotMatch(reply.text, GITHUB_TOKEN_SHAPE);
    assert.equal(stack.github.issues.length, issuesBefore, 'no issue was created');
    assert.equal(connectionCount(stack, sub), 1, 'a rejected token does not delete the stored connection');

    if (reply.json.result.resultType === 'input_required') {
      const { link, requestState } = connectRequest(reply);
      assert.match(reply.json.result.inputRequests.connect_account.params.message, /reconnect/i);
      const page = await completeConnect(browser, link, sub, { githubLogin: login });
      assert.match(textOf(page.html), new RegExp(`Connected as @${login}`));
      const created = toolResult(await repeatCall(stack.mcpUrl, token, 'github_create_issue', args, requestState));
      assert.equal(created.isError, undefined, created.text);
      assert.equal(created.structuredContent?.status, 'created');
      assert.equal(stack.github.issues.at(-1)?.author, login);
    } else {
      const result = toolResult(reply);
      assert.equal(result.isError, true);
      assert.match(result.text, /reconnect/i);
    }
    assertCleanLogs(stack);
  });
});

describe('a GitHub API fault at /user right after the token exchange', { timeout: 60_000 }, () => {
  const stack = useStack({ holdSeconds: 5, env: { PROVIDER_TIMEOUT_SECONDS: '1' } });

  for (const fault of [401, 403, 429, 500] as const) {
    it(`ends a ${fault} from GET /user in a 502 page saying GitHub failed, stores nothing, and connects on retry once the fault clears`, async () => {
      const sub = `user-${fault}`;
      const login = `gh-user-${fault}`;
      const token = await stack.token(sub);
      const args = { ...ISSUE, title: `after /user fault ${fault}` };
      const { link, requestState } = connectRequest(await firstCall(stack.mcpUrl, token, 'github_create_issue', args));
      const browser = new Browser();
      const authorize = await upToGitHub(browser, link, sub);

      stack.github.faults = { api: fault };
      let page: Page;
      try {
        page = await authorizeAtGitHub(browser, authorize, login);
      } finally {
        stack.github.faults = {};
      }
      assertClearErrorPage(page, 502);
      assert.equal(connectionCount(stack, sub), 0, 'no connection row');
      assert.deepEqual(pendingStatuses(stack, sub), ['failed']);

      await assertRecovers(stack, { browser, sub, login, token, link, requestState, callbackUrl: page.url, args });
      assertCleanLogs(stack);
    });
  }
});

describe('a settlement the held repeat never hears about', { timeout: 60_000 }, () => {
  const stack = useStack({ holdSeconds: 2 });

  it('lets the store decide at the end of the hold: a completed flow acts instead of handing out a new link', async () => {
    const token = await stack.token('mira');
    const args = { ...ISSUE, title: 'settled out of sight' };
    const { requestState } = connectRequest(await firstCall(stack.mcpUrl, token, 'github_create_issue', args));
    const repeat = repeatCall(stack.mcpUrl, token, 'github_create_issue', args, requestState);
    await heldCalls(stack);
    // Another instance finished the flow, stamped by a clock a minute behind, and its NOTIFY (if
    // any) was lost: no poll of "settled since" ever sees it.
    await seedGitHubConnection(stack, 'mira', 'octocat');
    const db = openDatabase(stack.env.DATABASE_PATH!);
    try {
      assert.equal(
        db.prepare("UPDATE pending_connections SET status = 'completed', updated_at = ? WHERE subject = 'mira'").run(Date.now() - 60_000)
          .changes,
        1,
      );
    } finally {
      db.close();
    }
    const result = toolResult(await repeat);
    assert.equal(result.structuredContent?.status, 'created', result.text);
    assert.equal(stack.github.issues.filter((i) => i.title === args.title).length, 1);
  });
});
