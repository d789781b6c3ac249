// The audit trail's chain (src/store/audit-chain.ts, src/audit/verify.ts, docs/audit.md), on SQLite
// and on PostgreSQL (where initdb exists): every row MACed over its stream's previous MAC and its own
// columns; `audit verify` names the first broken link when someone with database access edits,
// deletes, swaps or forges rows, and still holds after a prune (an anchor at the cut), a rolled-back
// transaction (SQLite: the head goes back; PostgreSQL: a void) and two instances writing at once.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { appendFileSync, writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { headsFromLog } from '../src/audit/heads.js';
import { pruneAuditTrail } from '../src/audit/retention.js';
import { verifyAuditChain, type ChainReport } from '../src/audit/verify.js';
import { runAdmin } from '../src/cli/admin.js';
import { openPostgresStore } from '../src/store/postgres/index.js';
import { auditChainKey, openSqliteStore, sqliteHandle, type AuditChainKey, type Store } from '../src/store/index.js';
import { postgresSkipReason, startPostgres, type PgServer } from './support/postgres.js';
import { productionEnv } from './support/production-env.js';
import { useStack } from './support/suite.js';
import { makeTempDir, type TempDir } from './support/temp-dir.js';

const OWNER = { issuer: 'https://idp.example.com', subject: 'alice' };
const SECRET = Buffer.from('a-broker-secret-of-at-least-32-bytes!!', 'utf8');
const KEY = auditChainKey(SECRET);

/** One fresh database per test, its stores, and raw SQL on it (`?` placeholders in both dialects). */
interface Dialect {
  /** A fresh, empty, migrated database; returns a way to open writers on it. */
  database(): Promise<Database>;
  destroy(): Promise<void>;
}
interface Database {
  /** What the admin command's environment names this database by. */
  env: Record<string, string>;
  open(key?: AuditChainKey): Promise<Store>;
  sql<R = Record<string, unknown>>(text: string, values?: unknown[]): Promise<R[]>;
  close(): Promise<void>;
}

async function recordMany(store: Pick<Store, 'audit'>, n: number, prefix = 'row'): Promise<void> {
  for (let i = 1; i <= n; i++) await store.audit.record('token_exchanged', OWNER, 'github', `${prefix} ${i}`);
}

async function verify(store: Store, keys: AuditChainKey[] = [KEY]): Promise<ChainReport> {
  return verifyAuditChain(store.audit, keys, { pageSize: 7 });
}

/** The chained rows of the store's only stream, by place. */
async function chained(db: Database): Promise<Array<{ id: number; seq: number; stream: string; detail: string; at: number }>> {
  return (
    await db.sql<{ id: number; seq: number; stream: string; detail: string; at: number }>(
      'SELECT id, seq, stream, detail, at FROM audit_events WHERE stream IS NOT NULL ORDER BY stream, seq',
    )
  ).map((r) => ({ ...r, id: Number(r.id), seq: Number(r.seq), at: Number(r.at) }));
}

function chainSuite(name: string, skip: string | false, setUp: () => Promise<Dialect>): void {
  describe(`the audit chain on ${name}`, { skip }, () => {
    let dialect: Dialect;
    let db: Database;
    let store: Store;
    before(async () => {
      dialect = await setUp();
    });
    after(async () => {
      await dialect?.destroy();
    });
    const fresh = async () => {
      db = await dialect.database();
      store = await db.open(KEY);
    };
    const done = async () => {
      await store.close();
      await db.close();
    };

    it('verifies an untouched trail, with the writer’s head as its last place', async () => {
      await fresh();
      try {
        await recordMany(store, 10);
        const report = await verify(store);
        assert.equal(report.ok, true, JSON.stringify(report.broken));
        assert.equal(report.rows, 10);
        assert.equal(report.streams.length, 1);
        const head = await store.audit.head();
        assert.equal(report.streams[0]!.stream, head!.stream);
        assert.equal(report.streams[0]!.lastSeq, head!.seq);
        assert.equal(head!.key_id, KEY.id);
      } finally {
        await done();
      }
    });

    it('names the row whose detail was edited (content changed)', async () => {
      await fresh();
      try {
        await recordMany(store, 6);
        const rows = await chained(db);
        await db.sql('UPDATE audit_events SET detail = ? WHERE id = ?', ['nothing to see', rows[3]!.id]);
        const report = await verify(store);
        assert.equal(report.ok, false);
        assert.equal(report.broken!.problem, 'content_changed');
        assert.equal(report.broken!.id, rows[3]!.id);
        assert.equal(report.broken!.seq, 4);
        assert.equal(report.broken!.stream, rows[3]!.stream);
      } finally {
        await done();
      }
    });

    it('names the first row after a deleted middle row (row missing)', async () => {
      await fresh();
      try {
        await recordMany(store, 6);
        const rows = await chained(db);
        await db.sql('DELETE FROM audit_events WHERE id = ?', [rows[2]!.id]);
        const report = await verify(store);
        assert.equal(report.broken?.problem, 'row_missing');
        assert.equal(report.broken!.id, rows[3]!.id);
        assert.equal(report.broken!.seq, 3, 'the place that has no row');
      } finally {
        await done();
      }
    });

    it('names two rows whose contents were swapped (order changed)', async () => {
      await fresh();
      try {
        await recordMany(store, 6);
        const rows = await chained(db);
        const [a, b] = [rows[1]!, rows[2]!];
        // Every column of the two rows but their place in the chain.
        const swap = 'UPDATE audit_events SET at = ?, detail = ? WHERE id = ?';
        await db.sql(swap, [b.at, b.detail, a.id]);
        await db.sql(swap, [a.at, a.detail, b.id]);
        const report = await verify(store);
        assert.equal(report.broken?.problem, 'order_changed');
        assert.equal(report.broken!.id, a.id);
        assert.match(report.broken!.message, new RegExp(`now in row ${b.id}\\b`));
      } finally {
        await done();
      }
    });

    it('names a row forged without the key, and a row slipped in without a MAC', async () => {
      await fresh();
      try {
        await recordMany(store, 3);
        const rows = await chained(db);
        const last = rows[2]!;
        // Someone with the database but not BROKER_SECRET: the next place, a made-up MAC.
        await db.sql(
          'INSERT INTO audit_events (at, event, issuer, subject, provider, detail, stream, seq, key_id, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
          [
            last.at,
            'connection_revoked',
            OWNER.issuer,
            OWNER.subject,
            'github',
            'forged',
            last.stream,
            4,
            KEY.id,
            randomBytes(32).toString('base64url'),
          ],
        );
        const forged = (await chained(db))[3]!;
        let report = await verify(store);
        assert.equal(report.broken?.problem, 'content_changed');
        assert.equal(report.broken!.id, forged.id);

        await db.sql('DELETE FROM audit_events WHERE id = ?', [forged.id]);
        assert.equal((await verify(store)).ok, true);
        // Or no chain at all, after the chain began: not taken for history.
        await db.sql('INSERT INTO audit_events (at, event, issuer, subject, provider, detail) VALUES (?, ?, ?, ?, ?, ?)', [
          last.at,
          'connection_revoked',
          OWNER.issuer,
          OWNER.subject,
          'github',
          'unchained',
        ]);
        report = await verify(store);
        assert.equal(report.broken?.problem, 'unchained_row');
      } finally {
        await done();
      }
    });

    it('reports rows from before the chain as unchained history, not as broken', async () => {
      await fresh();
      try {
        for (const detail of ['old 1', 'old 2'])
          await db.sql('INSERT INTO audit_events (at, event, issuer, subject, provider, detail) VALUES (?, ?, ?, ?, ?, ?)', [
            Date.now() - 1000,
            'connection_created',
            OWNER.issuer,
            OWNER.subject,
            'github',
            detail,
          ]);
        await recordMany(store, 3);
        const report = await verify(store);
        assert.equal(report.ok, true, JSON.stringify(report.broken));
        assert.equal(report.unchainedHistory, 2);
        assert.equal(report.rows, 3);
      } finally {
        await done();
      }
    });

    it('stays verifiable after a prune (an anchor at the cut), and notices a deleted or edited anchor', async () => {
      await fresh();
      try {
        await recordMany(store, 9);
        // Three batches of two: the six oldest rows go, the anchor follows each batch.
        let deleted = 0;
        for (let i = 0; i < 3; i++) deleted += await store.audit.prune(Date.now() + 1_000, 2);
        assert.equal(deleted, 6);
        let report = await verify(store);
        assert.equal(report.ok, true, JSON.stringify(report.broken));
        assert.equal(report.rows, 3);
        assert.equal(report.anchors, 1);
        assert.equal(report.streams[0]!.from, 'anchor');

        // The whole trail (pruneAuditTrail as the service runs it): the anchor alone is left, and checked.
        assert.equal(await pruneAuditTrail(store.audit, Date.now() + 1_000, { batchSize: 2 }), 3);
        await recordMany(store, 2, 'after');
        report = await verify(store);
        assert.equal(report.ok, true, JSON.stringify(report.broken));
        assert.equal(report.rows, 2);

        await db.sql('UPDATE audit_chain_anchors SET seq = seq - 1');
        assert.equal((await verify(store)).broken?.problem, 'mark_altered');
        await db.sql('DELETE FROM audit_chain_anchors');
        report = await verify(store);
        assert.equal(report.broken?.problem, 'row_missing');
        assert.match(report.broken!.message, /with no anchor/);
      } finally {
        await done();
      }
    });

    it('keeps a stream whose every row was pruned as its anchor alone, checked', async () => {
      await fresh();
      const later = await db.open(KEY);
      try {
        const gone = (await store.audit.head())!.stream;
        await recordMany(store, 3, 'gone');
        // Another writer (an instance started later) prunes the first one's rows, then writes its own.
        assert.equal(await pruneAuditTrail(later.audit, Date.now() + 1_000), 3);
        await recordMany(later, 2, 'kept');
        const report = await verify(store);
        assert.equal(report.ok, true, JSON.stringify(report.broken));
        const byStream = new Map(report.streams.map((s) => [s.stream, [s.rows, s.lastSeq, s.from]]));
        assert.equal(report.streams.length, 2);
        assert.deepEqual(byStream.get(gone), [0, 3, 'anchor']);
        assert.deepEqual(byStream.get((await later.audit.head())!.stream), [2, 2, 'start']);
        await db.sql('UPDATE audit_chain_anchors SET at = at + 1');
        assert.equal((await verify(store)).broken?.problem, 'mark_altered');
      } finally {
        await later.close();
        await done();
      }
    });

    it('names a stream whose newest rows were deleted, against the head its writer logged (and the admin command with --heads)', async () => {
      await fresh();
      try {
        await recordMany(store, 5);
        const head = (await store.audit.head())!;
        const rows = await chained(db);
        await db.sql('DELETE FROM audit_events WHERE id IN (?, ?)', [rows[3]!.id, rows[4]!.id]);
        assert.equal((await verify(store)).ok, true, 'a chain alone cannot show its tail deleted');
        let report = await verifyAuditChain(store.audit, [KEY], { heads: [head] });
        assert.equal(report.broken?.problem, 'truncated');
        assert.match(report.broken!.message, /ends at place 3, but its head was logged at place 5: its newest 2 row\(s\) were deleted/);

        const log = makeTempDir('audit-heads-');
        try {
          // A head logged when the stream was at place 3 (that row's own MAC) is still reached; the later one is not.
          const early = (await store.audit.chainPage(undefined, 10)).find((r) => Number(r.seq) === 3)!;
          const lines = [
            JSON.stringify({ time: new Date().toISOString(), level: 'info', event: 'listening', port: 1 }),
            'not json',
            JSON.stringify({ level: 'info', event: 'audit_chain_head', stream: head.stream, seq: 3, mac: early.mac, keyId: KEY.id }),
          ];
          const env = productionEnv({ BROKER_SECRET: SECRET.toString('utf8'), ...db.env });
          writeFileSync(log.file('broker.log'), lines.join('\n') + '\n');
          let run = await admin(env, ['audit', 'verify', '--heads', log.file('broker.log')]);
          assert.equal(run.code, 0, run.stdout + run.stderr);
          assert.match(run.stdout, /Every stream reaches the 1 head\(s\) logged for it\./);
          appendFileSync(log.file('broker.log'), JSON.stringify({ level: 'info', event: 'audit_chain_head', ...head }) + '\n');
          run = await admin(env, ['audit', 'verify', '--heads', log.file('broker.log')]);
          assert.equal(run.code, 1);
          assert.match(run.stdout, /^Audit chain BROKEN \(truncated\)/);
          run = await admin(env, ['audit', 'verify', '--heads', log.file('missing.log')]);
          assert.equal(run.code, 1);
          assert.match(run.stderr, /cannot read --heads .*missing\.log \(ENOENT\)/);
        } finally {
          log.close();
        }

        await db.sql('DELETE FROM audit_events');
        report = await verifyAuditChain(store.audit, [KEY], { heads: [head] });
        assert.equal(report.broken?.problem, 'truncated');
        assert.match(report.broken!.message, /the whole stream was deleted/);
      } finally {
        await done();
      }
    });

    it('cannot be verified with another BROKER_SECRET, and is with the previous one beside the new', async () => {
      await fresh();
      try {
        await recordMany(store, 2);
        const other = auditChainKey(Buffer.from('another-broker-secret-of-32-bytes-or-more', 'utf8'));
        const report = await verify(store, [other]);
        assert.equal(report.broken?.problem, 'unknown_key');
        assert.equal((await verify(store, [other, KEY])).ok, true);
      } finally {
        await done();
      }
    });

    it('keeps the chain whole when a transaction that recorded rows rolls back', async () => {
      await fresh();
      try {
        await recordMany(store, 2);
        await assert.rejects(
          store.transaction(async (tx) => {
            await tx.audit.record('connection_created', OWNER, 'github', 'rolled back');
            throw new Error('the change failed');
          }),
          /the change failed/,
        );
        await recordMany(store, 2, 'later');
        const report = await verify(store);
        assert.equal(report.ok, true, JSON.stringify(report.broken));
        assert.equal(report.rows, 4);
      } finally {
        await done();
      }
    });

    it('chains a detail cut inside a surrogate pair exactly as stored', async () => {
      await fresh();
      try {
        await store.audit.record('token_exchanged', OWNER, 'github', 'x'.repeat(199) + '😀 and more');
        const report = await verify(store);
        assert.equal(report.ok, true, JSON.stringify(report.broken));
      } finally {
        await done();
      }
    });

    it('runs `audit verify` through the admin command: OK with counts (exit 0), the broken link (exit 1)', async () => {
      await fresh();
      try {
        await recordMany(store, 3);
        const env = productionEnv({ BROKER_SECRET: SECRET.toString('utf8'), ...db.env });
        let run = await admin(env, ['audit', 'verify']);
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stdout, /^Audit chain OK: 3 row\(s\) in 1 stream\(s\) verified/);
        run = await admin(env, ['audit', 'verify', '--json']);
        assert.equal(run.code, 0);
        assert.equal(JSON.parse(run.stdout).ok, true);

        const rows = await chained(db);
        await db.sql('UPDATE audit_events SET subject = ? WHERE id = ?', ['mallory', rows[1]!.id]);
        run = await admin(env, ['audit', 'verify']);
        assert.equal(run.code, 1);
        assert.equal(
          run.stdout,
          `Audit chain BROKEN (content_changed): row ${rows[1]!.id} (place 2 of stream ${rows[1]!.stream}) does not match its MAC: its content was changed, or the row was written without the key.\n`,
        );
        run = await admin(env, ['audit', 'verify', '--json']);
        assert.equal(run.code, 1);
        assert.equal(JSON.parse(run.stdout).broken.id, rows[1]!.id);

        // With another BROKER_SECRET the rows are not checkable; the old one as BROKER_PREVIOUS_SECRET makes them so.
        await db.sql('UPDATE audit_events SET subject = ? WHERE id = ?', [OWNER.subject, rows[1]!.id]);
        const rotated = { ...env, BROKER_SECRET: 'c'.repeat(40) };
        run = await admin(rotated, ['audit', 'verify']);
        assert.equal(run.code, 1);
        assert.match(run.stdout, /unknown_key/);
        run = await admin({ ...rotated, BROKER_PREVIOUS_SECRET: SECRET.toString('utf8') }, ['audit', 'verify']);
        assert.equal(run.code, 0, run.stdout);
      } finally {
        await done();
      }
    });

    if (name === 'PostgreSQL') {
      it('verifies two instances interleaving appends on one database (a stream each, no lock)', async () => {
        await fresh();
        const second = await db.open(KEY);
        try {
          await Promise.all(
            Array.from({ length: 40 }, (_, i) => (i % 2 ? second : store).audit.record('upstream_call', OWNER, 'github', `call ${i}`)),
          );
          await Promise.all([
            store.transaction(async (tx) => recordMany(tx, 5, 'tx a')),
            second.transaction(async (tx) => recordMany(tx, 5, 'tx b')),
            recordMany(store, 5, 'plain a'),
          ]);
          const report = await verify(store);
          assert.equal(report.ok, true, JSON.stringify(report.broken));
          assert.equal(report.rows, 55);
          assert.equal(report.streams.length, 2);
        } finally {
          await second.close();
          await done();
        }
      });

      it('leaves a void for a rolled-back row that a later row of its stream chained onto', async () => {
        await fresh();
        try {
          let release!: () => void;
          const held = new Promise<void>((resolve) => (release = resolve));
          let recorded!: () => void;
          const inside = new Promise<void>((resolve) => (recorded = resolve));
          const tx = store.transaction(async (t) => {
            await t.audit.record('connection_created', OWNER, 'github', 'rolled back');
            recorded();
            await held;
            throw new Error('the change failed');
          });
          await inside;
          // Chained onto the row of the open transaction, and committed before it rolls back.
          await store.audit.record('token_exchanged', OWNER, 'github', 'after it');
          release();
          await assert.rejects(tx, /the change failed/);
          const report = await verify(store);
          assert.equal(report.ok, true, JSON.stringify(report.broken));
          assert.equal(report.voids, 1);
          assert.equal(report.rows, 1);
          await db.sql('UPDATE audit_chain_voids SET mac = ?', ['forged']);
          assert.equal((await verify(store)).broken?.problem, 'mark_altered');
          await db.sql('DELETE FROM audit_chain_voids');
          assert.equal((await verify(store)).broken?.problem, 'row_missing');
        } finally {
          await done();
        }
      });
    }
  });
}

describe('the audit chain in the broker', () => {
  const stack = useStack();

  it('chains what a running broker records, and logs each stream’s head at shutdown, across a restart', async () => {
    const key = auditChainKey(Buffer.from(stack.env.BROKER_SECRET!, 'utf8'));
    await recordMany(stack.broker.broker.store, 3, 'first instance');
    const first = await stack.broker.broker.store.audit.head();
    assert.equal(first!.seq, 3);
    assert.equal(first!.key_id, key.id);
    await stack.restart();
    const heads = stack.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.event === 'audit_chain_head');
    assert.deepEqual(
      heads.map((h) => [h.stream, h.seq, h.mac]),
      [[first!.stream, 3, first!.mac]],
      'the head went to the log when the broker closed',
    );
    await recordMany(stack.broker.broker.store, 2, 'after the restart');
    const report = await verifyAuditChain(stack.broker.broker.store.audit, [key], { heads: headsFromLog(stack.logs.join('\n')) });
    assert.equal(report.ok, true, JSON.stringify(report.broken));
    const streams = new Map(report.streams.map((s) => [s.stream, s.lastSeq]));
    assert.equal(streams.get(first!.stream), 3, 'the first instance’s stream ends where its logged head is');
    assert.equal(streams.get((await stack.broker.broker.store.audit.head())!.stream), 2);
  });
});

interface AdminRun {
  code: number;
  stdout: string;
  stderr: string;
}

async function admin(env: NodeJS.ProcessEnv, args: string[]): Promise<AdminRun> {
  let stdout = '';
  let stderr = '';
  const stream = (append: (s: string) => void) =>
    ({
      write(chunk: string | Uint8Array) {
        append(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
        return true;
      },
    }) as unknown as NodeJS.WritableStream;
  const code = await runAdmin(args, { stdout: stream((s) => (stdout += s)), stderr: stream((s) => (stderr += s)), env });
  return { code, stdout, stderr };
}

chainSuite('SQLite', false, async () => {
  const dirs: TempDir[] = [];
  return {
    async database() {
      const dir = makeTempDir('audit-chain-');
      dirs.push(dir);
      const path = dir.file('broker.db');
      const raw = openSqliteStore(path);
      return {
        env: { DATABASE_PATH: path },
        open: async (key) => openSqliteStore(path, key ? { auditChain: key } : {}),
        sql: async <R>(text: string, values: unknown[] = []) => {
          const statement = sqliteHandle(raw).prepare(text);
          return (statement.reader ? statement.all(...values) : (statement.run(...values), [])) as R[];
        },
        close: () => raw.close(),
      } satisfies Database;
    },
    destroy: async () => dirs.forEach((d) => d.close()),
  };
});

chainSuite('PostgreSQL', postgresSkipReason(), async () => {
  const server: PgServer = await startPostgres();
  return {
    async database() {
      const url = await server.createDatabase();
      const migrated = await openPostgresStore(url);
      await migrated.close();
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      return {
        env: { DATABASE_URL: url },
        open: (key) => openPostgresStore(url, key ? { auditChain: key } : {}),
        sql: async <R>(text: string, values: unknown[] = []) => {
          let n = 0;
          const r = await client.query(
            text.replace(/\?/g, () => `$${++n}`),
            values,
          );
          return r.rows as R[];
        },
        close: () => client.end(),
      } satisfies Database;
    },
    destroy: () => server.destroy(),
  };
});
