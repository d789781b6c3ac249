// Group commit on SQLite (src/store/sqlite/write-batch.ts): the hot path's writes (audit rows,
// rate-limit counters, usage marks) queued in one event-loop turn share one transaction; each
// caller's promise settles after that commit, so what the answer waits for is on disk first; the
// queue is bounded, drained at close, and the audit chain stays whole and in order.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { verifyAuditChain } from '../src/audit/verify.js';
import { openDatabase } from '../src/store/sqlite/database.js';
import { TransactionGate } from '../src/store/sqlite/gate.js';
import { WriteBatch } from '../src/store/sqlite/write-batch.js';
import { auditChainKey, openSqliteStore, type SqliteStore } from '../src/store/index.js';
import { makeTempDir, type TempDir } from './support/temp-dir.js';

const OWNER = { issuer: 'https://idp.example.com', subject: 'alice' };
const KEY = auditChainKey(Buffer.from('a-broker-secret-of-at-least-32-bytes!!', 'utf8'));

/** Counts the transactions `store` begins from now on. */
function countTransactions(store: SqliteStore): { readonly begun: number } {
  const db = store.db;
  const runSql = db.exec.bind(db);
  const counter = { begun: 0 };
  db.exec = (sql: string) => {
    if (/^BEGIN/.test(sql)) counter.begun++;
    return runSql(sql);
  };
  return counter;
}

describe('group commit of the hot path’s writes (SQLite)', () => {
  let dir: TempDir;
  let n = 0;
  const path = () => dir.file(`broker-${n}.db`);
  const open = () => {
    n++;
    return openSqliteStore(path(), { auditChain: KEY });
  };

  before(() => (dir = makeTempDir('write-batch-')));
  after(() => dir.close());

  it('writes the audit rows of one turn in one transaction, each caller answered after its commit, the chain whole and in order', async () => {
    const store = open();
    const counter = countTransactions(store);
    // Another connection sees only committed rows.
    const reader = new Database(path(), { readonly: true });
    try {
      const writes = Array.from({ length: 100 }, (_, i) =>
        store.audit.record('token_exchanged', OWNER, 'github', `row ${i + 1}`).then(() => {
          const seen = reader.prepare('SELECT count(*) AS n FROM audit_events WHERE detail = ?').get(`row ${i + 1}`) as { n: number };
          assert.equal(seen.n, 1, `row ${i + 1} is committed when its caller hears back`);
        }),
      );
      await Promise.all(writes);
      assert.equal(counter.begun, 1, 'one transaction for the 100 rows of one turn');
      const rows = reader.prepare('SELECT detail, seq FROM audit_events ORDER BY id').all() as Array<{ detail: string; seq: number }>;
      assert.deepEqual(
        rows.map((r) => r.detail),
        Array.from({ length: 100 }, (_, i) => `row ${i + 1}`),
        'stored in the order they were recorded',
      );
      assert.deepEqual(
        rows.map((r) => r.seq),
        Array.from({ length: 100 }, (_, i) => i + 1),
        'chained in that order',
      );
      const report = await verifyAuditChain(store.audit, [KEY], { pageSize: 7 });
      assert.equal(report.ok, true, JSON.stringify(report.broken));
      assert.equal(report.rows, 100);
    } finally {
      reader.close();
      await store.close();
    }
  });

  it('counts the rate-limit hits of one turn exactly, one statement per key, and exactly across two writers on one file', async () => {
    const a = open();
    const b = openSqliteStore(path(), { auditChain: KEY });
    try {
      const counter = countTransactions(a);
      const fromA = Array.from({ length: 30 }, () => a.rateLimits.hit('key-1', 60_000));
      const fromB = Array.from({ length: 30 }, () => b.rateLimits.hit('key-1', 60_000));
      const otherKey = Array.from({ length: 5 }, () => a.rateLimits.hit('key-2', 60_000));
      const places = (await Promise.all([...fromA, ...fromB])).map((r) => r.hits).sort((x, y) => x - y);
      assert.deepEqual(
        places,
        Array.from({ length: 60 }, (_, i) => i + 1),
        'every hit has its own place: none is lost or counted twice',
      );
      assert.deepEqual(
        (await Promise.all(otherKey)).map((r) => r.hits),
        [1, 2, 3, 4, 5],
      );
      assert.equal(counter.begun, 1, 'one transaction for the turn');
      // Undos of one turn are one statement too, and exact.
      await Promise.all(Array.from({ length: 10 }, () => a.rateLimits.undo('key-1')));
      assert.equal((await b.rateLimits.hit('key-1', 60_000)).hits, 51);
      assert.equal((a.db.prepare('SELECT hits FROM rate_limit_windows').all() as Array<{ hits: number }>).length, 2);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('writes what is queued before the file closes (a SIGTERM’s drain)', async () => {
    const store = open();
    const file = path();
    // Fire and forget, as the broker's after-the-answer writes are.
    for (let i = 0; i < 50; i++) void store.audit.record('policy_decision', OWNER, 'github', `queued ${i}`);
    void store.rateLimits.hit('closing', 60_000);
    await store.close();
    const reopened = openSqliteStore(file, { auditChain: KEY });
    try {
      assert.equal((await reopened.audit.list({ event: 'policy_decision' })).length, 50);
      assert.equal((reopened.db.prepare('SELECT hits FROM rate_limit_windows').get() as { hits: number }).hits, 1);
    } finally {
      await reopened.close();
    }
  });

  it('holds writers back past its bound instead of queueing without limit, and lets them through as batches commit', async () => {
    const db = openDatabase(dir.file('bounded.db'));
    db.exec('CREATE TABLE marks (n INTEGER)');
    const gate = new TransactionGate();
    const batch = new WriteBatch(db, gate, undefined, 5);
    const insert = db.prepare('INSERT INTO marks (n) VALUES (?)');
    try {
      let release!: () => void;
      // A transaction holds the database: the batch cannot start.
      const held = gate.exclusive(() => new Promise<void>((resolve) => (release = resolve)));
      const writes = Array.from({ length: 20 }, (_, i) => batch.run(() => insert.run(i)));
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(batch.queued, 5, 'at most the bound is queued');
      release();
      await held;
      await Promise.all(writes);
      assert.equal((db.prepare('SELECT count(*) AS n FROM marks').get() as { n: number }).n, 20);
    } finally {
      db.close();
    }
  });

  it('refuses only the write that failed: the others of its batch are committed', async () => {
    const db = openDatabase(dir.file('failing.db'));
    db.exec('CREATE TABLE once (k TEXT PRIMARY KEY)');
    const batch = new WriteBatch(db, new TransactionGate(), undefined);
    const insert = db.prepare('INSERT INTO once (k) VALUES (?)');
    try {
      const writes = ['a', 'b', 'a', 'c'].map((k) => batch.run(() => insert.run(k).changes));
      const outcomes = await Promise.allSettled(writes);
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
      );
      assert.match(String((outcomes[2] as PromiseRejectedResult).reason), /UNIQUE/);
      assert.deepEqual(
        (db.prepare('SELECT k FROM once ORDER BY k').all() as Array<{ k: string }>).map((r) => r.k),
        ['a', 'b', 'c'],
      );
    } finally {
      db.close();
    }
  });
});
