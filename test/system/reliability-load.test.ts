// Load held: 200 users go through the whole flow at the same time against one in-process broker
// (RATE_LIMIT_PER_MINUTE=0, the stack default): the SDK client's first tools/call gets a link, the
// user signs in at the IdP, consents, authorizes at the GitHub stand-in, lands on the callback,
// and the client's repeat creates the issue. Nobody may fail, nobody may get someone else's
// account, and nothing may be logged at error level.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Browser, textOf } from '../support/browser.js';
import { resultText } from '../support/mcp.js';
import { GITHUB_TOKEN_SHAPE, assertAllFulfilled, withDb } from '../support/reliability-flow.js';
import { completeConnect } from '../support/stack.js';
import { clientAs, useStack } from '../support/suite.js';

const USERS = 200;
/** Users started together; all 200 at once is the target, and it holds on 2 cores. */
const CONCURRENCY = 200;
const BUDGET_MS = 60_000;

describe(`load: ${USERS} users completing the whole connect flow concurrently against one in-process broker`, () => {
  const stack = useStack({ holdSeconds: 5 });

  it(
    `connects ${USERS} users and creates ${USERS} issues with no failure, no cross-talk and no error log (within ${BUDGET_MS / 1000} s)`,
    { timeout: BUDGET_MS + 30_000 },
    async (t) => {
      const startedAt = Date.now();
      const users = Array.from({ length: USERS }, (_, i) => ({ sub: `load-user-${String(i).padStart(3, '0')}`, login: `gh-load-${i}` }));
      const results: Array<PromiseSettledResult<void>> = [];
      for (let from = 0; from < USERS; from += CONCURRENCY) {
        const batch = users.slice(from, from + CONCURRENCY);
        results.push(
          ...(await Promise.allSettled(
            batch.map(async ({ sub, login }) => {
              const browser = new Browser();
              const links: string[] = [];
              let connectedPage = '';
              const client = await clientAs(stack, sub, {
                name: `load-client-${sub}`,
                timeoutMs: BUDGET_MS,
                onUrl: async (url) => {
                  links.push(url);
                  const page = await completeConnect(browser, url, sub, { githubLogin: login });
                  connectedPage = `${page.status} ${textOf(page.html)}`;
                  return { action: 'accept' };
                },
              });
              try {
                const result = await client.callTool({
                  name: 'github_create_issue',
                  arguments: { owner: 'octo-org', repo: 'load', title: `load test: ${sub}` },
                });
                assert.equal(links.length, 1, `${sub}: exactly one elicitation`);
                assert.equal(new URL(links[0]!).origin, stack.publicUrl);
                assert.match(connectedPage, new RegExp(`^200 .*Connected as @${login}`), `${sub}: the callback page`);
                assert.equal(result.isError, undefined, `${sub}: ${resultText(result)}`);
                assert.equal((result.structuredContent as { status?: string }).status, 'created', `${sub}: ${resultText(result)}`);
                assert.match(resultText(result), new RegExp(`as @${login}:`), `${sub} acted as their own GitHub account`);
              } finally {
                await client.close();
              }
            }),
          )),
        );
      }
      const took = Date.now() - startedAt;
      assertAllFulfilled(
        results,
        users.map((u) => u.sub),
      );
      assert.ok(took < BUDGET_MS, `${USERS} flows took ${took} ms (budget ${BUDGET_MS} ms)`);

      const issues = stack.github.issues.filter((i) => i.owner === 'octo-org' && i.repo === 'load');
      assert.equal(issues.length, USERS, `${USERS} issues at the GitHub stand-in`);
      for (const { sub, login } of users) {
        const mine = issues.filter((i) => i.title === `load test: ${sub}`);
        assert.equal(mine.length, 1, `${sub}: one issue`);
        assert.equal(mine[0]!.author, login, `${sub}: filed as @${login}`);
      }
      assert.deepEqual(
        issues.map((i) => i.number).sort((a, b) => a - b),
        Array.from({ length: USERS }, (_, i) => i + 1),
        'issue numbers 1..200, none lost or duplicated',
      );

      const rows = withDb(
        stack.env.DATABASE_PATH!,
        (db) =>
          db.prepare('SELECT subject, account_login FROM connections ORDER BY subject').all() as Array<{
            subject: string;
            account_login: string;
          }>,
      );
      assert.equal(rows.length, USERS, `${USERS} rows in connections`);
      assert.deepEqual(
        rows,
        users.map((u) => ({ subject: u.sub, account_login: u.login })),
        'each principal is bound to their own GitHub account',
      );

      const errors = stack.logs.filter((l) => /"level":"error"/.test(l));
      assert.deepEqual(errors.slice(0, 5), [], `${errors.length} error-level log lines`);
      assert.equal(stack.logs.filter((l) => /"event":"connection_created"/.test(l)).length, USERS);
      for (const line of stack.logs) assert.doesNotMatch(line, GITHUB_TOKEN_SHAPE, 'no GitHub token in the logs');
      t.diagnostic(`${USERS} concurrent flows in ${took} ms`);
    },
  );
});
