import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Browser, textOf } from './support/browser.js';
import { postgresSkipReason, startPostgres, type PgServer } from './support/postgres.js';
import { completeConnect, signIn } from './support/stack.js';
import { clientAs, useStack } from './support/suite.js';

// PostgreSQL refuses U+0000 in text, so a NUL the IdP or a provider sends must never reach a
// column: names are cleaned where they come in, identifiers (iss, sub, account ids) are refused.

const stores: Array<{ name: string; skip: string | false; env: () => Promise<Record<string, string>> }> = [];
let pgServer: PgServer | undefined;
stores.push({ name: 'SQLite', skip: false, env: async () => ({}) });
stores.push({
  name: 'PostgreSQL',
  skip: postgresSkipReason(),
  env: async () => {
    pgServer ??= await startPostgres();
    return { DATABASE_URL: await pgServer.createDatabase() };
  },
});
after(() => pgServer?.destroy());

for (const store of stores) {
  describe(`control characters from the IdP and GitHub (${store.name})`, { skip: store.skip }, () => {
    const stack = useStack(async () => ({
      env: await store.env(),
      idpAccountClaims: (id: string) => (id === 'alice' ? { preferred_username: 'Al\u0000ice\u202e', name: 'Alice\u0000' } : {}),
    }));

    it('signs in a user whose display name carries a NUL and a bidi override, showing it without them', async () => {
      const page = await signIn(new Browser(), stack, 'alice');
      assert.equal(page.status, 200, textOf(page.html));
      assert.ok(page.url.endsWith('/connections'), page.url);
      assert.match(textOf(page.html), /Alice/);
      assert.doesNotMatch(page.html, /\u0000|\u202e/);
    });

    it('refuses with 400 a subject (sub) with a control character, naming it, and stores no session', async () => {
      const page = await signIn(new Browser(), stack, 'mal\u0007lory');
      assert.equal(page.status, 400, textOf(page.html));
      assert.match(textOf(page.html), /subject \(sub\) with control or invisible characters/);
      assert.ok(!stack.logs.some((l) => l.includes('"event":"signed_in"') && l.includes('mal')));
    });

    it('connects a GitHub account whose login arrives with a NUL, storing the login without it', async () => {
      stack.github.faults.userFields = { login: 'octo\u0000cat' };
      try {
        const browser = new Browser();
        let finalPage = '';
        const client = await clientAs(stack, 'bob', {
          onUrl: async (url) => {
            finalPage = textOf((await completeConnect(browser, url, 'bob')).html);
            return { action: 'accept' };
          },
        });
        const result = await client.callTool({ name: 'connect_account', arguments: { provider: 'github' } });
        const listed = await client.callTool({ name: 'list_connections', arguments: {} });
        await client.close();
        assert.match(finalPage, /Connected as @octocat/);
        assert.equal(result.isError, undefined, JSON.stringify(result));
        assert.equal((result.structuredContent as { login?: string } | undefined)?.login, 'octocat');
        assert.doesNotMatch(JSON.stringify(listed), /\\u0000/);
        assert.match(JSON.stringify(listed), /octocat/);
      } finally {
        delete stack.github.faults.userFields;
      }
    });

    it('refuses a GitHub account whose id arrives with a NUL, naming the problem, and links nothing', async () => {
      stack.github.faults.userFields = { id: '583231\u0000' };
      try {
        const browser = new Browser();
        let finalPage: { status: number; text: string } | undefined;
        const client = await clientAs(stack, 'carol', {
          onUrl: async (url) => {
            const page = await completeConnect(browser, url, 'carol');
            finalPage = { status: page.status, text: textOf(page.html) };
            return { action: 'cancel' };
          },
        });
        await client.callTool({ name: 'connect_account', arguments: { provider: 'github' } });
        const listed = await client.callTool({ name: 'list_connections', arguments: {} });
        await client.close();
        assert.ok(finalPage, 'the connect page was opened');
        assert.ok(finalPage.status >= 400, `status ${finalPage.status}`);
        assert.match(finalPage.text, /account id with control or invisible characters/);
        assert.deepEqual(
          (listed.structuredContent as { connections?: unknown[] } | undefined)?.connections ?? [],
          [],
          JSON.stringify(listed),
        );
      } finally {
        delete stack.github.faults.userFields;
      }
    });
  });
}
