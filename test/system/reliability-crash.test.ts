// Crash safety: the broker process is SIGKILLed while 50 users' GitHub callbacks are in flight,
// then started again on the same SQLite file. Whoever saw "Connected" stays connected, the file is
// intact, and nobody is left stuck by a half-finished flow.
//
// The broker runs as a child process (test/support/multi.ts); its GitHub traffic goes through a
// proxy that delays the token exchange and the profile call by a seeded pseudo-random 40–640 ms,
// so that when the 12th connection is logged most of the others are still between "callback
// received" and "connection saved". The kill is triggered by that log line, not by a timer.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Browser, textOf, type Page } from '../support/browser.js';
import { resultText } from '../support/mcp.js';
import { startMultiStack, type MultiStack, type SpawnedBroker } from '../support/multi.js';
import {
  GITHUB_TOKEN_SHAPE,
  assertAllFulfilled,
  authorizeAtGitHub,
  connectRequest,
  connectedSubjects,
  firstCall,
  integrityCheck,
  mapLimit,
  repeatCall,
  upToGitHub,
  withDb,
} from '../support/reliability-flow.js';
import { startDelayProxy, type DelayProxy } from '../support/reliability-net.js';
import { completeConnect } from '../support/stack.js';
import { connectsIn, recordingClient } from '../support/recording-client.js';

const USERS = 50;
const KILL_AFTER_CONNECTIONS = 12;
const SEED = 0x5eed_c4a5;

/** mulberry32: a tiny seeded PRNG, so the delays (and so the interleaving) are repeatable. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface User {
  sub: string;
  login: string;
  browser: Browser;
  link: string;
  requestState: string;
  /** The callback page showed "Connected as @login". */
  shownConnected: boolean;
  /** What the browser got from the callback (a page, or the network error). */
  outcome: string;
}

const count = (haystack: string, needle: string) => haystack.split(needle).length - 1;

describe(
  `SIGKILL of the broker while ${USERS} users are completing their GitHub callbacks (delay seed ${SEED.toString(16)})`,
  { timeout: 120_000 },
  () => {
    let stack: MultiStack;
    let proxy: DelayProxy;
    let first: SpawnedBroker;
    let second: SpawnedBroker;
    const users: User[] = [];
    let githubEnv: Record<string, string>;

    before(
      async () => {
        stack = await startMultiStack({ holdSeconds: 1 });
        const random = prng(SEED);
        proxy = await startDelayProxy(stack.github.webUrl, (method, path) =>
          (method === 'POST' && path.startsWith('/login/oauth/access_token')) || path.startsWith('/api/v3/user')
            ? 40 + Math.floor(random() * 600)
            : 0,
        );
        githubEnv = { GITHUB_WEB_URL: proxy.url, GITHUB_API_URL: `${proxy.url}/api/v3` };
        first = await stack.spawn(undefined, githubEnv);

        // Every user asks for a tool, gets a link, signs in, consents, and waits at GitHub's authorize form.
        const prepared = await mapLimit(
          Array.from({ length: USERS }, (_, i) => i),
          10,
          async (i) => {
            const sub = `crash-user-${String(i).padStart(2, '0')}`;
            const login = `gh-crash-${i}`;
            const token = await stack.token(sub);
            const { link, requestState } = connectRequest(await firstCall(`${first.url}/mcp`, token, 'github_whoami', {}));
            const browser = new Browser();
            const authorize = await upToGitHub(browser, link, sub);
            const user: User = { sub, login, browser, link, requestState, shownConnected: false, outcome: '' };
            return { user, authorize };
          },
        );

        // All 50 click Authorize at once; the 12th "connection_created" line pulls the plug.
        let killed: Promise<number | null> | undefined;
        const kill = () => (killed ??= first.stop('SIGKILL'));
        first.child.stdout!.on('data', () => {
          if (count(first.output(), '"event":"connection_created"') >= KILL_AFTER_CONNECTIONS) void kill();
        });
        await Promise.all(
          prepared.map(async ({ user, authorize }) => {
            users.push(user);
            let page: Page;
            try {
              page = await authorizeAtGitHub(user.browser, authorize, user.login);
            } catch (err) {
              user.outcome = `network error: ${err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err)}`;
              return;
            }
            user.shownConnected = page.status === 200 && textOf(page.html).includes(`Connected as @${user.login}`);
            user.outcome = `${page.status} ${textOf(page.html).slice(0, 120)}`;
          }),
        );
        await kill();
        assert.equal(first.child.signalCode, 'SIGKILL', 'the first broker died by SIGKILL');
      },
      { timeout: 60_000 },
    );

    after(async () => {
      await stack?.close();
      await proxy?.close();
    });

    it('kills the broker mid-flight: some users saw "Connected", the callbacks of the others died with the process', (t) => {
      const shown = users.filter((u) => u.shownConnected).length;
      t.diagnostic(`${shown} of ${USERS} users saw "Connected" before the SIGKILL`);
      assert.equal(users.length, USERS);
      assert.ok(shown >= 1, `at least one user saw "Connected" before the kill (outcomes: ${users.map((u) => u.outcome).join(' | ')})`);
      assert.ok(shown < USERS, 'at least one callback was still in flight when the process was killed');
      for (const u of users.filter((x) => !x.shownConnected)) {
        assert.match(u.outcome, /^network error/, `${u.sub} either saw "Connected" or lost the connection to the killed process`);
      }
    });

    it('leaves a database that passes PRAGMA integrity_check, with every saved connection matched by a completed link and vice versa', () => {
      const path = stack.envFor().DATABASE_PATH!;
      assert.equal(integrityCheck(path), 'ok');
      const { completed, open } = withDb(path, (db) => ({
        completed: (
          db.prepare("SELECT subject FROM pending_connections WHERE status = 'completed' ORDER BY subject").all() as Array<{
            subject: string;
          }>
        ).map((r) => r.subject),
        open: (db.prepare("SELECT COUNT(*) AS n FROM pending_connections WHERE status = 'open'").get() as { n: number }).n,
      }));
      const connected = connectedSubjects(path);
      assert.deepEqual(connected, completed, 'a connection row and its settled link land together or not at all');
      assert.equal(open, 0, 'every link had been claimed before the kill');
      for (const u of users.filter((x) => x.shownConnected))
        assert.ok(connected.includes(u.sub), `${u.sub} saw "Connected", so the row is there`);
    });

    it('keeps every user who saw "Connected" connected after a restart on the same database: github_whoami and list_connections answer without elicitation', async () => {
      second = await stack.spawn(undefined, githubEnv);
      assert.equal(second.url, first.url, 'restarted on the same address');
      const connected = connectedSubjects(stack.envFor().DATABASE_PATH!);
      const checked = users.filter((u) => connected.includes(u.sub));
      assert.ok(checked.length >= users.filter((u) => u.shownConnected).length);
      const results = await Promise.allSettled(
        checked.map(async (u) => {
          const { client, elicited } = await recordingClient(second.url, await stack.token(u.sub));
          try {
            const whoami = await client.callTool({ name: 'github_whoami', arguments: {} });
            const list = await client.callTool({ name: 'list_connections', arguments: {} });
            assert.deepEqual(elicited, [], `${u.sub} was not asked to connect again`);
            assert.equal(whoami.isError, undefined, resultText(whoami));
            assert.equal((whoami.structuredContent as { status: string; login: string }).status, 'connected');
            assert.equal((whoami.structuredContent as { login: string }).login, u.login);
            const rows = (list.structuredContent as { connections: Array<{ provider: string; login: string }> }).connections;
            assert.deepEqual(
              rows.map((r) => [r.provider, r.login]),
              [['github', u.login]],
            );
          } finally {
            await client.close();
          }
        }),
      );
      assertAllFulfilled(
        results,
        checked.map((u) => u.sub),
      );
    });

    it('offers a user whose callback died a fresh link that works when their client repeats the original call with its requestState', async () => {
      // Half of the users whose callback died repeat their original call here; the other half are
      // left for the next test, which starts a fresh call.
      const connected = connectedSubjects(stack.envFor().DATABASE_PATH!);
      const dead = users.filter((u) => !connected.includes(u.sub)).filter((_, i) => i % 2 === 0);
      assert.ok(dead.length > 0);
      const results = await Promise.allSettled(
        dead.map(async (u) => {
          const token = await stack.token(u.sub);
          const reply = await repeatCall(`${second.url}/mcp`, token, 'github_whoami', {}, u.requestState);
          const again = connectRequest(reply);
          assert.notEqual(again.link, u.link, `${u.sub}: not the link whose authorization died with the process`);
          const page = await u.browser.open(again.link);
          assert.equal(page.status, 200, `${u.sub}: the offered link opens (${textOf(page.html).slice(0, 160)})`);
          assert.match(page.html, /name="decision" value="allow"/);
          const done = await completeConnect(u.browser, again.link, u.sub, { githubLogin: u.login });
          assert.match(textOf(done.html), new RegExp(`Connected as @${u.login}`));
          const final = await repeatCall(`${second.url}/mcp`, token, 'github_whoami', {}, again.requestState);
          assert.equal(final.json?.result?.structuredContent?.login, u.login, final.text);
        }),
      );
      assertAllFulfilled(
        results,
        dead.map((u) => u.sub),
      );
    });

    it('lets every user call a tool after the restart: connected users act at once, the others are asked to connect again and complete it', async () => {
      const path = stack.envFor().DATABASE_PATH!;
      const connectedBefore = connectedSubjects(path);
      assert.ok(connectedBefore.length < USERS, 'some users still have no connection and must be asked again');
      const results = await Promise.allSettled(
        users.map(async (u) => {
          const { client, elicited } = await recordingClient(second.url, await stack.token(u.sub), connectsIn(u.browser, u.sub, u.login));
          try {
            const result = await client.callTool({
              name: 'github_create_issue',
              arguments: { owner: 'octo-org', repo: 'crash', title: `after the crash: ${u.sub}` },
            });
            assert.equal(result.isError, undefined, `${u.sub}: ${resultText(result)}`);
            assert.equal((result.structuredContent as { status: string }).status, 'created');
            assert.equal(elicited.length, connectedBefore.includes(u.sub) ? 0 : 1, `${u.sub}: elicitations`);
          } finally {
            await client.close();
          }
        }),
      );
      assertAllFulfilled(
        results,
        users.map((u) => u.sub),
      );

      for (const u of users) {
        const issues = stack.github.issues.filter((i) => i.title === `after the crash: ${u.sub}`);
        assert.equal(issues.length, 1, `${u.sub} created exactly one issue`);
        assert.equal(issues[0]!.author, u.login, `${u.sub}'s issue is filed as their own GitHub account`);
      }
      assert.equal(connectedSubjects(path).length, USERS);
      assert.equal(integrityCheck(path), 'ok');
      const output = first.output() + second.output();
      assert.doesNotMatch(output, GITHUB_TOKEN_SHAPE, 'no GitHub token in any log line');
      assert.doesNotMatch(second.output(), /"level":"error"/);
    });
  },
);
