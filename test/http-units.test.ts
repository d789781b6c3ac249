import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { AuthInfo, ServerContext } from '@modelcontextprotocol/server';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { CompletionWatcher } from '../src/connections/completion-watcher.js';
import { sha256Base64url } from '../src/crypto/index.js';
import { displayText } from '../src/http/display-text.js';
import { safeReturnPath } from '../src/http/return-to.js';
import { canonicalJson, withHttpFacts } from '../src/mcp/call.js';
import { createToolStateCodec } from '../src/mcp/request-state.js';
import { openSqliteStore, StoreUnavailableError, type SqliteStore, type Store } from '../src/store/index.js';
import { migrate, openDatabase } from '../src/store/sqlite/database.js';
import { eventually } from './support/eventually.js';

const BASE = new URL('https://broker.example.com');
const MIGRATIONS = fileURLToPath(new URL('../migrations/sqlite/', import.meta.url));

describe('displayText (client-chosen names shown to people)', () => {
  it('strips bidi controls, isolates and marks, so a name cannot read as something else', () => {
    const bidi = ['\u202A', '\u202B', '\u202C', '\u202D', '\u202E', '\u2066', '\u2067', '\u2068', '\u2069', '\u200E', '\u200F', '\u061C'];
    for (const c of bidi) assert.equal(displayText(`Claude${c}gpj.exe`), 'Claudegpj.exe', `U+${c.codePointAt(0)!.toString(16)}`);
    assert.equal(displayText('\u202Eevil'), 'evil');
  });

  it('strips format characters (zero-width spaces and joiners, U+FEFF, soft hyphen), controls, separators and lone surrogates', () => {
    assert.equal(displayText('\uFEFFCla\u200Bu\u200Cd\u200De\u2060\u00AD'), 'Claude');
    assert.equal(displayText('a\u0000b\u0007c\u001Fd\u007Fe\u0085f\u009Fg'), 'abcdefg');
    assert.equal(displayText('line\u2028two\u2029three'), 'linetwothree');
    assert.equal(displayText('x\uD800y\uDC00z'), 'xyz');
  });

  it('keeps visible text in any script, collapses whitespace, bounds the length in code points, and gives undefined for nothing visible', () => {
    assert.equal(displayText('  Mon   assistant\tpréféré  '), 'Mon assistant préféré');
    assert.equal(displayText('مساعد 助手 🤖'), 'مساعد 助手 🤖');
    assert.equal(displayText('😀'.repeat(300))!.length, 400, '200 code points, no surrogate pair cut in half');
    assert.equal(displayText('abc', 2), 'ab');
    assert.equal(displayText('\u202E\u200B '), undefined);
    assert.equal(displayText(undefined), undefined);
  });
});

describe('safeReturnPath', () => {
  it('never returns a scheme-relative path that normalisation produced ("/.//evil")', () => {
    assert.equal(safeReturnPath('/.//evil.example/x', new URL('https://broker.example'), '/fallback'), '/fallback');
    assert.equal(safeReturnPath('/a/..//evil.example', new URL('https://broker.example'), '/fallback'), '/fallback');
  });

  it('keeps same-origin paths with their query', () => {
    assert.equal(safeReturnPath('/connections', BASE), '/connections');
    assert.equal(safeReturnPath('/connect/github?req=abc_DEF-123', BASE), '/connect/github?req=abc_DEF-123');
    assert.equal(safeReturnPath('/', BASE), '/');
  });

  it('normalises dot segments and drops the fragment', () => {
    assert.equal(safeReturnPath('/connect/../connections', BASE), '/connections');
    assert.equal(safeReturnPath('/connections#top', BASE), '/connections');
  });

  // Each value is refused for the fallback; one test per kind of attack.
  const REFUSED: Array<[test: string, values: string[]]> = [
    [
      'refuses scheme-relative, backslash and absolute URLs',
      [
        '//evil.example',
        '//evil.example/connections',
        '/\\evil.example',
        '/\\/evil.example',
        '\\\\evil.example',
        'https://evil.example/',
        'http://broker.example.com/connections',
        'https://broker.example.com/connections',
      ],
    ],
    [
      'refuses javascript: and data: URLs and anything not starting with /',
      [
        'javascript:alert(1)',
        'JavaScript:alert(document.cookie)',
        'data:text/html,<script>alert(1)</script>',
        'connections',
        'evil.example',
        ' /connections',
      ],
    ],
    [
      'refuses control characters (tab, CR/LF header injection, NUL, DEL)',
      ['/\t/evil.example', '/connections\r\nSet-Cookie: a=b', '/connections\n', '/\u0000', '/a\u007f'],
    ],
  ];
  for (const [name, values] of REFUSED)
    it(name, () => {
      for (const value of values) assert.equal(safeReturnPath(value, BASE), '/connections', JSON.stringify(value));
    });

  it('refuses over-long values (more than 2048 characters) and keeps one of exactly 2048', () => {
    const exactly = '/' + 'a'.repeat(2047);
    assert.equal(safeReturnPath(exactly, BASE), exactly);
    assert.equal(safeReturnPath(exactly + 'a', BASE), '/connections');
  });

  it('refuses non-strings (repeated query parameters, missing values) and the empty string', () => {
    for (const value of [undefined, null, 42, ['/a', '/b'], { path: '/a' }, '']) {
      assert.equal(safeReturnPath(value, BASE), '/connections', String(value));
    }
  });

  it('returns the caller-supplied fallback when it refuses', () => {
    assert.equal(safeReturnPath('//evil.example', BASE, '/'), '/');
    assert.equal(safeReturnPath('/ok', BASE, '/'), '/ok');
  });
});

describe('canonicalJson (the digest that binds requestState to tool arguments)', () => {
  it('is independent of key order, at every level', () => {
    const a = { owner: 'octo', repo: 'hello', meta: { z: 1, a: [{ y: 2, x: 1 }] } };
    const b = { meta: { a: [{ x: 1, y: 2 }], z: 1 }, repo: 'hello', owner: 'octo' };
    assert.equal(canonicalJson(a), canonicalJson(b));
    assert.equal(canonicalJson(a), '{"meta":{"a":[{"x":1,"y":2}],"z":1},"owner":"octo","repo":"hello"}');
    assert.equal(sha256Base64url(canonicalJson(a)), sha256Base64url(canonicalJson(b)));
  });

  it('keeps array order and distinguishes different values', () => {
    assert.notEqual(canonicalJson([1, 2]), canonicalJson([2, 1]));
    assert.notEqual(canonicalJson({ title: 'a' }), canonicalJson({ title: 'b' }));
    assert.notEqual(canonicalJson({ n: 1 }), canonicalJson({ n: '1' }));
    assert.notEqual(canonicalJson({ a: { b: 1 } }), canonicalJson({ 'a.b': 1 }));
  });

  it('escapes keys and strings as JSON does', () => {
    assert.equal(canonicalJson({ 'k"e\\y': 'v"\n' }), '{"k\\"e\\\\y":"v\\"\\n"}');
    assert.equal(canonicalJson({}), '{}');
    assert.equal(canonicalJson(null), 'null');
    assert.equal(canonicalJson('x'), '"x"');
  });
});

describe('requestState binding', () => {
  const codec = createToolStateCodec(randomBytes(32), 600);
  const principal = { issuer: 'https://idp.example.com', subject: 'alice' };
  const call = { method: 'tools/call', params: { name: 'github_create_issue', arguments: { title: 'x' } } };
  const ctxFor = (authInfo: AuthInfo, method = 'tools/call') => ({ http: { authInfo }, mcpReq: { method } }) as unknown as ServerContext;
  const verified = { token: 't', clientId: 'c', scopes: [], extra: { principal } } as AuthInfo;

  it('round-trips for the same principal and call', async () => {
    const ctx = ctxFor(withHttpFacts(verified, call, undefined));
    assert.deepEqual(await codec.verify(await codec.mint({ kind: 'connect', pid: 'p1' }, ctx), ctx), { kind: 'connect', pid: 'p1' });
  });

  it('fails closed instead of binding to less: no verified principal, no call scope, or a call scope of another method (a batch)', async () => {
    await assert.rejects(async () =>
      codec.mint({ kind: 'connect', pid: 'p1' }, ctxFor(withHttpFacts({ ...verified, extra: {} }, call, undefined))),
    );
    await assert.rejects(async () => codec.mint({ kind: 'connect', pid: 'p1' }, ctxFor(verified)));
    await assert.rejects(async () => codec.mint({ kind: 'connect', pid: 'p1' }, ctxFor(withHttpFacts(verified, [call], undefined))));
    const state = await codec.mint({ kind: 'connect', pid: 'p1' }, ctxFor(withHttpFacts(verified, call, undefined)));
    await assert.rejects(async () => codec.verify(state, ctxFor(withHttpFacts(verified, [call], undefined))));
  });
});

describe('the SQLite store', () => {
  let dir: string;
  let path: string;
  let a: SqliteStore;
  let b: Store;
  const owner = { issuer: 'https://idp.example.com', subject: 'alice' };

  /** Inserts an open pending connection through `store` and returns its id. */
  async function pendingRow(store: Store, ttlMs = 60_000): Promise<string> {
    const id = randomUUID();
    await store.pending.create({
      id,
      link_hash: `hash-${id}`,
      ...owner,
      provider: 'github',
      client_name: 'test',
      scopes: null,
      expires_at: Date.now() + ttlMs,
    });
    return id;
  }

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'broker-units-'));
    path = join(dir, 'nested', 'broker.db');
    a = openSqliteStore(path);
    b = openSqliteStore(path);
  });
  after(async () => {
    await a.close();
    await b.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('file modes', () => {
    const mode = (file: string) => statSync(file).mode & 0o777;

    it('creates the database file, its -wal and its -shm readable and writable by their owner only (0600), and its folder 0700', async () => {
      await pendingRow(a);
      await pendingRow(b);
      for (const file of [path, `${path}-wal`, `${path}-shm`]) assert.equal(mode(file).toString(8), '600', file);
      assert.equal(mode(dirname(path)).toString(8), '700');
    });

    it('tightens a database, -wal and -shm an earlier release left 0644, and SQLite recreates the -wal 0600 after a checkpoint removed it', () => {
      const file = join(dir, 'old.db');
      const old = new Database(file);
      old.pragma('journal_mode = WAL');
      old.exec('CREATE TABLE t (x)');
      const keep = new Database(file);
      keep.prepare('SELECT 1').get();
      for (const f of [file, `${file}-wal`, `${file}-shm`]) chmodSync(f, 0o644);
      const db = openDatabase(file);
      for (const f of [file, `${file}-wal`, `${file}-shm`]) assert.equal(mode(f).toString(8), '600', f);
      old.close();
      keep.close();
      db.close();
      assert.ok(!existsSync(`${file}-wal`), 'the last close removed the -wal');
      const again = openDatabase(file);
      again.exec('INSERT INTO t VALUES (1)');
      for (const f of [file, `${file}-wal`, `${file}-shm`]) assert.equal(mode(f).toString(8), '600', f);
      again.close();
    });
  });

  describe('migrations', () => {
    it('records 001_initial.sql in schema_migrations on a fresh database, and applies nothing on the next open', () => {
      const shipped = readdirSync(MIGRATIONS)
        .filter((f) => f.endsWith('.sql'))
        .sort();
      const file = join(dir, 'fresh.db');
      const first = openDatabase(file);
      const rows = first.prepare('SELECT name, applied_at FROM schema_migrations ORDER BY name').all() as Array<{
        name: string;
        applied_at: number;
      }>;
      assert.equal(rows[0]?.name, '001_initial.sql');
      assert.deepEqual(
        rows.map((r) => r.name),
        shipped,
        'every shipped migration, once each',
      );
      const tables = (
        first.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as Array<{ name: string }>
      ).map((t) => t.name);
      for (const t of [
        'browser_sessions',
        'connections',
        'login_transactions',
        'oauth_flows',
        'pending_connections',
        'refresh_leases',
        'audit_events',
      ])
        assert.ok(tables.includes(t), t);
      assert.ok(tables.includes('pending_events'), 'kept (unused) for processes of the previous release during a rolling restart');
      first.close();

      const second = openDatabase(file);
      assert.deepEqual(
        second.prepare('SELECT name, applied_at FROM schema_migrations ORDER BY name').all(),
        rows,
        'the second open recorded nothing new',
      );
      assert.deepEqual(migrate(second), [], 'migrating again applies nothing');
      second.close();
    });

    it('applies new migration files in name order, each once, and reports what it applied', () => {
      const extra = join(dir, 'extra-migrations') + '/';
      mkdirSync(extra);
      writeFileSync(`${extra}011_second.sql`, 'INSERT INTO unit_marks (step) VALUES (2);');
      writeFileSync(`${extra}010_first.sql`, 'CREATE TABLE unit_marks (step INTEGER NOT NULL); INSERT INTO unit_marks (step) VALUES (1);');
      writeFileSync(`${extra}README.md`, 'not a migration');
      const db = openDatabase(join(dir, 'extra.db'));
      assert.deepEqual(migrate(db, extra), ['010_first.sql', '011_second.sql']);
      assert.deepEqual(migrate(db, extra), []);
      assert.deepEqual(db.prepare('SELECT step FROM unit_marks ORDER BY rowid').all(), [{ step: 1 }, { step: 2 }]);
      db.close();
    });
  });

  // The repository contract (claims, settling, rate-limit windows, settledSince…) is in
  // store-contract.test.ts; what stays here is SQLite's own: the gate and another process's lock.
  describe('the transaction gate and the write lock', () => {
    it('keeps other statements out of an open transaction, and a rollback undoes only its own writes', async () => {
      const outside = await pendingRow(a);
      const inside = randomUUID();
      let outsideSettled: Promise<boolean> | undefined;
      await assert.rejects(
        a.transaction(async (tx) => {
          await tx.pending.create({
            id: inside,
            link_hash: `hash-${inside}`,
            ...owner,
            provider: 'github',
            client_name: null,
            scopes: null,
            expires_at: Date.now() + 60_000,
          });
          // Issued while the transaction is open: it must wait, not join (and be rolled back with) it.
          outsideSettled = a.pending.settle(outside, 'cancelled');
          await new Promise((resolve) => setTimeout(resolve, 20));
          throw new Error('boom');
        }),
        /boom/,
      );
      assert.equal(await outsideSettled, true);
      assert.equal(
        (await a.pending.byId(outside))!.status,
        'cancelled',
        'the statement issued during the transaction survived its rollback',
      );
      assert.equal(await a.pending.byId(inside), undefined, 'the transaction wrote nothing');
    });

    it('says the database is away (StoreUnavailableError) when another process holds the write lock past busy_timeout', async () => {
      const locker = openDatabase(path);
      a.db.pragma('busy_timeout = 50');
      try {
        locker.exec('BEGIN IMMEDIATE');
        await assert.rejects(pendingRow(a), StoreUnavailableError);
        await assert.rejects(
          a.transaction(async () => undefined),
          StoreUnavailableError,
        );
        locker.exec('COMMIT');
        assert.ok(await a.pending.byId(await pendingRow(a)), 'works again once the lock is gone');
      } finally {
        if (locker.inTransaction) locker.exec('ROLLBACK');
        locker.close();
        a.db.pragma('busy_timeout = 5000');
      }
    });
  });

  describe('CompletionWatcher', () => {
    /** Runs `body` with a watcher on `store`, closed afterwards whatever happens. */
    async function withWatcher(
      store: ConstructorParameters<typeof CompletionWatcher>[0],
      body: (watcher: CompletionWatcher) => Promise<void>,
    ): Promise<void> {
      const watcher = new CompletionWatcher(store);
      try {
        await body(watcher);
      } finally {
        watcher.close();
      }
    }

    it('wakes a waiter within ~300 ms when another Store handle on the same file settles the row', async () => {
      await withWatcher(a, async (watcher) => {
        const id = await pendingRow(a);
        const waiting = watcher.wait(id, 5_000);
        await eventually('the waiter to register', () => watcher.waiting === 1);
        const settledAt = Date.now();
        await b.pending.settle(id, 'completed');
        const outcome = await waiting;
        const elapsed = Date.now() - settledAt;
        assert.equal(outcome, 'completed');
        assert.ok(elapsed < 300, `woke ${elapsed} ms after the other handle settled the row (polling every 100 ms)`);
        assert.equal(watcher.waiting, 0, 'the waiter is released');
      });
    });

    it('is not woken by another row settling', async () => {
      await withWatcher(a, async (watcher) => {
        const mine = await pendingRow(a);
        const other = await pendingRow(a);
        const release = new AbortController();
        let mineOutcome: string | undefined;
        const waitingMine = watcher.wait(mine, 5_000, release.signal).then((o) => (mineOutcome = o));
        const waitingOther = watcher.wait(other, 5_000);
        await eventually('both waiters to register', () => watcher.waiting === 2);
        await b.pending.settle(other, 'completed');
        // The watcher has seen the other row settle (its waiter woke): mine must still be waiting.
        assert.equal(await waitingOther, 'completed');
        await new Promise(setImmediate);
        assert.equal(mineOutcome, undefined, 'not woken by the other row');
        assert.equal(watcher.waiting, 1);
        release.abort();
        assert.equal(await waitingMine, 'aborted');
        assert.equal((await a.pending.byId(mine))!.status, 'open');
      });
    });

    it('still releases a waiter when a push channel says it is live but delivers nothing (a silently dead LISTEN)', async () => {
      let onLive: ((live: boolean) => void) | undefined;
      const silentFeed = {
        live: true,
        subscribe(_onSettled: (id: string) => void, live: (live: boolean) => void) {
          onLive = live;
          return () => undefined;
        },
      };
      await withWatcher({ ...a, settledFeed: silentFeed }, async (watcher) => {
        onLive!(true);
        const id = await pendingRow(a);
        const started = Date.now();
        const waiting = watcher.wait(id, 10_000);
        setTimeout(() => void b.pending.settle(id, 'completed'), 50);
        assert.equal(await waiting, 'completed');
        const elapsed = Date.now() - started;
        assert.ok(elapsed >= 1_000 && elapsed < 4_500, `released by the slow safety poll after ${elapsed} ms, not by the 100 ms one`);
      });
    });

    it("resolves 'timeout' when nothing settles within the hold", async () => {
      await withWatcher(a, async (watcher) => {
        const id = await pendingRow(a);
        const started = Date.now();
        assert.equal(await watcher.wait(id, 200), 'timeout');
        const elapsed = Date.now() - started;
        assert.ok(elapsed >= 190 && elapsed < 1_000, `timed out after ${elapsed} ms`);
        assert.equal(watcher.waiting, 0);
      });
    });

    it("resolves 'aborted' when the AbortSignal fires, and at once for an already-aborted signal", async () => {
      await withWatcher(a, async (watcher) => {
        const id = await pendingRow(a);
        const controller = new AbortController();
        const started = Date.now();
        setTimeout(() => controller.abort(), 50);
        assert.equal(await watcher.wait(id, 5_000, controller.signal), 'aborted');
        assert.ok(Date.now() - started < 1_000);
        assert.equal(watcher.waiting, 0);
        assert.equal(await watcher.wait(id, 5_000, AbortSignal.abort()), 'aborted');
      });
    });

    it('waitForRow hands back the settled row with its reason, and the current row after a timeout', async () => {
      await withWatcher(a, async (watcher) => {
        const id = await pendingRow(a);
        const waiting = watcher.waitForRow(id, 5_000);
        await eventually('the waiter to register', () => watcher.waiting === 1);
        await b.pending.settle(id, 'cancelled', 'declined in the client');
        const { outcome, row } = await waiting;
        assert.equal(outcome, 'cancelled');
        assert.equal(row?.id, id);
        assert.equal(row?.status, 'cancelled');
        assert.equal(row?.outcome_reason, 'declined in the client');

        const open = await pendingRow(a);
        const timedOut = await watcher.waitForRow(open, 100);
        assert.equal(timedOut.outcome, 'timeout');
        assert.equal(timedOut.row?.status, 'open');
        assert.deepEqual(await watcher.waitForRow(randomUUID(), 5_000), { outcome: 'gone', row: undefined });
      });
    });

    it("answers at once with the status of an already-settled row, and 'gone' for an unknown one", async () => {
      await withWatcher(a, async (watcher) => {
        const id = await pendingRow(a);
        await b.pending.settle(id, 'denied');
        assert.equal(await watcher.wait(id, 5_000), 'denied');
        assert.equal(await watcher.wait(randomUUID(), 5_000), 'gone');
        assert.equal(watcher.waiting, 0);
      });
    });
  });
});
