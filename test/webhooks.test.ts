import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import express from 'express';
import { describe, it } from 'node:test';
import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import { AccessTokenVerifier } from '../src/auth/bearer.js';
import { OidcClient } from '../src/auth/oidc-client.js';
import { loadConfig } from '../src/config/env.js';
import type { ConfiguredService } from '../src/config/services.js';
import { CompletionWatcher } from '../src/connections/completion-watcher.js';
import { ConnectLinks } from '../src/connections/links.js';
import type { ConfiguredWebhook } from '../src/config/webhooks.js';
import { ConnectionService } from '../src/connections/index.js';
import { Sealer } from '../src/crypto/index.js';
import { transactionWithEvents, type EventSink } from '../src/events/index.js';
import { exchangeRoutes } from '../src/exchange/endpoint.js';
import { createLogger } from '../src/log.js';
import { OAuthProvider } from '../src/providers/oauth-provider.js';
import { openSqliteStore, sqliteHandle, type Store } from '../src/store/index.js';
import { createWebhooks, nextAttemptAt, WebhookDelivery, webhookSignature, type DeliveryOptions } from '../src/webhooks/index.js';
import { Browser } from './support/browser.js';
import { eventually } from './support/eventually.js';
import { GITHUB_APP, seedExpired } from './support/expiring-tokens.js';
import { modernClient } from './support/mcp.js';
import { completeConnect, type Stack } from './support/stack.js';
import { startWebhookReceiver, verifySignature, type ReceivedEvent, type WebhookReceiver } from './support/webhook-receiver.js';
import { writeYamlLines } from './support/config-file.js';
import { closeInOrder, useStack, useSuite } from './support/suite.js';
import { makeTempDir, useTempDir } from './support/temp-dir.js';
import { postTokenExchange } from './support/token-exchange.js';
import { LOOPBACK_EGRESS } from './support/egress.js';

const HOUR = 3_600_000;
/** Anything that looks like a token the GitHub stand-in issues (gho_, ghu_, ghr_ …). */
const TOKEN_SHAPE = /gh[a-z]_[A-Za-z0-9]/;

async function connect(stack: Stack, sub: string, githubLogin: string): Promise<void> {
  const browser = new Browser();
  const client = await modernClient({
    url: stack.mcpUrl,
    token: await stack.token(sub),
    onUrl: async (url) => {
      await completeConnect(browser, url, sub, { githubLogin });
      return { action: 'accept' };
    },
  });
  try {
    await client.callTool({ name: 'github_whoami', arguments: {} });
  } finally {
    await client.close();
  }
}

async function callAs(stack: Stack, sub: string, name: string, onForm?: () => Promise<{ action: 'accept'; content: { confirm: true } }>) {
  const client = await modernClient({
    url: stack.mcpUrl,
    token: await stack.token(sub),
    ...(onForm ? { onForm } : {}),
    onUrl: async () => ({ action: 'decline' }),
  });
  try {
    return await client.callTool({ name, arguments: name === 'disconnect_account' ? { provider: 'github' } : {} });
  } finally {
    await client.close();
  }
}

function eventFor(receiver: WebhookReceiver, type: string, subject: string): Promise<ReceivedEvent> {
  return eventually(`${type} for ${subject}`, () =>
    receiver.events.find((e) => e.json.type === type && (e.json.data.principal as { subject: string }).subject === subject),
  );
}

/** The data of a connection event for a GitHub connection without scopes: the principal, the provider, the login. */
const githubConnectionData = (issuer: string, subject: string, login: string) => ({
  principal: { issuer, subject },
  provider: 'github',
  login,
  scopes: [],
});

describe('signed webhooks from a running broker', () => {
  const all = useSuite('the audit-sink receiver', () => startWebhookReceiver());
  const removals = useSuite('the removals receiver', () => startWebhookReceiver());
  const dir = useTempDir('webhooks-');
  const stack = useStack(() => ({
    ...GITHUB_APP,
    env: {
      ...GITHUB_APP.env,
      PROVIDERS_FILE: writeYamlLines(dir.file('providers.yaml'), [
        'webhooks:',
        '  - id: audit-sink',
        `    url: ${all.url}`,
        '  - id: removals',
        `    url: ${removals.url}`,
        '    events: [connection.deleted, connection.revoked]',
      ]),
      WEBHOOK_AUDIT_SINK_SECRET: all.secret,
      WEBHOOK_REMOVALS_SECRET: removals.secret,
    },
    brokerOptions: () => ({ webhookDelivery: { pollMs: 100 } }),
  }));

  it('sends connection.created after a connect flow, signed (Standard Webhooks), with the principal, provider, login and scopes and no token', async () => {
    await connect(stack, 'alice', 'octocat');
    const created = await eventFor(all, 'connection.created', 'alice');
    // The receiver only keeps requests whose signature it verified with its own HMAC code.
    assert.ok(verifySignature(all.secret, created.headers, created.body, Math.floor(Date.now() / 1000)));
    assert.match(created.id, /^msg_[A-Za-z0-9_-]{20,}$/);
    assert.match(String(created.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/);
    assert.ok(Math.abs(created.timestamp - Date.now() / 1000) < 60, 'webhook-timestamp is in seconds');
    assert.equal(created.headers['content-type'], 'application/json');
    assert.deepEqual(Object.keys(created.json).sort(), ['data', 'timestamp', 'type']);
    assert.ok(!Number.isNaN(Date.parse(created.json.timestamp)));
    assert.deepEqual(created.json.data, githubConnectionData(stack.idp.issuer, 'alice', 'octocat'));
    assert.doesNotMatch(created.body, TOKEN_SHAPE);
    assert.equal((await stack.broker.broker.store.webhooks.byId(created.id))?.status, 'delivered');
    assert.equal(removals.requests.length, 0, 'an endpoint that subscribed to other events receives nothing (and has no outbox row)');
  });

  it('sends connection.refreshed when an expired token is refreshed', async () => {
    await seedExpired(stack.env, stack.github, 'bob', 'hubot');
    await callAs(stack, 'bob', 'github_whoami');
    const refreshed = await eventFor(all, 'connection.refreshed', 'bob');
    assert.deepEqual(refreshed.json.data, githubConnectionData(stack.idp.issuer, 'bob', 'hubot'));
    assert.doesNotMatch(refreshed.body, TOKEN_SHAPE);
  });

  it('sends connection.reauth_required when GitHub stops accepting the token', async () => {
    stack.github.faults = { api: 401 };
    try {
      await callAs(stack, 'alice', 'github_whoami');
    } finally {
      stack.github.faults = {};
    }
    const reauth = await eventFor(all, 'connection.reauth_required', 'alice');
    assert.equal(reauth.json.data.login, 'octocat');
  });

  it("sends connection.deleted on the user's disconnect, to every endpoint that asked for it", async () => {
    const result = await callAs(stack, 'alice', 'disconnect_account', async () => ({ action: 'accept', content: { confirm: true } }));
    assert.notEqual(result.isError, true);
    const deleted = await eventFor(all, 'connection.deleted', 'alice');
    const deletedToo = await eventFor(removals, 'connection.deleted', 'alice');
    assert.notEqual(deleted.id, deletedToo.id, 'each endpoint has its own webhook-id');
    assert.equal(deleted.body, deletedToo.body);
    assert.deepEqual(
      removals.events.map((e) => e.json.type),
      ['connection.deleted'],
      'the filtered endpoint got only what it asked for',
    );
  });

  it('sends connection.revoked for an admin revoke written by another process (the running broker delivers it)', async () => {
    // What `npm run admin -- connections revoke` does: its own ConnectionService over the same
    // database, whose events land in the outbox; it never starts a delivery loop of its own.
    const config = loadConfig(stack.env);
    const store = stack.broker.broker.store;
    const { events, delivery } = createWebhooks(store, config.webhooks, createLogger('error'));
    const service = new ConnectionService(store, new Sealer(config.tokenKeys), createLogger('error'), { events });
    const github = config.providers.find((p) => p.definition.id === 'github')!;
    const provider = new OAuthProvider({ ...github, timeoutMs: config.providerTimeoutMs });
    const outcome = await service.disconnect(principalFromVerifiedClaims(stack.idp.issuer, 'bob'), provider, {
      kind: 'admin',
      actor: 'ops@example.com',
    });
    assert.equal(outcome.deleted, true);
    const revoked = await eventFor(removals, 'connection.revoked', 'bob');
    assert.equal(revoked.json.data.login, 'hubot');
    assert.deepEqual(
      Object.keys(revoked.json.data).sort(),
      ['login', 'principal', 'provider', 'scopes'],
      'the body is exactly the documented data',
    );
    assert.equal(delivery.inflight, 0);
    await eventFor(all, 'connection.revoked', 'bob');
  });

  it('delivered each event once, to receivers that deduplicate, and logged no secret', () => {
    assert.equal(all.duplicates + removals.duplicates, 0);
    assert.ok(all.requests.every((r) => r.verified));
    const logs = stack.logs.join('\n');
    assert.ok(logs.includes('"event":"webhook_delivered"'));
    assert.doesNotMatch(logs, /whsec_/);
    assert.ok(!logs.includes(all.secret.slice('whsec_'.length)));
    assert.doesNotMatch(logs, TOKEN_SHAPE);
  });
});

/** An outbox over a SQLite file, its delivery loop with short timings, and the endpoints. */
async function outboxWith(endpoints: ConfiguredWebhook[], options: DeliveryOptions) {
  const dir = makeTempDir('webhooks-outbox-');
  const store: Store = openSqliteStore(dir.file('broker.db'));
  const logs: string[] = [];
  const { events, delivery } = createWebhooks(
    store,
    endpoints,
    createLogger('debug', (l) => logs.push(l)),
    // The receivers listen on loopback over plain http: allowed as EGRESS_ALLOW would (test/egress checks the rule).
    { egress: LOOPBACK_EGRESS, ...options },
  );
  delivery.start();
  const emit = (subject: string) =>
    transactionWithEvents(store, events, (_tx, emit) =>
      emit('connection.created', {
        issuer: 'https://idp.example.com',
        subject,
        provider: 'github',
        login: `${subject}-login`,
        scopes: ['repo'],
      }),
    );
  const rows = () => store.webhooks.stats();
  return { store, delivery, logs, emit, rows, close: () => closeInOrder(delivery, store, dir) };
}

function endpoint(id: string, receiver: { url: string; secret: string }): ConfiguredWebhook {
  return {
    id,
    url: new URL(receiver.url),
    events: ['connection.created'],
    secret: Buffer.from(receiver.secret.slice('whsec_'.length), 'base64'),
  };
}

describe('exchange.refused: refusals of the token exchange to an authenticated service', () => {
  const BOT = { id: 'issue-bot', secret: 'issue-bot-secret-for-webhooks-0123', audience: 'https://bot.example.com/mcp' };
  const refusals = useSuite('the exchange.refused receiver', () => startWebhookReceiver());
  const created = useSuite('the connection.created receiver', () => startWebhookReceiver());
  const dir = useTempDir('webhooks-exchange-');
  /** Every subject token sent, searched for in every delivered body. */
  const sent: string[] = [];
  const stack = useStack(() => {
    const file = dir.file('providers.json');
    writeFileSync(
      file,
      JSON.stringify({
        services: [{ id: BOT.id, audiences: [BOT.audience], auth: 'client_secret_basic', allow: { github: ['repo'] } }],
        webhooks: [
          { id: 'refusals', url: refusals.url, events: ['exchange.refused'] },
          { id: 'created', url: created.url, events: ['connection.created'] },
        ],
      }),
    );
    return {
      env: {
        PROVIDERS_FILE: file,
        SERVICE_ISSUE_BOT_SECRET: BOT.secret,
        WEBHOOK_REFUSALS_SECRET: refusals.secret,
        WEBHOOK_CREATED_SECRET: created.secret,
      },
      brokerOptions: () => ({ webhookDelivery: { pollMs: 100 } }),
    };
  });

  async function exchange(form: Record<string, string>, secret = BOT.secret): Promise<{ status: number; json: Record<string, unknown> }> {
    if (form.subject_token) sent.push(form.subject_token);
    return postTokenExchange(stack.publicUrl, { id: BOT.id, secret }, form);
  }

  const outboxRows = (): number =>
    (
      sqliteHandle(stack.broker.broker.store)
        .prepare("SELECT count(*) AS n FROM webhook_outbox WHERE event_type = 'exchange.refused'")
        .get() as { n: number }
    ).n;

  it('writes nothing for callers that did not authenticate: a flood of wrong secrets leaves the outbox empty', async () => {
    const token = await stack.token('mallory', { aud: BOT.audience });
    for (let i = 0; i < 8; i++) {
      const r = await exchange({ subject_token: token }, `wrong-secret-${i}-0123456789abcdef`);
      assert.ok(r.status === 401 || r.status === 429, `refused before authentication (${r.status})`);
    }
    assert.equal(outboxRows(), 0);
    const audit = await stack.broker.broker.store.audit.list({ event: 'token_exchange_refused' });
    assert.deepEqual(audit, [], 'nor any audit row');
  });

  it('sends exchange.refused, signed, with the service and reason, and the principal only once the subject token was verified; never a token', async () => {
    // A subject token for another audience: invalid_grant, whose user nobody vouched for.
    const foreign = await exchange({ subject_token: await stack.token('zoe', { aud: 'https://elsewhere.example.com/mcp' }) });
    assert.equal(foreign.json.error, 'invalid_grant');
    // A verified user who has not connected GitHub: interaction_required, naming zoe.
    const notConnected = await exchange({ subject_token: await stack.token('zoe', { aud: BOT.audience }) });
    assert.equal(notConnected.json.error, 'interaction_required');

    const got = await eventually('two exchange.refused events', () => (refusals.events.length >= 2 ? refusals.events : undefined));
    const now = Math.floor(Date.now() / 1000);
    for (const e of got) assert.ok(verifySignature(refusals.secret, e.headers, e.body, now), 'signed with the endpoint secret');
    assert.deepEqual(
      got.map((e) => [e.json.type, e.json.data]),
      [
        ['exchange.refused', { service: BOT.id, reason: 'invalid_grant' }],
        [
          'exchange.refused',
          { service: BOT.id, reason: 'interaction_required:not_connected', principal: { issuer: stack.idp.issuer, subject: 'zoe' } },
        ],
      ],
    );
    for (const e of got) {
      for (const token of sent) assert.equal(e.body.includes(token), false, 'no subject token in a body');
      assert.equal(e.body.includes(String(notConnected.json.connect_request)), false, 'no connect request in a body');
    }
    // Filtered: the endpoint that asked only for connection.created has no row and no request.
    assert.equal(created.requests.length, 0);
    assert.equal(outboxRows(), 2);
  });
});

describe('webhook events are written in the transaction of their change', () => {
  it('a change that rolls back leaves no event behind, and one that commits leaves exactly its event', async () => {
    const dir = makeTempDir('webhooks-tx-');
    const store = openSqliteStore(dir.file('broker.db'));
    try {
      const sink: ConfiguredWebhook = {
        id: 'sink',
        url: new URL('http://127.0.0.1:9/'),
        events: ['connection.created'],
        secret: Buffer.alloc(32, 7),
      };
      // Delivery is never started here: the rows stay in the outbox for the test to read.
      const { events } = createWebhooks(store, [sink], createLogger('error'));
      // The last write of a save (settling the pending connection) fails, after the event was recorded.
      const failing: Store = {
        ...store,
        transaction: (fn) =>
          store.transaction((tx) =>
            fn({
              ...tx,
              pending: Object.assign(Object.create(tx.pending) as typeof tx.pending, {
                settle: async () => {
                  throw new Error('disk full');
                },
              }),
            }),
          ),
      };
      const sealer = new Sealer([Buffer.alloc(32, 1)]);
      const principal = principalFromVerifiedClaims('https://idp.example.com', 'tx-user');
      const tokens = { accessToken: 'gho_secret', tokenType: 'bearer', scopes: ['repo'] };
      const account = { id: '42', login: 'octocat' };
      await assert.rejects(
        new ConnectionService(failing, sealer, createLogger('error'), { events }).save(principal, 'github', account, tokens, {
          pendingId: 'p-1',
          refuseShared: false,
        }),
        /disk full/,
      );
      assert.equal(await store.connections.find(principal, 'github'), undefined);
      assert.deepEqual((await store.webhooks.stats()).endpoints, [], 'no event for a change that did not happen');

      await new ConnectionService(store, sealer, createLogger('error'), { events }).save(principal, 'github', account, tokens, {
        refuseShared: false,
      });
      assert.ok(await store.connections.find(principal, 'github'));
      assert.deepEqual((await store.webhooks.stats()).endpoints, [{ endpoint: 'sink', pending: 1, delivered: 0, failed: 0 }]);
    } finally {
      await store.close();
      dir.close();
    }
  });
});

describe('exchange.refused is written in the transaction of its audit row', () => {
  const SERVICE: ConfiguredService = {
    id: 'issue-bot',
    displayName: 'Issue bot',
    audiences: ['https://bot.example.com/mcp'],
    auth: 'client_secret_basic',
    secret: 'issue-bot-secret-for-webhooks-0123',
    allow: { github: ['repo'] },
  };

  /** The token endpoint alone, over a real SQLite store, its events going to `events`; an authenticated request without subject_token. */
  async function refuse(store: Store, events: EventSink): Promise<{ status: number; json: Record<string, unknown> }> {
    const publicUrl = new URL('http://127.0.0.1:9/');
    const log = createLogger('error');
    const brokerSecret = Buffer.alloc(32, 3);
    // The IdP is never asked: the request is refused before its subject token is read.
    const idp = new OidcClient({ issuer: new URL('http://127.0.0.1:9/idp'), clientId: 'page', clientSecret: 'page-secret' });
    const app = express().use(
      exchangeRoutes({
        publicUrl,
        services: [SERVICE],
        providers: new Map(),
        resources: new Map(),
        verifier: new AccessTokenVerifier(idp, 'http://127.0.0.1:9/mcp'),
        store,
        loadCounters: store,
        connections: new ConnectionService(store, new Sealer([Buffer.alloc(32, 1)]), log, { events }),
        watcher: new CompletionWatcher(store),
        links: new ConnectLinks(store, publicUrl, brokerSecret, 600),
        brokerSecret,
        rateLimitPerMinute: 0,
        authFailuresPerMinute: 0,
        log,
      }),
    );
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${SERVICE.id}:${SERVICE.secret}`).toString('base64')}`,
        },
        body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', audience: 'github' }).toString(),
        signal: AbortSignal.timeout(10_000),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    } finally {
      server.close();
    }
  }

  it('an event that cannot be written takes its audit row with it; one that is written sees the row inside the transaction only', async () => {
    const dir = makeTempDir('webhooks-exchange-tx-');
    const store = openSqliteStore(dir.file('broker.db'));
    // A second handle on the file, outside the endpoint's transactions (the first one waits for them).
    const outside = openSqliteStore(dir.file('broker.db'));
    try {
      const failing: EventSink = {
        async emit() {
          throw new Error('the outbox is full');
        },
      };
      const refusedOnce = await refuse(store, failing);
      assert.equal(refusedOnce.status, 400, 'the caller still gets its RFC answer');
      assert.equal(refusedOnce.json.error, 'invalid_request');
      assert.deepEqual(await store.audit.list({ event: 'token_exchange_refused' }), [], 'no audit row without its event');

      const seen: Array<{ type: string; data: unknown; rowInside: number; rowOutside: number }> = [];
      const recording: EventSink = {
        async emit(type, data, tx) {
          seen.push({
            type,
            data,
            rowInside: (await tx.audit.list({ event: 'token_exchange_refused' })).length,
            rowOutside: (await outside.audit.list({ event: 'token_exchange_refused' })).length,
          });
        },
      };
      assert.equal((await refuse(store, recording)).json.error, 'invalid_request');
      assert.deepEqual(seen, [
        { type: 'exchange.refused', data: { service: 'issue-bot', reason: 'invalid_request' }, rowInside: 1, rowOutside: 0 },
      ]);
      assert.deepEqual(
        (await store.audit.list({ event: 'token_exchange_refused' })).map((r) => r.detail),
        ['service=issue-bot reason=invalid_request'],
      );
    } finally {
      await outside.close();
      await store.close();
      dir.close();
    }
  });
});

describe('webhook delivery: retries, give-up, redirects, timeouts, concurrency', () => {
  it('retries a receiver that answers 503, with the same webhook-id, and delivers once it answers 2xx', async () => {
    const receiver = await startWebhookReceiver({ mode: 'error' });
    const outbox = await outboxWith([endpoint('sink', receiver)], { pollMs: 20, firstRetryMs: 50, maxRetryMs: 100 });
    try {
      await outbox.emit('retry-user');
      await eventually('three failed attempts', () => receiver.requests.length >= 3);
      receiver.mode = 'ok';
      const delivered = await eventually('the delivery', () => receiver.events[0]);
      assert.ok(
        receiver.requests.every((r) => r.id === delivered.id && r.verified),
        'every attempt carried the same id, each signed',
      );
      // The receiver has the event before the outbox has its answer and marks the row.
      const row = await eventually('the row marked delivered', async () => {
        const r = (await outbox.store.webhooks.byId(delivered.id))!;
        return r.status === 'delivered' && r;
      });
      assert.equal(row.attempts, receiver.requests.length);
      assert.ok(outbox.logs.some((l) => l.includes('"event":"webhook_attempt_failed"') && l.includes('"error":"http_503"')));
    } finally {
      await outbox.close();
      await receiver.close();
    }
  });

  it('marks an event failed once the retry window has passed, visible in webhooks.stats()', async () => {
    const receiver = await startWebhookReceiver();
    await receiver.close(); // nothing listens there any more: connection refused
    const outbox = await outboxWith([endpoint('gone', receiver)], { pollMs: 20, firstRetryMs: 50, maxRetryMs: 200, giveUpAfterMs: 1_000 });
    try {
      const started = Date.now();
      await outbox.emit('failing-user');
      const stats = await eventually(
        'the event failed',
        async () => {
          const s = await outbox.rows();
          return s.endpoints[0]?.failed === 1 ? s : undefined;
        },
        { timeoutMs: 5_000 },
      );
      assert.deepEqual(stats.endpoints, [{ endpoint: 'gone', pending: 0, delivered: 0, failed: 1 }]);
      assert.equal(stats.oldestPendingAt, null);
      assert.ok(Date.now() - started >= 1_000, 'not before the window closed');
      const failed = outbox.logs.find((l) => l.includes('"event":"webhook_failed"'))!;
      assert.match(failed, /"error":"ECONNREFUSED"/);
      // 50, 100, 200, 200, … ms apart over one second, and a last try at its end.
      assert.ok(JSON.parse(failed).attempts >= 5, failed);
    } finally {
      await outbox.close();
    }
  });

  it("never follows a receiver's redirect: the signed event does not reach the redirect's target", async () => {
    const target = await startWebhookReceiver();
    const redirecting = await startWebhookReceiver({ mode: 'redirect', secret: target.secret });
    redirecting.redirectTo = target.url;
    const outbox = await outboxWith([endpoint('moved', redirecting)], { pollMs: 20, firstRetryMs: 50, maxRetryMs: 50 });
    try {
      await outbox.emit('redirect-user');
      await eventually('two attempts', () => redirecting.requests.length >= 2);
      assert.equal(target.requests.length, 0);
      assert.ok(outbox.logs.some((l) => l.includes('"error":"http_307"')));
    } finally {
      await outbox.close();
      await redirecting.close();
      await target.close();
    }
  });

  it('cuts an attempt that takes longer than its timeout, and tries again', async () => {
    const receiver = await startWebhookReceiver({ mode: 'hang' });
    const outbox = await outboxWith([endpoint('slow', receiver)], {
      pollMs: 20,
      attemptTimeoutMs: 200,
      leaseMs: 1_000,
      firstRetryMs: 50,
      maxRetryMs: 50,
    });
    try {
      await outbox.emit('slow-user');
      await eventually('a second attempt after the first timed out', () => receiver.requests.length >= 2, { timeoutMs: 3_000 });
      assert.ok(outbox.logs.some((l) => l.includes('"error":"timeout"')));
      receiver.mode = 'ok';
      await eventually('the delivery', () => receiver.events[0], { timeoutMs: 3_000 });
    } finally {
      await outbox.close();
      await receiver.close();
    }
  });

  it('close() cuts an attempt in flight at once and releases its row for a retry (shutdown is not held by a silent receiver)', async () => {
    const receiver = await startWebhookReceiver({ mode: 'hang' });
    const outbox = await outboxWith([endpoint('silent', receiver)], { pollMs: 20, attemptTimeoutMs: 20_000, leaseMs: 30_000 });
    try {
      await outbox.emit('shutdown-user');
      const attempt = await eventually('the attempt at the receiver', () => receiver.requests[0]);
      const started = Date.now();
      await outbox.delivery.close();
      assert.ok(Date.now() - started < 2_000, `close took ${Date.now() - started} ms`);
      const row = (await outbox.store.webhooks.byId(attempt.id!))!;
      assert.deepEqual([row.status, row.claimed_by], ['pending', null], 'released, not left claimed until the lease lapses');
    } finally {
      await outbox.close();
      await receiver.close();
    }
  });

  it('counts no attempt for a delivery its own shutdown cut off, moves no backoff, and the next instance sends it at once', async () => {
    const receiver = await startWebhookReceiver({ mode: 'hang' });
    // A retry an hour away: were the cut attempt counted as a failure, the next instance would wait it out.
    const timings = { pollMs: 20, attemptTimeoutMs: 20_000, leaseMs: 30_000, firstRetryMs: 3_600_000 };
    const first = await outboxWith([endpoint('restarting', receiver)], timings);
    try {
      await first.emit('restart-user');
      const attempt = await eventually('the attempt at the receiver', () => receiver.requests[0]);
      await first.delivery.close();
      const released = (await first.store.webhooks.byId(attempt.id!))!;
      assert.deepEqual(
        [released.status, released.claimed_by, released.attempts, released.last_error],
        ['pending', null, 0, null],
        'released with no attempt counted and no error recorded',
      );
      assert.ok(released.due_at <= Date.now(), 'due at once, not after a backoff');
      assert.ok(!first.logs.some((l) => l.includes('"event":"webhook_attempt_failed"')), 'not logged as a failed attempt');

      receiver.mode = 'ok';
      const next = createWebhooks(first.store, [endpoint('restarting', receiver)], createLogger('error'), {
        egress: LOOPBACK_EGRESS,
        ...timings,
      }).delivery;
      next.start();
      try {
        const delivered = await eventually('the next instance delivers it', () => receiver.events[0], { timeoutMs: 3_000 });
        assert.equal(delivered.id, attempt.id);
        // The receiver has the event before the outbox has its answer and marks the row.
        const row = await eventually('the row marked delivered', async () => {
          const r = (await first.store.webhooks.byId(attempt.id!))!;
          return r.status === 'delivered' && r;
        });
        assert.equal(row.attempts, 1);
      } finally {
        await next.close();
      }
    } finally {
      await first.close();
      await receiver.close();
    }
  });

  it('keeps at most `concurrency` attempts in flight per instance, and delivers every event once', async () => {
    const receiver = await startWebhookReceiver();
    receiver.delayMs = 100;
    const outbox = await outboxWith([endpoint('busy', receiver)], { pollMs: 20, concurrency: 2 });
    try {
      await Promise.all(Array.from({ length: 10 }, (_, i) => outbox.emit(`busy-${i}`)));
      await eventually('ten deliveries', () => receiver.events.length === 10, { timeoutMs: 5_000 });
      assert.equal(receiver.inflightPeak, 2);
      assert.equal(receiver.duplicates, 0);
    } finally {
      await outbox.close();
      await receiver.close();
    }
  });

  it('refuses a lease that an attempt could outlast (two instances could then send one event at once)', () => {
    assert.throws(
      () => new WebhookDelivery({} as Store, [], createLogger('error'), { attemptTimeoutMs: 30_000, leaseMs: 30_000 }),
      RangeError,
    );
  });
});

describe('webhook signatures and schedule', () => {
  it('signs as Standard Webhooks does (the known-answer vector of its reference libraries)', () => {
    const key = Buffer.from('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'base64');
    assert.equal(
      webhookSignature(key, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}'),
      'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    );
  });

  it("docs/operations.md's verification sample accepts the broker's signature and refuses an altered body or an old timestamp", async () => {
    const operations = readFileSync(join(import.meta.dirname, '..', 'docs', 'operations.md'), 'utf8');
    const section = operations.slice(operations.indexOf('## Webhooks'));
    const sample = /```js\n([\s\S]*?)```/.exec(section)?.[1];
    assert.ok(sample?.includes('function verifyWebhook'), 'docs/operations.md shows verifyWebhook');
    const dir = makeTempDir('webhooks-readme-');
    try {
      const file = dir.file('verify.mjs');
      writeFileSync(file, `${sample}\nexport { verifyWebhook };\n`);
      const { verifyWebhook } = (await import(pathToFileURL(file).href)) as {
        verifyWebhook: (secret: string, headers: Record<string, string>, body: string) => boolean;
      };
      const secret = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
      const ts = Math.floor(Date.now() / 1000);
      const body = '{"type":"connection.created"}';
      const headers = (t: number) => ({
        'webhook-id': 'msg_readme',
        'webhook-timestamp': String(t),
        'webhook-signature': webhookSignature(Buffer.alloc(32, 9), 'msg_readme', t, body),
      });
      assert.equal(verifyWebhook(secret, headers(ts), body), true);
      assert.equal(verifyWebhook(secret, headers(ts), `${body} `), false);
      assert.equal(verifyWebhook(secret, headers(ts - 600), body), false);
    } finally {
      dir.close();
    }
  });

  it("the test receiver's own check refuses a wrong key, an altered body and a timestamp more than five minutes old", () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const key = Buffer.from(secret.slice(6), 'base64');
    const now = 1_800_000_000;
    const headers = (ts: number, body: string, k = key) => ({
      'webhook-id': 'msg_1',
      'webhook-timestamp': String(ts),
      'webhook-signature': webhookSignature(k, 'msg_1', ts, body),
    });
    assert.equal(verifySignature(secret, headers(now, '{}'), '{}', now), true);
    assert.equal(verifySignature(secret, headers(now, '{}', Buffer.alloc(24, 1)), '{}', now), false);
    assert.equal(verifySignature(secret, headers(now, '{}'), '{"x":1}', now), false);
    assert.equal(verifySignature(secret, headers(now - 301, '{}'), '{}', now), false);
  });

  it('retries first within 30 s, then doubles up to an hour between tries, for a day, then gives up', () => {
    const created = 0;
    const delays: number[] = [];
    let now = created;
    for (let attempts = 1; ; attempts += 1) {
      const at = nextAttemptAt({ attempts, created_at: created }, now);
      if (at === null) break;
      delays.push(at - now);
      now = at;
    }
    assert.ok(delays[0]! <= 30_000, `first retry after ${delays[0]} ms`);
    assert.equal(delays[1], delays[0]! * 2);
    assert.ok(Math.max(...delays) <= HOUR);
    assert.ok(delays.includes(HOUR), 'the backoff reaches an hour');
    assert.equal(now, created + 24 * HOUR, 'the last try is at the end of the day');
    assert.equal(nextAttemptAt({ attempts: 99, created_at: created }, created + 24 * HOUR), null);
  });
});
