// Webhooks across processes: a broker SIGKILLed between the change and the delivery loses no event
// (another process sends it once the dead one's claim lapses, within 60 s), and two instances on
// one database (two processes on one SQLite file; two brokers on one PostgreSQL) deliver each event
// exactly once and never send one event twice at the same moment.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/env.js';
import { transactionWithEvents } from '../../src/events/index.js';
import { createLogger } from '../../src/log.js';
import { openStore, type Store } from '../../src/store/index.js';
import { createWebhooks } from '../../src/webhooks/index.js';
import { eventually, logged } from '../support/eventually.js';
import { envelope, rawCall } from '../support/mcp.js';
import { startMultiStack, type MultiStack } from '../support/multi.js';
import { postgresSkipReason, startPostgres, type PgServer } from '../support/postgres.js';
import { freePort } from '../support/idp.js';
import { seedConnection } from '../support/seed.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/** A multi-process stack whose brokers send every event to `receiver` (endpoint `audit-sink`). */
async function stackWithWebhook(receiver: WebhookReceiver, env: Record<string, string> = {}): Promise<MultiStack> {
  const dir = mkdtempSync(join(tmpdir(), 'webhooks-file-'));
  const file = join(dir, 'providers.yaml');
  writeFileSync(file, ['webhooks:', '  - id: audit-sink', `    url: ${receiver.url}`].join('\n'));
  const stack = await startMultiStack({ env: { ...env, PROVIDERS_FILE: file, WEBHOOK_AUDIT_SINK_SECRET: receiver.secret } });
  const close = stack.close.bind(stack);
  return Object.assign(stack, {
    close: async () => {
      await close();
      rmSync(dir, { recursive: true, force: true });
    },
  });
}

describe('webhooks across a SIGKILL', { timeout: 120_000 }, () => {
  let receiver: WebhookReceiver;
  let stack: MultiStack;
  before(async () => {
    receiver = await startWebhookReceiver({ mode: 'hang' });
    stack = await stackWithWebhook(receiver);
  });
  after(async () => {
    await stack?.close();
    await receiver?.close();
  });

  it('loses nothing when the broker is killed between the change and the delivery: another process sends it within 60 s', async () => {
    const env = stack.envFor();
    const issued = stack.github.issueTokenFor('octocat');
    await seedConnection(
      env,
      'crash-user',
      'github',
      { id: String(stack.github.users.get('octocat')!.id), login: 'octocat' },
      { accessToken: issued.accessToken, tokenType: 'bearer', scopes: ['repo'] },
    );
    const first = await stack.spawn();
    // GitHub refuses the token: the broker marks the connection reauth_required and writes the event
    // with it; its delivery attempt reaches a receiver that never answers.
    stack.github.faults = { api: 401 };
    try {
      await rawCall(`${first.url}/mcp`, await stack.token('crash-user'), {
        method: 'tools/call',
        params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
      });
    } finally {
      stack.github.faults = {};
    }
    const attempt = await eventually('the first attempt at the receiver', () => receiver.requests[0], { timeoutMs: 10_000 });
    assert.ok(attempt.verified);
    assert.equal(await first.stop('SIGKILL'), null);
    assert.equal(logged(first.output(), 'webhook_delivered'), 0, 'the killed broker never settled it');

    receiver.mode = 'ok';
    const port = await freePort();
    const startedAt = Date.now();
    const second = await stack.spawn(port);
    const delivered = await eventually('the event, sent by the second process', () => receiver.events[0], {
      timeoutMs: 60_000,
      intervalMs: 100,
    });
    assert.ok(Date.now() - startedAt < 60_000);
    assert.equal(delivered.id, attempt.id, 'the same webhook-id: the receiver can tell it is the same event');
    assert.equal(delivered.json.type, 'connection.reauth_required');
    assert.deepEqual(delivered.json.data.principal, { issuer: env.OIDC_ISSUER, subject: 'crash-user' });
    await eventually('the second process logged the delivery', () => logged(second.output(), 'webhook_delivered') === 1);
    assert.equal(receiver.duplicates, 0);
  });
});

/**
 * Two broker processes on one store; `EVENTS` events written into its outbox by a third party
 * (this test, as any instance's change would); a receiver that answers slowly, so overlapping
 * sends of one id would show.
 */
function twoInstances(name: string, skip: string | false, database: () => Promise<{ env: Record<string, string>; done(): Promise<void> }>) {
  describe(`webhooks from two instances on one ${name}`, { skip, timeout: 120_000 }, () => {
    const EVENTS = 40;
    let receiver: WebhookReceiver;
    let stack: MultiStack;
    let db: { env: Record<string, string>; done(): Promise<void> };
    let store: Store;
    before(async () => {
      db = await database();
      receiver = await startWebhookReceiver();
      // One instance alone would need 3 s (40 × 300 ms / 4 at once): the other's 2 s poll joins in.
      receiver.delayMs = 300;
      stack = await stackWithWebhook(receiver, db.env);
    });
    after(async () => {
      await store?.close();
      await stack?.close();
      await receiver?.close();
      await db?.done();
    });

    it('delivers each event exactly once, never twice at the same moment', async () => {
      const config = loadConfig(stack.envFor());
      store = await openStore(config.database);
      const [a, b] = await Promise.all([stack.spawn(), stack.spawn(await freePort())]);
      const { events } = createWebhooks(store, config.webhooks, createLogger('error'));
      for (let i = 0; i < EVENTS; i += 1)
        await transactionWithEvents(store, events, (_tx, emit) =>
          emit('connection.created', {
            issuer: config.oidc.issuerId,
            subject: `user-${i}`,
            provider: 'github',
            login: `login-${i}`,
            scopes: ['repo'],
          }),
        );
      await eventually(`${EVENTS} events at the receiver`, () => receiver.events.length === EVENTS, { timeoutMs: 60_000, intervalMs: 50 });
      // Settle time for a late duplicate to show up, if there were one.
      await new Promise((r) => setTimeout(r, 2_500));
      assert.equal(receiver.duplicates, 0, 'no event delivered twice');
      assert.equal(receiver.concurrentPeak, 1, 'no event sent by two instances at once');
      assert.equal(new Set(receiver.events.map((e) => e.json.data.login)).size, EVENTS);
      const byA = logged(a.output(), 'webhook_delivered');
      const byB = logged(b.output(), 'webhook_delivered');
      assert.equal(byA + byB, EVENTS, `a delivered ${byA}, b ${byB}`);
      assert.ok(byA > 0 && byB > 0, `both instances took part (a ${byA}, b ${byB})`);
      assert.deepEqual((await store.webhooks.stats()).endpoints, [{ endpoint: 'audit-sink', pending: 0, delivered: EVENTS, failed: 0 }]);
    });
  });
}

twoInstances('SQLite file (two processes)', false, async () => ({ env: {}, done: async () => {} }));

let pgServer: PgServer | undefined;
twoInstances('PostgreSQL database (two brokers)', postgresSkipReason(), async () => {
  pgServer = await startPostgres();
  const url = await pgServer.createDatabase();
  return { env: { DATABASE_URL: url }, done: () => pgServer!.destroy() };
});
