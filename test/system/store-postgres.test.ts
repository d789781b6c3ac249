// The PostgreSQL store against a real throwaway cluster (see support/postgres.ts): what only it
// has — migrations, the pool, the LISTEN/NOTIFY feed, surviving a restart. What every store
// promises (each repository, transactions) is in store-contract.test.ts, run on both stores;
// on PostgreSQL its two instances are two pools, so openOrCreate's advisory lock is raced across pools there.
import assert from 'node:assert/strict';
import { connect, createServer, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { principalFromVerifiedClaims } from '../../src/auth/principal.js';
import { rotateKeys } from '../../src/cli/rotate-keys.js';
import { rotationText } from '../../src/cli/rotation/messages.js';
import { clientSecretContext } from '../../src/providers/mcp-auth/registration.js';
import { ConnectionService } from '../../src/connections/index.js';
import { ConnectLinks } from '../../src/connections/links.js';
import { Sealer } from '../../src/crypto/index.js';
import { createLogger } from '../../src/log.js';
import { MIGRATIONS_DIR, openPostgresStore, type PostgresStoreOptions } from '../../src/store/postgres/index.js';
import { createPool, ping } from '../../src/store/postgres/pool.js';
import { StoreUnavailableError } from '../../src/store/errors.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import type { Owner, Store } from '../../src/store/types.js';
import { startPostgres, type PgServer } from '../support/postgres.js';
import { scriptedProvider } from '../support/scripted-provider.js';
import { connection, pendingRow } from '../support/store-rows.js';

const ALICE: Owner = { issuer: 'https://idp.example.com', subject: 'alice' };
const HOUR = 3_600_000;

let server: PgServer;
const opened: Store[] = [];

before(async () => {
  server = await startPostgres();
});

after(async () => {
  await Promise.all(opened.map((s) => s.close()));
  await server?.destroy();
});

async function open(url: string, options?: PostgresStoreOptions): Promise<Store> {
  const store = await openPostgresStore(url, options);
  opened.push(store);
  return store;
}

/** Runs one statement on a plain connection of its own, to look at the database from outside. */
async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(url: string, text: string, values?: unknown[]): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

async function eventually(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(5);
  }
}

describe('migrations', () => {
  test('three instances starting together on a fresh database apply each migration exactly once', async () => {
    const url = await server.createDatabase();
    const stores = await Promise.all([open(url), open(url), open(url)]);
    assert.deepEqual(
      stores.map((s) => s.kind),
      ['postgres', 'postgres', 'postgres'],
    );
    const applied = await sql<{ name: string; applied_at: number }>(url, 'SELECT name, applied_at FROM schema_migrations ORDER BY name');
    assert.deepEqual(
      applied.map((m) => m.name),
      readdirSync(MIGRATIONS_DIR)
        .filter((f) => f.endsWith('.sql'))
        .sort(),
      'every shipped migration, once each',
    );
    assert.ok(applied.length >= 3);

    const fourth = await open(url);
    const again = await sql<{ name: string; applied_at: string }>(url, 'SELECT name, applied_at FROM schema_migrations ORDER BY name');
    assert.deepEqual(
      again.map((m) => m.applied_at),
      applied.map((m) => m.applied_at),
      'a later start applies nothing again',
    );
    await fourth.sessions.create('after-migrate', Date.now() + HOUR);
    assert.ok(await stores[0]!.sessions.find('after-migrate'), 'every instance sees the same schema and data');
  });

  test('creates the broker tables, without pending_events, with connections.seq', async () => {
    const url = await server.createDatabase();
    await open(url);
    const tables = await sql<{ table_name: string }>(
      url,
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
    );
    assert.deepEqual(
      tables.map((t) => t.table_name),
      [
        'approval_decisions',
        'approval_requests',
        'audit_chain_anchors',
        'audit_chain_voids',
        'audit_events',
        'browser_sessions',
        'connection_service_usage',
        'connections',
        'login_transactions',
        'oauth_flows',
        'pending_connections',
        'rate_limit_windows',
        'refresh_leases',
        'schema_migrations',
        'upstream_clients',
        'upstream_tools',
        'used_client_assertions',
        'webhook_outbox',
      ],
    );
    const seq = await sql<{ data_type: string; column_default: string }>(
      url,
      "SELECT data_type, column_default FROM information_schema.columns WHERE table_name = 'connections' AND column_name = 'seq'",
    );
    assert.equal(seq[0]?.data_type, 'bigint');
    assert.match(seq[0]?.column_default ?? '', /nextval/);
    await assert.rejects(
      sql(
        url,
        "INSERT INTO pending_connections (id, link_hash, issuer, subject, provider, status, created_at, expires_at, updated_at) VALUES ('x', 'x', 'i', 's', 'p', 'bogus', 0, 0, 0)",
      ),
      /check constraint/,
    );
  });

  test('expresses the same broker schema as the SQLite migrations: tables, columns and indexes', async () => {
    const url = await server.createDatabase();
    await open(url);
    const pgColumns = await sql<{ table_name: string; column_name: string }>(
      url,
      "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'",
    );
    const pgIndexes = await sql<{ indexname: string }>(
      url,
      "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND indexname NOT LIKE '%_pkey' AND indexname NOT LIKE '%_key'",
    );
    const dir = mkdtempSync(join(tmpdir(), 'broker-parity-'));
    const sqlite = openDatabase(join(dir, 'parity.db'));
    try {
      // The retired pending_events lives only in SQLite (kept one release for processes of the previous one).
      const tables = (
        sqlite
          .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'pending_events'")
          .all() as Array<{ name: string }>
      ).map((t) => t.name);
      const sqliteColumns = tables.flatMap((t) =>
        (sqlite.prepare(`SELECT name FROM pragma_table_info(?)`).all(t) as Array<{ name: string }>).map((c) => `${t}.${c.name}`),
      );
      const sqliteIndexes = (
        sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'").all() as Array<{ name: string }>
      ).map((i) => i.name);
      // connections.seq is PostgreSQL's stand-in for SQLite's implicit rowid (the rotation cursor).
      assert.deepEqual(
        pgColumns
          .map((c) => `${c.table_name}.${c.column_name}`)
          .filter((c) => c !== 'connections.seq')
          .sort(),
        sqliteColumns.sort(),
      );
      assert.deepEqual(pgIndexes.map((i) => i.indexname).sort(), sqliteIndexes.sort());
    } finally {
      sqlite.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the pool', () => {
  let url: string;
  let store: Store;

  before(async () => {
    url = await server.createDatabase();
    store = await open(url);
  });

  test('the pool identifies itself and returns BIGINT as numbers without touching pg’s global parsers', async () => {
    await store.ping();
    const apps = await sql<{ n: string }>(
      url,
      "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'mcp-connect-broker' AND datname = current_database()",
    );
    assert.ok(Number(apps[0]!.n) >= 1, 'the pool connects as mcp-connect-broker');
    const plain = await sql<{ big: unknown }>(url, 'SELECT 9007199254740991::bigint AS big');
    assert.equal(plain[0]!.big, '9007199254740991', 'a plain pg client still gets BIGINT as a string');
    await store.sessions.create('s-bigint', 9007199254740991);
    assert.equal((await store.sessions.find('s-bigint', 0))?.expires_at, 9007199254740991, 'the store’s own clients get a number');
  });

  test('the pool sets the statement timeout on its connections, and a slow statement is cancelled', async () => {
    const pool = createPool(url, { poolMax: 1, statementTimeoutMs: 200, connectTimeoutMs: 5_000, onError: () => {} });
    try {
      assert.equal((await pool.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0]!.statement_timeout, '200ms');
      const started = Date.now();
      await assert.rejects(pool.query('SELECT pg_sleep(5)'), (err: { code?: string }) => err.code === '57014');
      assert.ok(Date.now() - started < 1_000);
      await pool.query('SELECT 1');
    } finally {
      await pool.end();
    }
  });
});

describe('settled feed', () => {
  let a: Store;
  let b: Store;

  before(async () => {
    const url = await server.createDatabase();
    [a, b] = await Promise.all([open(url), open(url)]);
  });

  test('a settlement on one instance reaches another within 100 ms, once, and only when committed', async () => {
    const feed = b.settledFeed;
    assert.ok(feed, 'the postgres store has a settled feed');
    assert.equal(feed.live, false, 'connects lazily, on the first subscribe');
    const seen: Array<{ id: string; at: number }> = [];
    const liveChanges: boolean[] = [];
    const unsubscribe = feed.subscribe(
      (id) => seen.push({ id, at: performance.now() }),
      (live) => liveChanges.push(live),
    );
    await eventually(() => feed.live, 5_000, 'the feed to come up');
    assert.deepEqual(liveChanges, [true]);

    const row = pendingRow(ALICE);
    await a.pending.create(row);
    const start = performance.now();
    assert.equal(await a.pending.settle(row.id, 'completed'), true);
    await eventually(() => seen.length > 0, 1_000, 'the notification');
    const latency = seen[0]!.at - start;
    assert.equal(seen[0]!.id, row.id);
    assert.ok(latency < 100, `delivered in ${latency.toFixed(1)} ms`);

    assert.equal(await a.pending.settle(row.id, 'failed'), false);
    const rolledBack = pendingRow(ALICE);
    await a.pending.create(rolledBack);
    await assert.rejects(
      a.transaction(async (tx) => {
        assert.equal(await tx.pending.settle(rolledBack.id, 'cancelled'), true);
        throw new Error('abort');
      }),
      /abort/,
    );
    const committed = pendingRow(ALICE);
    await a.pending.create(committed);
    await a.transaction((tx) => tx.pending.settle(committed.id, 'denied'));
    await eventually(() => seen.length >= 2, 1_000, 'the committed settlement');
    await sleep(50);
    assert.deepEqual(
      seen.map((s) => s.id),
      [row.id, committed.id],
      'no notification for the second settle nor for the rolled-back one',
    );

    unsubscribe();
    const quiet = pendingRow(ALICE);
    await a.pending.create(quiet);
    await a.pending.settle(quiet.id, 'completed');
    await sleep(50);
    assert.equal(seen.length, 2, 'an unsubscribed listener hears nothing more');
  });
});

describe('ping', () => {
  test('rejects within about 2 s when the server accepts TCP but never answers', async () => {
    const sockets = new Set<Socket>();
    const blackhole = createServer((s) => sockets.add(s));
    await new Promise<void>((resolve) => blackhole.listen(0, '127.0.0.1', resolve));
    const { port } = blackhole.address() as { port: number };
    const pool = createPool(`postgres://broker@127.0.0.1:${port}/none`, {
      poolMax: 1,
      statementTimeoutMs: 5_000,
      connectTimeoutMs: 5_000,
      onError: () => {},
    });
    try {
      const started = Date.now();
      await assert.rejects(ping(pool), /did not answer within 2000 ms/);
      const took = Date.now() - started;
      assert.ok(took >= 1_900 && took < 3_000, `rejected after ${took} ms`);
    } finally {
      for (const s of sockets) s.destroy();
      await pool.end().catch(() => {});
      await new Promise((resolve) => blackhole.close(resolve));
    }
  });

  test('answers while every connection of the main pool is busy: load is not an outage', async () => {
    const store = await open(await server.createDatabase(), { poolMax: 1 });
    let release!: () => void;
    const busy = store.transaction(async (tx) => {
      await tx.pending.byId('hold-the-only-connection');
      await new Promise<void>((resolve) => (release = resolve));
    });
    try {
      await sleep(20);
      const started = Date.now();
      await store.ping();
      assert.ok(Date.now() - started < 1_000, 'answered on its own connection, without waiting for the pool');
    } finally {
      release();
      await busy;
    }
  });
});

describe('after the server restarts', () => {
  test('ping fails while it is down; queries, transactions and the feed work again once it is back', async () => {
    const url = await server.createDatabase();
    const errorsA: string[] = [];
    const errorsB: string[] = [];
    const a = await open(url, { onError: (event) => errorsA.push(event) });
    const b = await open(url, { onError: (event) => errorsB.push(event) });

    const seen: string[] = [];
    const liveChanges: boolean[] = [];
    b.settledFeed!.subscribe(
      (id) => seen.push(id),
      (live) => liveChanges.push(live),
    );
    await eventually(() => b.settledFeed!.live, 5_000, 'the feed to come up');
    // Fill A's pool with several idle connections, which the restart will cut.
    await Promise.all(Array.from({ length: 4 }, () => a.pending.settledAmong(['warm-up'])));

    // A transaction holding a client when the server goes: its client errors between statements,
    // which must neither crash the process nor be handed out again.
    let resume!: () => void;
    const gate = new Promise<void>((resolve) => (resume = resolve));
    const inFlight = a.transaction(async (tx) => {
      await tx.pending.byId('before');
      await gate;
      return tx.pending.byId('after');
    });
    inFlight.catch(() => {});
    await sleep(20);

    await server.stop();
    resume();
    await assert.rejects(inFlight, StoreUnavailableError, 'a transaction cut by the outage says the database is away');
    await eventually(() => liveChanges.includes(false), 2_000, 'the feed to report it is down');
    assert.equal(b.settledFeed!.live, false);
    const started = Date.now();
    await assert.rejects(a.ping());
    assert.ok(Date.now() - started < 2_500, 'ping fails fast');
    await assert.rejects(a.pending.byId('x'), StoreUnavailableError, 'so callers can answer 503 / "try again", not 500');
    assert.ok(errorsA.includes('postgres_idle_client_error'), `A was told its idle clients broke: ${errorsA.join(', ')}`);
    assert.ok(errorsB.includes('postgres_listen_connection_lost'), `B was told the feed dropped: ${errorsB.join(', ')}`);

    await server.start();
    await a.ping();
    const row = pendingRow(ALICE);
    await a.pending.create(row);
    assert.equal((await a.pending.byId(row.id))?.status, 'open');
    assert.equal(await a.transaction((tx) => tx.pending.claim(row.id)), true);

    await eventually(() => b.settledFeed!.live, 10_000, 'the feed to reconnect');
    assert.deepEqual(liveChanges, [true, false, true]);
    assert.equal(await a.pending.settle(row.id, 'completed'), true);
    await eventually(() => seen.includes(row.id), 1_000, 'a notification after the restart');
    assert.deepEqual(await b.pending.settledAmong([row.id]), [{ id: row.id, status: 'completed' }]);
  });

  test('close is idempotent and stops the feed from reconnecting', async () => {
    const url = await server.createDatabase();
    const store = await openPostgresStore(url);
    store.settledFeed!.subscribe(
      () => {},
      () => {},
    );
    await eventually(() => store.settledFeed!.live, 5_000, 'the feed to come up');
    const listeners = async () =>
      Number(
        (
          await sql<{ n: string }>(
            url,
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN broker_pending_settled'",
          )
        )[0]!.n,
      );
    assert.equal(await listeners(), 1);
    await Promise.all([store.close(), store.close()]);
    await store.close();
    assert.equal(store.settledFeed!.live, false);
    await sleep(300);
    assert.equal(await listeners(), 0, 'the LISTEN connection is gone and did not come back');
    await assert.rejects(store.ping(), /after calling end|ended/i);
  });
});

describe('key rotation on PostgreSQL', () => {
  test('rotate-keys re-seals every connection and upstream client secret under the current key, in pages, and they open under the new key alone', async () => {
    const store = await open(await server.createDatabase());
    const old = randomBytes(32);
    const oldKey = new Sealer([old]);
    const newKey = randomBytes(32);
    const ring = new Sealer([newKey, old]);
    const owners = Array.from({ length: 7 }, (_, i): Owner => ({ issuer: ALICE.issuer, subject: `rot-${i}` }));
    for (const owner of owners) {
      const sealed = oldKey.seal(JSON.stringify({ accessToken: `tok-${owner.subject}` }), { ...owner, provider: 'github' });
      await store.connections.save(connection(owner, 'github', { key_id: sealed.keyId, sealed_tokens: sealed.value }));
    }
    // The broker's registrations at `auth: mcp` upstreams: five secrets under the old key, one public client.
    const clients = Array.from({ length: 5 }, (_, i) => ({
      issuer: `https://as-${i}.example`,
      client_key: `https://broker.example/connect/u${i}/callback`,
    }));
    for (const c of clients)
      await store.upstreamClients.putIfAbsent(
        registration(c, oldKey.seal(`secret-${c.issuer}`, clientSecretContext(c.issuer, c.client_key))),
      );
    await store.upstreamClients.putIfAbsent(registration({ issuer: 'https://as-public.example', client_key: 'https://broker.example/cb' }));

    const report = await rotateKeys(store, ring, { batchSize: 3 });
    assert.equal(report.resealed, 7);
    assert.equal(report.unreadable, 0);
    assert.deepEqual(report.clientSecrets, { resealed: 5, skippedConcurrent: 0, unreadable: 0, unreadableIssuers: [] });
    assert.deepEqual(report.keysInUse, [{ key_id: ring.keyId, n: 12 }]);
    assert.equal(report.olderKeysRemovable, true);
    const newRingAlone = new Sealer([newKey]);
    for (const owner of owners) {
      const row = (await store.connections.find(owner, 'github'))!;
      assert.equal(row.key_id, ring.keyId);
      assert.equal(
        JSON.parse(newRingAlone.open({ keyId: row.key_id, value: row.sealed_tokens }, { ...owner, provider: 'github' })).accessToken,
        `tok-${owner.subject}`,
      );
    }
    for (const c of clients) {
      const row = (await store.upstreamClients.find(c.issuer, c.client_key))!;
      assert.equal(row.key_id, ring.keyId);
      assert.equal(
        newRingAlone.open({ keyId: row.key_id!, value: row.client_secret_sealed! }, clientSecretContext(c.issuer, c.client_key)),
        `secret-${c.issuer}`,
      );
    }
    const pub = (await store.upstreamClients.find('https://as-public.example', 'https://broker.example/cb'))!;
    assert.deepEqual([pub.client_secret_sealed, pub.key_id], [null, null], 'a public client has nothing to seal');
    const audit = await store.audit.list({ event: 'keys_rotated' });
    assert.deepEqual(
      audit.map((r) => r.detail),
      [`resealed 7, unreadable 0; client secrets resealed 5, unreadable 0; under ${ring.keyId}`],
    );
  });

  test('rotate-keys does not say older keys can go while a client secret stays under a key that left the ring', async () => {
    const store = await open(await server.createDatabase());
    const ring = new Sealer([randomBytes(32)]);
    const sealed = ring.seal('{"accessToken":"tok"}', { ...ALICE, provider: 'github' });
    await store.connections.save(connection(ALICE, 'github', { key_id: sealed.keyId, sealed_tokens: sealed.value }));
    const lost = new Sealer([{ id: 'lost', key: randomBytes(32) }]);
    const c = { issuer: 'https://as.lost.example', client_key: 'https://broker.example/connect/lost/callback' };
    await store.upstreamClients.putIfAbsent(registration(c, lost.seal('secret', clientSecretContext(c.issuer, c.client_key))));

    const report = await rotateKeys(store, ring);
    assert.deepEqual(report.clientSecrets, { resealed: 0, skippedConcurrent: 0, unreadable: 1, unreadableIssuers: [c.issuer] });
    assert.deepEqual(report.keysInUse, [
      { key_id: ring.keyId, n: 1 }, // "k…": a derived id sorts before "lost"
      { key_id: 'lost', n: 1 },
    ]);
    assert.equal(report.olderKeysRemovable, false);
    const text = rotationText(report);
    assert.doesNotMatch(text, /older keys can be removed/);
    assert.match(
      text,
      /1 upstream client secret\(s\) sealed under a key no longer in TOKEN_ENCRYPTION_KEYS \(https:\/\/as\.lost\.example\)/,
    );
  });
});

/** A registration row as src/providers/mcp-auth/registration.ts stores it, with `secret` (sealed) or none. */
function registration(c: { issuer: string; client_key: string }, secret?: { keyId: string; value: string }) {
  return {
    ...c,
    client_id: `client-${c.issuer}`,
    client_secret_sealed: secret?.value ?? null,
    key_id: secret?.keyId ?? null,
    registered_at: Date.now(),
    metadata_json: '{"token_endpoint_auth_method":"client_secret_basic"}',
  };
}

describe('the token service during a database blip', () => {
  test('keeps a refreshed token pair the provider already rotated, even when the write first finds the database away', async () => {
    const url = await server.createDatabase();
    const store = await open(url);
    const sealer = new Sealer([randomBytes(32)]);
    const service = new ConnectionService(
      store,
      sealer,
      createLogger('error', () => {}),
      { pollMs: 20 },
    );
    const owner = principalFromVerifiedClaims(ALICE.issuer, 'blip');
    await service.save(
      owner,
      'github',
      { id: '9', login: 'blip' },
      { accessToken: 'ghu_old', tokenType: 'bearer', refreshToken: 'ghr_old', expiresAt: Date.now() - 1_000, scopes: [] },
      { refuseShared: false },
    );
    let restarted: Promise<void> | undefined;
    const provider = scriptedProvider(async () => {
      // GitHub has answered (ghr_old is now dead upstream) just as the database goes away for 1.5 s.
      await server.stop();
      restarted = sleep(1_500).then(() => server.start());
      return { accessToken: 'ghu_new', tokenType: 'bearer', refreshToken: 'ghr_new', expiresAt: Date.now() + HOUR, scopes: [] };
    });
    try {
      const usable = await service.usable(owner, provider);
      assert.equal(usable.kind, 'ok');
      assert.equal(usable.kind === 'ok' && usable.connection.tokens.refreshToken, 'ghr_new');
    } finally {
      await restarted;
    }
    const stored = await service.open(owner, 'github');
    assert.equal(stored?.tokens.refreshToken, 'ghr_new', 'the only live refresh token is in the store');
    assert.equal(stored?.row.status, 'active');
  });
});

describe('client-chosen text', () => {
  test('a client name with control characters (NUL included) still makes a connect link, stored without them', async () => {
    const store = await open(await server.createDatabase());
    const links = new ConnectLinks(store, new URL('https://broker.example.com'), randomBytes(32), 600);
    const pending = await links.create(principalFromVerifiedClaims(ALICE.issuer, ALICE.subject), 'github', 'Evil\u0000Cli\u001bent\n');
    assert.equal(pending.client_name, 'EvilClient');
    assert.equal(
      (await links.create(principalFromVerifiedClaims(ALICE.issuer, ALICE.subject), 'github', '\u0000\u0001')).client_name,
      null,
    );
  });

  test('a client name loses its bidi and format characters, and the purpose a tool gives is stored with the link (none for a page-made one)', async () => {
    const store = await open(await server.createDatabase());
    const links = new ConnectLinks(store, new URL('https://broker.example.com'), randomBytes(32), 600);
    const alice = principalFromVerifiedClaims(ALICE.issuer, ALICE.subject);
    const asked = await links.create(alice, 'github', 'Trusted\u202E\u200D Bot\uFEFF', ['repo'], 'create the issue in acme/widgets');
    assert.equal(asked.client_name, 'Trusted Bot');
    assert.equal((await store.pending.byId(asked.id))?.purpose, 'create the issue in acme/widgets');
    assert.equal((await links.create(alice, 'github', undefined)).purpose, null);
  });
});

describe('shutdown', () => {
  test('close() returns within a couple of seconds even when the network to the database went silent', { timeout: 10_000 }, async () => {
    // A TCP relay to the server that can stop relaying without closing anything: a blackhole.
    let frozen = false;
    const pairs: Socket[] = [];
    const relay = createServer({ allowHalfOpen: true }, (inbound) => {
      const outbound = connect(server.port, '127.0.0.1');
      pairs.push(inbound, outbound);
      inbound.on('data', (d) => void (frozen || outbound.write(d)));
      outbound.on('data', (d) => void (frozen || inbound.write(d)));
      inbound.on('end', () => void (frozen || outbound.end()));
      outbound.on('end', () => void (frozen || inbound.end()));
      inbound.on('error', () => {});
      outbound.on('error', () => {});
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const { port } = relay.address() as { port: number };
    const url = new URL(await server.createDatabase());
    url.host = `127.0.0.1:${port}`;
    const store = await openPostgresStore(url.href);
    try {
      store.settledFeed!.subscribe(
        () => {},
        () => {},
      );
      await eventually(() => store.settledFeed!.live, 5_000, 'the feed to come up');
      await store.ping();
      frozen = true;
      const started = Date.now();
      await store.close();
      assert.ok(Date.now() - started < 3_000, `closed after ${Date.now() - started} ms`);
    } finally {
      for (const s of pairs) s.destroy();
      await new Promise((resolve) => relay.close(resolve));
    }
  });
});
