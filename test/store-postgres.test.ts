// The PostgreSQL store against a real throwaway cluster (see support/postgres.ts): migrations,
// every repository's semantics, transactions, the LISTEN/NOTIFY feed, and surviving a restart.
import assert from 'node:assert/strict';
import { connect, createServer, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import { rotateKeys } from '../src/cli/rotate-keys.js';
import { ConnectionService } from '../src/connect/connections.js';
import { ConnectLinks } from '../src/connect/links.js';
import { Sealer } from '../src/crypto/index.js';
import { createLogger } from '../src/log.js';
import { MIGRATIONS_DIR, openPostgresStore, type PostgresStoreOptions } from '../src/store/postgres/index.js';
import { createPool, ping } from '../src/store/postgres/pool.js';
import { StoreUnavailableError } from '../src/store/errors.js';
import { openDatabase } from '../src/store/sqlite/database.js';
import { PENDING_PRUNE_GRACE_MS, type NewConnection, type Owner, type PendingConnection, type Store } from '../src/store/types.js';
import { startPostgres, type PgServer } from './support/postgres.js';
import { scriptedProvider } from './support/scripted-provider.js';

const ALICE: Owner = { issuer: 'https://idp.example.com', subject: 'alice' };
const BOB: Owner = { issuer: 'https://idp.example.com', subject: 'bob' };
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

let nextId = 0;
function pendingRow(owner: Owner, overrides: Partial<PendingConnection> = {}): Omit<PendingConnection, 'status' | 'created_at' | 'updated_at' | 'outcome_reason'> {
  const id = overrides.id ?? `pc-${++nextId}-${Math.random().toString(36).slice(2, 8)}`;
  return { id, link_hash: `link-${id}`, issuer: owner.issuer, subject: owner.subject, provider: 'github', client_name: 'Claude', scopes: 'repo', expires_at: Date.now() + HOUR, ...overrides };
}

function connection(owner: Owner, provider: string, overrides: Partial<NewConnection> = {}): NewConnection {
  return { ...owner, provider, account_id: `acct-${owner.subject}`, account_login: owner.subject, scopes: 'repo', key_id: 'k1', sealed_tokens: `sealed-${owner.subject}-${provider}-1`, ...overrides };
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
      readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.sql')).sort(),
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
    const tables = await sql<{ table_name: string }>(url, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name");
    assert.deepEqual(
      tables.map((t) => t.table_name),
      ['audit_events', 'browser_sessions', 'connections', 'login_transactions', 'oauth_flows', 'pending_connections', 'rate_limit_windows', 'refresh_leases', 'schema_migrations'],
    );
    const seq = await sql<{ data_type: string; column_default: string }>(url, "SELECT data_type, column_default FROM information_schema.columns WHERE table_name = 'connections' AND column_name = 'seq'");
    assert.equal(seq[0]?.data_type, 'bigint');
    assert.match(seq[0]?.column_default ?? '', /nextval/);
    await assert.rejects(sql(url, "INSERT INTO pending_connections (id, link_hash, issuer, subject, provider, status, created_at, expires_at, updated_at) VALUES ('x', 'x', 'i', 's', 'p', 'bogus', 0, 0, 0)"), /check constraint/);
  });

  test('expresses the same broker schema as the SQLite migrations: tables, columns and indexes', async () => {
    const url = await server.createDatabase();
    await open(url);
    const pgColumns = await sql<{ table_name: string; column_name: string }>(url, "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'");
    const pgIndexes = await sql<{ indexname: string }>(url, "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND indexname NOT LIKE '%_pkey' AND indexname NOT LIKE '%_key'");
    const dir = mkdtempSync(join(tmpdir(), 'broker-parity-'));
    const sqlite = openDatabase(join(dir, 'parity.db'));
    try {
      // Development mode's own tables (sandbox GitHub, dev IdP) live only in SQLite, and so does the
      // retired pending_events (kept one release for processes of the previous one).
      const tables = (
        sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'sandbox_%' AND name NOT LIKE 'dev_%' AND name != 'pending_events'").all() as Array<{ name: string }>
      ).map((t) => t.name);
      const sqliteColumns = tables.flatMap((t) => (sqlite.prepare(`SELECT name FROM pragma_table_info(?)`).all(t) as Array<{ name: string }>).map((c) => `${t}.${c.name}`));
      const sqliteIndexes = (sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'").all() as Array<{ name: string }>).map((i) => i.name);
      // connections.seq is PostgreSQL's stand-in for SQLite's implicit rowid (the rotation cursor).
      assert.deepEqual(pgColumns.map((c) => `${c.table_name}.${c.column_name}`).filter((c) => c !== 'connections.seq').sort(), sqliteColumns.sort());
      assert.deepEqual(pgIndexes.map((i) => i.indexname).sort(), sqliteIndexes.filter((i) => !i.startsWith('sandbox_') && !i.startsWith('dev_')).sort());
    } finally {
      sqlite.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('repositories', () => {
  let url: string;
  let store: Store;

  before(async () => {
    url = await server.createDatabase();
    store = await open(url);
  });

  test('the pool identifies itself and returns BIGINT as numbers without touching pg’s global parsers', async () => {
    await store.ping();
    const apps = await sql<{ n: string }>(url, "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'mcp-connect-broker' AND datname = current_database()");
    assert.ok(Number(apps[0]!.n) >= 1, 'the pool connects as mcp-connect-broker');
    const plain = await sql<{ big: unknown }>(url, 'SELECT 9007199254740991::bigint AS big');
    assert.equal(plain[0]!.big, '9007199254740991', 'a plain pg client still gets BIGINT as a string');
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

  test('sessions: create, find unexpired only, rotate to a signed-in id, delete', async () => {
    const now = Date.now();
    await store.sessions.create('s-anon', now + HOUR);
    const anon = await store.sessions.find('s-anon');
    assert.equal(anon?.issuer, null);
    assert.equal(typeof anon?.created_at, 'number');
    assert.equal(anon?.expires_at, now + HOUR);
    assert.equal(await store.sessions.find('s-anon', now + HOUR), undefined, 'expired at expires_at');

    await store.sessions.rotateSignedIn('s-anon', 's-alice', { ...ALICE, name: 'Alice' }, now + 2 * HOUR);
    assert.equal(await store.sessions.find('s-anon'), undefined, 'the old id is gone (no fixation)');
    const signed = await store.sessions.find('s-alice');
    assert.deepEqual({ issuer: signed?.issuer, subject: signed?.subject, display_name: signed?.display_name }, { ...ALICE, display_name: 'Alice' });

    await store.sessions.delete('s-alice');
    assert.equal(await store.sessions.find('s-alice'), undefined);
  });

  test('rotateSignedIn is atomic: a clash on the new id keeps the old session', async () => {
    await store.sessions.create('s-keep', Date.now() + HOUR);
    await store.sessions.create('s-taken', Date.now() + HOUR);
    await assert.rejects(store.sessions.rotateSignedIn('s-keep', 's-taken', { ...BOB, name: 'Bob' }, Date.now() + HOUR), (err: unknown) => !(err instanceof StoreUnavailableError) && /duplicate key/.test(String(err)), 'a constraint violation is a bug to report, not an outage');
    assert.ok(await store.sessions.find('s-keep'), 'the delete was rolled back with the failed insert');
  });

  test('login transactions and OAuth flows are taken exactly once, and only by the session that started them', async () => {
    await store.loginTransactions.put({ state_hash: 'st-1', session_hash: 'sh', code_verifier: 'cv', nonce: 'n', return_to: '/connections', expires_at: Date.now() + HOUR });
    assert.equal(await store.loginTransactions.take('st-1', 'another-browser'), undefined, 'another session consumes nothing');
    const takes = await Promise.all(Array.from({ length: 10 }, () => store.loginTransactions.take('st-1', 'sh')));
    const got = takes.filter((t) => t !== undefined);
    assert.equal(got.length, 1);
    assert.equal(got[0]!.return_to, '/connections');
    assert.equal(typeof got[0]!.expires_at, 'number');

    const pending = pendingRow(ALICE);
    await store.pending.create(pending);
    const flow = { state_hash: 'of-1', pending_id: pending.id, session_hash: 'sh', code_verifier: 'cv', expires_at: Date.now() + HOUR };
    await store.oauthFlows.put(flow);
    assert.equal(await store.oauthFlows.take('of-1', 'another-browser', 'github'), undefined);
    assert.equal(await store.oauthFlows.take('of-1', 'another-browser', 'github'), undefined, 'another session consumes nothing');
    assert.equal(await store.oauthFlows.take('of-1', 'sh', 'gitlab'), undefined, "another provider's callback consumes nothing");
    const flowTakes = await Promise.all(Array.from({ length: 10 }, () => store.oauthFlows.take('of-1', 'sh', 'github')));
    assert.deepEqual(
      flowTakes.filter((t) => t !== undefined),
      [flow],
    );
    assert.equal(await store.oauthFlows.take('of-1', 'sh', 'github'), undefined);
  });

  test('pending: create, look up, newest in flight', async () => {
    const older = pendingRow(BOB, { provider: 'linear' });
    await store.pending.create(older);
    await sleep(2);
    const newer = pendingRow(BOB, { provider: 'linear', client_name: null, scopes: null });
    await store.pending.create(newer);

    const byId = await store.pending.byId(newer.id);
    assert.equal(byId?.status, 'open');
    assert.equal(byId?.client_name, null);
    assert.equal(byId?.scopes, null);
    assert.equal(byId?.outcome_reason, null);
    assert.equal(byId?.created_at, byId?.updated_at);
    assert.equal(typeof byId?.created_at, 'number');
    assert.equal((await store.pending.byLinkHash(older.link_hash))?.id, older.id);
    assert.equal(await store.pending.byId('nope'), undefined);

    assert.equal((await store.pending.latestInFlight(BOB, 'linear'))?.id, newer.id);
    await store.pending.settle(newer.id, 'cancelled');
    assert.equal((await store.pending.latestInFlight(BOB, 'linear'))?.id, older.id, 'settled ones are not in flight');
    assert.equal(await store.pending.latestInFlight(BOB, 'linear', older.expires_at), undefined, 'expired ones are not in flight');
    assert.equal(await store.pending.latestInFlight(ALICE, 'linear'), undefined);
  });

  test('claim succeeds exactly once among 20 concurrent claims, and never on an expired link', async () => {
    const row = pendingRow(ALICE);
    await store.pending.create(row);
    const results = await Promise.all(Array.from({ length: 20 }, () => store.pending.claim(row.id)));
    assert.equal(results.filter(Boolean).length, 1);
    assert.equal((await store.pending.byId(row.id))?.status, 'authorizing');
    assert.equal(await store.pending.claim(row.id), false);

    const expired = pendingRow(ALICE, { expires_at: Date.now() - 1 });
    await store.pending.create(expired);
    assert.equal(await store.pending.claim(expired.id), false);
    assert.equal((await store.pending.byId(expired.id))?.status, 'open');
  });

  test('openOrCreate: 20 concurrent calls for one request make one row, a different request another, and past the cap the oldest open one is cancelled', async () => {
    const owner: Owner = { issuer: 'https://idp.example.com', subject: `bounded-${Math.random().toString(36).slice(2, 8)}` };
    const results = await Promise.all(Array.from({ length: 20 }, () => store.pending.openOrCreate(pendingRow(owner, { scopes: null }), 3)));
    assert.equal(new Set(results.map((r) => r.pending.id)).size, 1, 'one row for one (principal, provider, scopes, client)');
    assert.equal(results[0]!.pending.status, 'open');
    const first = results[0]!.pending.id;
    const count = async () => Number((await sql<{ n: string }>(url, "SELECT COUNT(*) AS n FROM pending_connections WHERE subject = $1 AND status = 'open'", [owner.subject]))[0]!.n);
    assert.equal(await count(), 1);

    const completed = pendingRow(owner, { provider: 'gitlab' });
    await store.pending.create(completed);
    await store.pending.settle(completed.id, 'completed');
    await sleep(2);
    const second = await store.pending.openOrCreate(pendingRow(owner, { scopes: 'repo admin:org' }), 3);
    await sleep(2);
    const third = await store.pending.openOrCreate(pendingRow(owner, { client_name: 'Other' }), 3);
    assert.deepEqual([second.cancelled, third.cancelled], [[], []]);
    assert.equal(await count(), 3);

    const notified: string[] = [];
    const unsubscribe = store.settledFeed!.subscribe((id) => notified.push(id), () => undefined);
    try {
      await sleep(100);
      const fourth = await store.pending.openOrCreate(pendingRow(owner, { provider: 'linear' }), 3);
      assert.deepEqual(fourth.cancelled, [first], 'the oldest open one makes room');
      assert.equal(await count(), 3);
      const cancelled = await store.pending.byId(first);
      assert.equal(cancelled?.status, 'cancelled');
      assert.equal(cancelled?.outcome_reason, 'superseded');
      assert.equal((await store.pending.byId(completed.id))?.status, 'completed', 'a completed one is never cancelled');
      await eventually(() => notified.includes(first), 2_000, 'the cancellation to be pushed to held calls');
    } finally {
      unsubscribe();
    }
  });

  test('settle changes an unsettled row once; settledAmong reports only settled ones', async () => {
    const a = pendingRow(ALICE);
    const b = pendingRow(ALICE);
    const c = pendingRow(ALICE);
    for (const r of [a, b, c]) await store.pending.create(r);
    assert.equal(await store.pending.claim(b.id), true);

    assert.equal(await store.pending.settle(a.id, 'denied', 'access_denied'), true);
    assert.equal(await store.pending.settle(a.id, 'completed'), false, 'a second settle changes nothing');
    const settledA = await store.pending.byId(a.id);
    assert.equal(settledA?.status, 'denied');
    assert.equal(settledA?.outcome_reason, 'access_denied');

    const concurrent = await Promise.all(Array.from({ length: 10 }, () => store.pending.settle(b.id, 'completed')));
    assert.equal(concurrent.filter(Boolean).length, 1, 'an authorizing row settles exactly once');
    assert.equal(await store.pending.settle('nope', 'failed'), false);

    const settled = await store.pending.settledAmong([a.id, b.id, c.id, 'nope']);
    assert.deepEqual(
      settled.sort((x, y) => x.id.localeCompare(y.id)),
      [
        { id: a.id, status: 'denied' },
        { id: b.id, status: 'completed' },
      ].sort((x, y) => x.id.localeCompare(y.id)),
    );
    assert.deepEqual(await store.pending.settledAmong([]), []);
  });

  test('rate limits: hits count within a window opened by the first hit, a finished window starts again, undo and reset', async () => {
    const key = `rl-${Math.random()}`;
    const t0 = 1_000_000;
    assert.deepEqual(await store.rateLimits.hit(key, 60_000, t0), { hits: 1, resetAt: t0 + 60_000 });
    assert.deepEqual(await store.rateLimits.hit(key, 60_000, t0 + 59_999), { hits: 2, resetAt: t0 + 60_000 });
    const concurrent = await Promise.all(Array.from({ length: 10 }, () => store.rateLimits.hit(key, 60_000, t0 + 1)));
    assert.deepEqual(concurrent.map((r) => r.hits).sort((x, y) => x - y), [3, 4, 5, 6, 7, 8, 9, 10, 11, 12], 'no hit is lost under concurrency');
    await store.rateLimits.undo(key);
    assert.equal((await store.rateLimits.hit(key, 60_000, t0 + 2)).hits, 12);
    assert.deepEqual(await store.rateLimits.hit(key, 60_000, t0 + 60_000), { hits: 1, resetAt: t0 + 120_000 }, 'a new window at the end of the old one');
    await store.rateLimits.reset(key);
    assert.equal((await store.rateLimits.hit(key, 60_000, t0 + 60_001)).hits, 1);
  });

  test('settledSince reports settlements at or after a time, and nothing open or claimed', async () => {
    const before = Date.now();
    const open = pendingRow(BOB);
    const claimed = pendingRow(BOB);
    const settled = pendingRow(BOB);
    for (const r of [open, claimed, settled]) await store.pending.create(r);
    await store.pending.claim(claimed.id);
    await store.pending.settle(settled.id, 'cancelled');
    const since = (await store.pending.settledSince(before)).filter((r) => [open.id, claimed.id, settled.id].includes(r.id));
    assert.deepEqual(since, [{ id: settled.id, status: 'cancelled' }]);
    assert.deepEqual((await store.pending.settledSince(Date.now() + 60_000)).filter((r) => r.id === settled.id), [], 'nothing settled in the future');
  });

  test('connections: save is an upsert that keeps created_at and reactivates', async () => {
    await store.connections.save(connection(ALICE, 'github'));
    const first = await store.connections.find(ALICE, 'github');
    assert.ok(first);
    assert.equal(first.status, 'active');
    assert.equal(first.last_used_at, null);
    assert.equal(typeof first.created_at, 'number');
    assert.equal(Object.hasOwn(first, 'seq'), false, 'rows look the same as SQLite’s');

    assert.equal(await store.connections.markReauthRequired(ALICE, 'github', 'invalid_grant'), true);
    assert.equal(await store.connections.markReauthRequired(ALICE, 'github', 'again'), false, 'only an active row is marked');
    const marked = await store.connections.find(ALICE, 'github');
    assert.deepEqual([marked?.status, marked?.status_reason], ['reauth_required', 'invalid_grant']);

    await sleep(2);
    await store.connections.save(connection(ALICE, 'github', { account_login: 'alice-renamed', sealed_tokens: 'sealed-2' }));
    const again = await store.connections.find(ALICE, 'github');
    assert.equal(again?.created_at, first.created_at);
    assert.ok(again!.updated_at > first.updated_at);
    assert.deepEqual([again?.status, again?.status_reason, again?.account_login, again?.sealed_tokens], ['active', null, 'alice-renamed', 'sealed-2']);

    await store.connections.save(connection(ALICE, 'atlassian'));
    assert.deepEqual(
      (await store.connections.list(ALICE)).map((c) => c.provider),
      ['atlassian', 'github'],
    );
    assert.deepEqual(await store.connections.list({ issuer: 'https://other.example', subject: 'alice' }), []);
  });

  test('connections: replaceTokens is a compare-and-swap; exactly one of concurrent writers wins', async () => {
    await store.connections.save(connection(BOB, 'github', { sealed_tokens: 'v1' }));
    await store.connections.markReauthRequired(BOB, 'github', 'expired');
    const writers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => store.connections.replaceTokens(BOB, 'github', 'v1', { key_id: 'k1', sealed_tokens: `v2-${i}`, scopes: 'repo user' })),
    );
    assert.equal(writers.filter(Boolean).length, 1);
    const row = await store.connections.find(BOB, 'github');
    assert.equal(row?.sealed_tokens, `v2-${writers.indexOf(true)}`);
    assert.deepEqual([row?.scopes, row?.status, row?.status_reason], ['repo user', 'active', null]);
    assert.equal(await store.connections.replaceTokens(BOB, 'github', 'v1', { key_id: 'k1', sealed_tokens: 'stale', scopes: 'repo' }), false);
  });

  test('connections: touch, othersWithAccount, delete', async () => {
    const carol = { issuer: 'https://idp.example.com', subject: 'carol' };
    await store.connections.save(connection(carol, 'gitlab', { account_id: 'shared' }));
    await store.connections.save(connection(BOB, 'gitlab', { account_id: 'shared' }));
    await store.connections.save(connection(ALICE, 'gitlab', { account_id: 'other' }));

    await store.connections.touch(carol, 'gitlab', 1_700_000_000_123);
    assert.equal((await store.connections.find(carol, 'gitlab'))?.last_used_at, 1_700_000_000_123);

    const others = await store.connections.othersWithAccount(carol, 'gitlab', 'shared');
    assert.deepEqual(
      others.map((c) => c.subject),
      ['bob'],
    );
    assert.deepEqual(await store.connections.othersWithAccount(carol, 'github', 'shared'), []);

    assert.equal(await store.connections.delete(carol, 'gitlab'), true);
    assert.equal(await store.connections.delete(carol, 'gitlab'), false);
    assert.equal(await store.connections.find(carol, 'gitlab'), undefined);
  });

  test('connections: re-sealing pages by seq, reseal is a compare-and-swap, countByKey gives numbers', async () => {
    const db = await open(await server.createDatabase());
    for (let i = 0; i < 5; i++) await db.connections.save(connection({ issuer: 'https://idp.example.com', subject: `u${i}` }, 'github', { key_id: i === 2 ? 'k2' : 'k1' }));

    const page1 = await db.connections.sealedUnderOtherKeys('k2', 0, 2);
    assert.equal(page1.length, 2);
    assert.ok(page1.every((r) => typeof r.seq === 'number' && r.key_id === 'k1'));
    assert.ok(page1[0]!.seq < page1[1]!.seq);
    const page2 = await db.connections.sealedUnderOtherKeys('k2', page1[1]!.seq, 10);
    assert.deepEqual(
      [...page1, ...page2].map((r) => r.subject),
      ['u0', 'u1', 'u3', 'u4'],
    );

    assert.deepEqual(await db.connections.countByKey(), [
      { key_id: 'k1', n: 4 },
      { key_id: 'k2', n: 1 },
    ]);

    const target = page1[0]!;
    const updatedAt = target.updated_at;
    assert.equal(await db.connections.reseal(target, { key_id: 'k2', sealed_tokens: 'resealed' }), true);
    assert.equal(await db.connections.reseal(target, { key_id: 'k2', sealed_tokens: 'resealed-again' }), false, 'the row changed since it was read');
    const after = await db.connections.find(target, 'github');
    assert.deepEqual([after?.key_id, after?.sealed_tokens, after?.updated_at], ['k2', 'resealed', updatedAt]);
    assert.deepEqual(await db.connections.countByKey(), [
      { key_id: 'k1', n: 3 },
      { key_id: 'k2', n: 2 },
    ]);
    assert.deepEqual(
      (await db.connections.sealedUnderOtherKeys('k2', 0, 10)).map((r) => r.subject),
      ['u1', 'u3', 'u4'],
    );
  });

  test('leases: one holder at a time; renew only while held; release only by the holder; expiry frees it', async () => {
    const t = Date.now();
    const L = (holder: string, at: number) => store.leases.acquire(ALICE, 'lease-p', holder, 1_000, at);
    assert.equal(await L('a', t), true);
    assert.equal(await L('b', t + 500), false, 'held by a');
    assert.equal(await store.leases.renew(ALICE, 'lease-p', 'b', 1_000, t + 500), false, 'b does not hold it');
    assert.equal(await store.leases.renew(ALICE, 'lease-p', 'a', 1_000, t + 500), true, 'now expires at t + 1500');
    assert.equal(await L('b', t + 1_400), false, 'the renewal pushed the expiry out');
    assert.equal(await L('b', t + 1_500), true, 'free once expired');
    assert.equal(await store.leases.renew(ALICE, 'lease-p', 'a', 1_000, t + 1_600), false, 'a lost it');

    await store.leases.release(ALICE, 'lease-p', 'a');
    assert.equal(await L('c', t + 1_600), false, 'a release by a non-holder frees nothing');
    await store.leases.release(ALICE, 'lease-p', 'b');
    assert.equal(await L('c', t + 1_600), true, 'free once its holder released it');

    const racers = await Promise.all(Array.from({ length: 10 }, (_, i) => store.leases.acquire(BOB, 'lease-race', `h${i}`, 30_000)));
    assert.equal(racers.filter(Boolean).length, 1, 'exactly one of ten concurrent acquirers');
  });

  test('audit: records with detail cut to 200 characters, lists in order with optional filters', async () => {
    const db = await open(await server.createDatabase());
    await db.audit.record('connection_created', ALICE, 'github');
    await db.audit.record('refresh_failed', ALICE, 'github', 'x'.repeat(500));
    await db.audit.record('connection_created', BOB, 'linear', 'first');
    await db.audit.record('keys_rotated', undefined, undefined, '3');

    const all = await db.audit.list();
    assert.deepEqual(
      all.map((r) => [r.event, r.subject, r.provider]),
      [
        ['connection_created', 'alice', 'github'],
        ['refresh_failed', 'alice', 'github'],
        ['connection_created', 'bob', 'linear'],
        ['keys_rotated', null, null],
      ],
    );
    assert.ok(all.every((r, i) => typeof r.id === 'number' && typeof r.at === 'number' && (i === 0 || r.id > all[i - 1]!.id)));
    assert.equal(all[1]!.detail, 'x'.repeat(200));
    assert.equal(all[0]!.detail, null);

    assert.deepEqual(
      (await db.audit.list({ issuer: ALICE.issuer, subject: 'alice' })).map((r) => r.event),
      ['connection_created', 'refresh_failed'],
    );
    assert.deepEqual(
      (await db.audit.list({ event: 'connection_created' })).map((r) => r.subject),
      ['alice', 'bob'],
    );
    assert.deepEqual(
      (await db.audit.list({ subject: 'bob', event: 'connection_created' })).map((r) => r.detail),
      ['first'],
    );
    assert.deepEqual(await db.audit.list({ subject: 'bob', event: 'refresh_failed' }), []);
  });

  test('prune removes settled and expired pending rows within minutes (flows with them), other expired rows at once, and returns how many rows went', async () => {
    const dbUrl = await server.createDatabase();
    const db = await open(dbUrl);
    const now = Date.now();
    const old = pendingRow(ALICE, { expires_at: now - PENDING_PRUNE_GRACE_MS - 1 });
    const recent = pendingRow(ALICE, { expires_at: now - 60_000 });
    const settled = pendingRow(ALICE, { expires_at: now + HOUR });
    const justSettled = pendingRow(ALICE, { expires_at: now + HOUR });
    for (const r of [old, recent, settled, justSettled]) await db.pending.create(r);
    await db.pending.settle(settled.id, 'failed');
    await sql(dbUrl, 'UPDATE pending_connections SET updated_at = $1 WHERE id = $2', [now - PENDING_PRUNE_GRACE_MS - 1, settled.id]);
    await db.pending.settle(justSettled.id, 'completed');
    // Go with `old` and `settled` through ON DELETE CASCADE, so they are not counted on their own.
    await db.oauthFlows.put({ state_hash: 'f-cascade', pending_id: old.id, session_hash: 's', code_verifier: 'v', expires_at: now + HOUR });
    await db.oauthFlows.put({ state_hash: 'f-settled', pending_id: settled.id, session_hash: 's', code_verifier: 'v', expires_at: now + HOUR });
    await db.oauthFlows.put({ state_hash: 'f-expired', pending_id: recent.id, session_hash: 's', code_verifier: 'v', expires_at: now - 1 });
    await db.oauthFlows.put({ state_hash: 'f-live', pending_id: recent.id, session_hash: 's', code_verifier: 'v', expires_at: now + HOUR });
    await db.loginTransactions.put({ state_hash: 'l-expired', session_hash: 's', code_verifier: 'v', nonce: 'n', return_to: '/', expires_at: now - 1 });
    await db.loginTransactions.put({ state_hash: 'l-live', session_hash: 's', code_verifier: 'v', nonce: 'n', return_to: '/', expires_at: now + HOUR });
    await db.sessions.create('b-expired', now - 1);
    await db.sessions.create('b-live', now + HOUR);

    assert.equal(await db.pending.prune(now), 5);
    assert.equal(await db.pending.byId(old.id), undefined);
    assert.equal(await db.pending.byId(settled.id), undefined, 'settled more than the grace ago');
    assert.ok(await db.pending.byId(recent.id), 'expired a minute ago: kept for late waiters and the "expired" page');
    assert.ok(await db.pending.byId(justSettled.id), 'just settled: a held repeat still reads how it ended');
    assert.equal(await db.oauthFlows.take('f-cascade', 's', 'github'), undefined);
    assert.equal(await db.oauthFlows.take('f-settled', 's', 'github'), undefined);
    assert.equal(await db.oauthFlows.take('f-expired', 's', 'github'), undefined);
    assert.ok(await db.oauthFlows.take('f-live', 's', 'github'));
    assert.equal(await db.loginTransactions.take('l-expired', 's'), undefined);
    assert.ok(await db.loginTransactions.take('l-live', 's'));
    assert.ok(await db.sessions.find('b-live'));
    assert.equal(await db.pending.prune(now), 0, 'nothing left to prune');
  });

  test('transaction: a throw rolls every write back and the error comes out unchanged', async () => {
    const row = pendingRow(ALICE, { provider: 'tx-rollback' });
    const boom = new Error('boom');
    await assert.rejects(
      store.transaction(async (tx) => {
        await tx.pending.create(row);
        await tx.connections.save(connection(ALICE, 'tx-rollback'));
        await tx.audit.record('connection_created', ALICE, 'tx-rollback');
        await tx.sessions.rotateSignedIn(undefined, 'tx-session', { ...ALICE, name: 'A' }, Date.now() + HOUR);
        assert.ok(await tx.pending.byId(row.id), 'the transaction sees its own writes');
        throw boom;
      }),
      (err) => err === boom,
    );
    assert.equal(await store.pending.byId(row.id), undefined);
    assert.equal(await store.connections.find(ALICE, 'tx-rollback'), undefined);
    assert.deepEqual(await store.audit.list({ event: 'connection_created', subject: 'alice' }).then((rows) => rows.filter((r) => r.provider === 'tx-rollback')), []);
    assert.equal(await store.sessions.find('tx-session'), undefined);
  });

  test('transaction: commits atomically, is invisible outside until then, and a failed statement rolls back', async () => {
    const row = pendingRow(BOB, { provider: 'tx-commit' });
    const result = await store.transaction(async (tx) => {
      await tx.pending.create(row);
      assert.equal(await store.pending.byId(row.id), undefined, 'not visible outside before commit');
      return tx.pending.claim(row.id);
    });
    assert.equal(result, true);
    assert.equal((await store.pending.byId(row.id))?.status, 'authorizing');

    const dup = pendingRow(BOB, { provider: 'tx-dup' });
    await assert.rejects(
      store.transaction(async (tx) => {
        await tx.connections.save(connection(BOB, 'tx-dup'));
        await tx.pending.create(dup);
        await tx.pending.create(dup);
      }),
      /duplicate key/,
    );
    assert.equal(await store.connections.find(BOB, 'tx-dup'), undefined);
    await store.ping();
  });

  test('of 10 users linking one upstream account at once, exactly one passes the "nobody else has it" check', async () => {
    const store = await open(await server.createDatabase(), { poolMax: 10 });
    const owners = Array.from({ length: 10 }, (_, i): Owner => ({ issuer: ALICE.issuer, subject: `racer-${i}` }));
    const outcomes = await Promise.all(
      owners.map((owner) =>
        store.transaction(async (tx) => {
          if ((await tx.connections.othersWithAccount(owner, 'github', 'shared-42')).length > 0) return 'refused';
          await sleep(20); // widen the window between the check and the write
          await tx.connections.save(connection(owner, 'github', { account_id: 'shared-42' }));
          return 'saved';
        }),
      ),
    );
    assert.equal(outcomes.filter((o) => o === 'saved').length, 1, outcomes.join(','));
    const holders = await Promise.all(owners.map((o) => store.connections.find(o, 'github')));
    assert.equal(holders.filter(Boolean).length, 1);
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
    const pool = createPool(`postgres://broker@127.0.0.1:${port}/none`, { poolMax: 1, statementTimeoutMs: 5_000, connectTimeoutMs: 5_000, onError: () => {} });
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
      Number((await sql<{ n: string }>(url, "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN broker_pending_settled'"))[0]!.n);
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
  test('rotate-keys re-seals every row under the current key, paging by seq, and the rows still open', async () => {
    const store = await open(await server.createDatabase());
    const old = randomBytes(32);
    const oldKey = new Sealer([old]);
    const ring = new Sealer([randomBytes(32), old]);
    const owners = Array.from({ length: 7 }, (_, i): Owner => ({ issuer: ALICE.issuer, subject: `rot-${i}` }));
    for (const owner of owners) {
      const sealed = oldKey.seal(JSON.stringify({ accessToken: `tok-${owner.subject}` }), { ...owner, provider: 'github' });
      await store.connections.save(connection(owner, 'github', { key_id: sealed.keyId, sealed_tokens: sealed.value }));
    }
    const report = await rotateKeys(store, ring, { batchSize: 3 });
    assert.equal(report.resealed, 7);
    assert.equal(report.unreadable, 0);
    assert.deepEqual(report.keysInUse, [{ key_id: ring.keyId, n: 7 }]);
    for (const owner of owners) {
      const row = (await store.connections.find(owner, 'github'))!;
      assert.equal(row.key_id, ring.keyId);
      assert.equal(JSON.parse(ring.open({ keyId: row.key_id, value: row.sealed_tokens }, { ...owner, provider: 'github' })).accessToken, `tok-${owner.subject}`);
    }
    assert.equal((await store.audit.list({ event: 'keys_rotated' })).length, 1);
  });
});

describe('the token service during a database blip', () => {
  test('keeps a refreshed token pair the provider already rotated, even when the write first finds the database away', async () => {
    const url = await server.createDatabase();
    const store = await open(url);
    const sealer = new Sealer([randomBytes(32)]);
    const service = new ConnectionService(store, sealer, createLogger('error', () => {}), { pollMs: 20 });
    const owner = principalFromVerifiedClaims(ALICE.issuer, 'blip');
    await service.save(owner, 'github', { id: '9', login: 'blip' }, { accessToken: 'ghu_old', tokenType: 'bearer', refreshToken: 'ghr_old', expiresAt: Date.now() - 1_000, scopes: [] }, { refuseShared: false });
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
    assert.equal((await links.create(principalFromVerifiedClaims(ALICE.issuer, ALICE.subject), 'github', '\u0000\u0001')).client_name, null);
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
