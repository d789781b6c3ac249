// `npm run admin` beside a broker *process* under load on the same database, on SQLite and on
// PostgreSQL (where initdb exists): every command finishes while the broker keeps answering tool
// calls without an error or a long stall (short statements, no long locks), and an admin revoke
// is seen by the running broker at once.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/env.js';
import { openStore, type Store } from '../../src/store/index.js';
import { envelope, rawCall } from '../support/mcp.js';
import { startMultiStack, type MultiStack, type SpawnedBroker } from '../support/multi.js';
import { postgresSkipReason, startPostgres, type PgServer } from '../support/postgres.js';
import { seedConnection } from '../support/seed.js';
import { spawnAdmin } from '../support/node-process.js';

const USERS = ['alice', 'bob', 'carol', 'dave', 'erin'];

function liveSuite(name: string, skip: string | false, database: () => Promise<{ env: Record<string, string>; close(): Promise<void> }>) {
  describe(`npm run admin beside a broker process under load (${name})`, { skip }, () => {
    let db: { env: Record<string, string>; close(): Promise<void> };
    let stack: MultiStack;
    let broker: SpawnedBroker;
    let store: Store;

    before(async () => {
      db = await database();
      // The per-user /mcp limit on (as by default): every call then writes its hit before it is answered.
      stack = await startMultiStack({ env: { ...db.env, MCP_RATE_LIMIT_PER_MINUTE: '1000000' } });
      broker = await stack.spawn();
      for (const user of USERS) {
        const issued = stack.github.issueTokenFor(`${user}-gh`, { scopes: ['repo'] });
        await seedConnection(
          stack.envFor(),
          user,
          'github',
          { id: `id-${user}`, login: `${user}-gh` },
          { accessToken: issued.accessToken, tokenType: 'bearer', scopes: ['repo'] },
        );
      }
      store = await openStore(loadConfig(stack.envFor()).database);
      const bulk = { issuer: stack.idp.issuer, subject: 'bulk' };
      await store.transaction(async (tx) => {
        for (let i = 0; i < 1_500; i++) await tx.audit.record('token_exchanged', bulk, 'github', `row ${i}`);
      });
    });

    after(async () => {
      await store?.close();
      await stack?.close();
      await db?.close();
    });

    const listConnections = async (sub: string) => {
      const reply = await rawCall(`${broker.url}/mcp`, await stack.token(sub), {
        method: 'tools/call',
        params: { name: 'list_connections', arguments: {}, _meta: envelope() },
      });
      return reply;
    };

    it('runs every command while the broker answers every tool call, and the broker sees an admin revoke at once', async () => {
      const tokens = new Map(await Promise.all(USERS.map(async (u) => [u, await stack.token(u)] as const)));
      let stop = false;
      const calls: Array<{ ok: boolean; ms: number; detail: string }> = [];
      const load = async (user: string) => {
        while (!stop) {
          const started = Date.now();
          const reply = await rawCall(`${broker.url}/mcp`, tokens.get(user)!, {
            method: 'tools/call',
            params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
          });
          const ok = reply.status === 200 && reply.json?.result !== undefined && reply.json.result.isError !== true;
          calls.push({ ok, ms: Date.now() - started, detail: ok ? '' : `${reply.status} ${reply.text.slice(0, 200)}` });
        }
      };
      const loops = ['alice', 'carol', 'dave'].map(load);
      try {
        const env = stack.envFor();
        const list = await spawnAdmin(env, ['connections', 'list', '--json']);
        assert.equal(list.code, 0, list.stderr);
        assert.deepEqual(
          (JSON.parse(list.stdout) as Array<{ subject: string }>).map((c) => c.subject),
          USERS,
        );
        const exported = await spawnAdmin(env, ['audit', 'export']);
        assert.equal(exported.code, 0, exported.stderr);
        assert.ok(exported.stdout.trimEnd().split('\n').length >= 1_500 + USERS.length);
        const stats = await spawnAdmin(env, ['stats', '--json']);
        assert.equal(stats.code, 0, stats.stderr);
        assert.deepEqual((JSON.parse(stats.stdout) as { connections: unknown }).connections, [
          { provider: 'github', status: 'active', count: USERS.length },
        ]);
        const prune = await spawnAdmin(env, ['pending', 'prune']);
        assert.equal(prune.code, 0, prune.stderr);
        const revoke = await spawnAdmin({ ...env, ADMIN_ACTOR: 'ops' }, ['connections', 'revoke', stack.idp.issuer, 'bob', 'github']);
        assert.equal(revoke.code, 0, revoke.stderr);
      } finally {
        stop = true;
        await Promise.all(loops);
      }
      const failed = calls.filter((c) => !c.ok);
      assert.deepEqual(failed, [], 'every tool call answered while the commands ran');
      assert.ok(calls.length >= 20, `the broker was busy (${calls.length} calls)`);
      const slowest = Math.max(...calls.map((c) => c.ms));
      assert.ok(slowest < 4_000, `no call waited on a lock for long (slowest ${slowest} ms)`);

      const bob = await listConnections('bob');
      assert.deepEqual(bob.json.result.structuredContent.connections, [], 'the running broker no longer has a connection for bob');
      assert.deepEqual(
        stack.github.revokedGrants.filter((g) => g.login === 'bob-gh'),
        [{ clientId: stack.github.clientId, login: 'bob-gh' }],
      );
      assert.equal((await listConnections('alice')).json.result.structuredContent.connections.length, 1, "alice's stays");
    });
  });
}

liveSuite('SQLite', false, async () => ({ env: {}, close: async () => {} }));

liveSuite('PostgreSQL', postgresSkipReason(), async () => {
  const server: PgServer = await startPostgres();
  return { env: { DATABASE_URL: await server.createDatabase() }, close: () => server.destroy() };
});
