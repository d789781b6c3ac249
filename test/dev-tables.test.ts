// Development mode's tables (sandbox GitHub, dev IdP) live in src/dev/migrations/ and are applied
// only by development mode: a production SQLite database holds the broker's tables alone, and a
// database the previous release made (every table in one migrations/sqlite/) keeps working in both.
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { DEV_MIGRATIONS_DIR, openDevTables } from '../src/dev/store/index.js';
import { createLogger } from '../src/log.js';
import { openSqliteStore, sqliteHandle, type SqliteDb } from '../src/store/index.js';
import { migrate } from '../src/store/sqlite/database.js';
import { sha256Hex } from '../src/crypto/index.js';
import { startDevBrokerOnFreePort } from './support/dev-broker.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const BROKER_MIGRATIONS = join(ROOT, 'migrations', 'sqlite');
// The previous release's SQLite migrations (all in migrations/sqlite/ then), as `sha256sum` lines
// naming where each file lives now. A migration a database has applied is never edited, so these
// files still are that release's schema, and the fixture says so without a copy of the SQL.
const PREVIOUS_RELEASE = join(ROOT, 'test', 'fixtures', 'sqlite-migrations-0.1.0.sha256');
const DEV_TABLE = /^(sandbox_|dev_)/;
const CLIENT_ID = 'Iv1.sandbox-broker';
const LEGACY_TOKEN = 'gho_legacy0123456789abcdefghijklmnopqrst';

const sqlFiles = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort();
const tables = (db: SqliteDb) =>
  (
    db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as Array<{
      name: string;
    }>
  ).map((t) => t.name);
const schemaObjects = (db: SqliteDb) =>
  (db.prepare("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name").all() as Array<{ name: string }>).map(
    (t) => t.name,
  );
const ledger = (db: SqliteDb) =>
  db.prepare('SELECT name, applied_at FROM schema_migrations ORDER BY name').all() as Array<{ name: string }>;
const count = (db: SqliteDb, table: string) => (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;

function previousReleaseFiles(): Array<{ name: string; path: string; sha256: string }> {
  return readFileSync(PREVIOUS_RELEASE, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [sha256, path] = line.split(/\s+/) as [string, string];
      return { name: path.split('/').pop()!, path: join(ROOT, path), sha256 };
    });
}

/** The previous release's ledger plus the broker migrations added since (the broker applies those at open). */
function releaseLedger(): string[] {
  return [...new Set([...previousReleaseFiles().map((m) => m.name), ...sqlFiles(BROKER_MIGRATIONS)])].sort();
}

/**
 * A database as the previous release left it after `npm run dev`: its migrations applied from one
 * folder by the same runner, then rows in the sandbox GitHub's and the dev IdP's tables.
 */
function previousReleaseDatabase(file: string): void {
  const folder = `${file}-migrations`;
  mkdirSync(folder);
  for (const m of previousReleaseFiles()) copyFileSync(m.path, join(folder, m.name));
  // Not the store's openDatabase: that would apply today's migrations first.
  const db = new Database(file);
  migrate(db, folder);
  const now = Date.now();
  db.prepare('INSERT INTO sandbox_github_users (id, login, name) VALUES (?, ?, ?)').run(1000, 'legacy', 'Legacy User');
  db.prepare("UPDATE sandbox_github_counters SET value = 1001 WHERE name = 'next_user_id'").run();
  db.prepare(
    'INSERT INTO sandbox_github_tokens (token_hash, client_id, login, scopes, issued_at, expires_at) VALUES (?, ?, ?, ?, ?, NULL)',
  ).run(sha256Hex(LEGACY_TOKEN), CLIENT_ID, 'legacy', 'repo', now);
  db.prepare('INSERT INTO sandbox_github_grants (client_id, login, scopes, created_at, updated_at) VALUES (?, ?, ?, ?, ?)').run(
    CLIENT_ID,
    'legacy',
    'repo',
    now,
    now,
  );
  db.prepare("INSERT INTO sandbox_github_repos (owner, repo, last_number) VALUES ('octo', 'old', 1)").run();
  db.prepare(
    "INSERT INTO sandbox_github_issues (owner, repo, number, title, body, labels, author, created_at) VALUES ('octo', 'old', 1, 'Filed before the upgrade', NULL, '[]', 'legacy', ?)",
  ).run(now);
  const idp = db.prepare('INSERT INTO dev_idp_models (model, id, payload, grant_id, uid, expires_at) VALUES (?, ?, ?, ?, ?, ?)');
  idp.run(
    'Client',
    'legacy-assistant',
    JSON.stringify({
      client_id: 'legacy-assistant',
      client_name: 'Legacy assistant',
      redirect_uris: ['http://127.0.0.1:9/callback'],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    }),
    null,
    null,
    null,
  );
  idp.run('Session', 'legacy-session', JSON.stringify({ accountId: 'legacy', uid: 'legacy-uid' }), null, 'legacy-uid', now + 86_400_000);
  db.close();
}

describe('development tables out of the production schema', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'broker-dev-tables-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('gives a fresh production database only the broker tables, and records only the broker migrations', async () => {
    const store = openSqliteStore(join(dir, 'production.db'));
    try {
      const db = sqliteHandle(store);
      assert.deepEqual(
        schemaObjects(db).filter((name) => DEV_TABLE.test(name)),
        [],
        'no sandbox_* or dev_* table or index',
      );
      const created = new Set(
        sqlFiles(BROKER_MIGRATIONS).flatMap((f) =>
          [...readFileSync(join(BROKER_MIGRATIONS, f), 'utf8').matchAll(/CREATE TABLE (?:IF NOT EXISTS )?(\w+)/gi)].map((m) => m[1]!),
        ),
      );
      assert.ok(created.has('connections'), 'the scan sees the broker migrations');
      assert.deepEqual(
        tables(db).filter((name) => name !== 'schema_migrations' && !created.has(name)),
        [],
        'every table is one a broker migration creates',
      );
      assert.deepEqual(
        ledger(db).map((m) => m.name),
        sqlFiles(BROKER_MIGRATIONS),
      );
    } finally {
      await store.close();
    }
  });

  it('adds the sandbox GitHub and dev IdP tables in development mode, recorded as the previous release recorded them', async () => {
    const store = openSqliteStore(join(dir, 'development.db'));
    try {
      const { sandboxGitHub } = openDevTables(store);
      const db = sqliteHandle(store);
      const dev = tables(db).filter((name) => DEV_TABLE.test(name));
      assert.ok(
        dev.includes('sandbox_github_users') && dev.includes('sandbox_github_refresh_tokens') && dev.includes('dev_idp_models'),
        dev.join(),
      );
      assert.deepEqual(
        ledger(db).map((m) => m.name),
        [...new Set([...releaseLedger(), ...sqlFiles(DEV_MIGRATIONS_DIR)])].sort(),
        'the previous release’s ledger (plus the broker’s and development mode’s newer migrations): either release opens the other one’s database',
      );
      assert.equal(sandboxGitHub.findUser('octocat')?.id, 583231, 'seeded as before');
      const before = ledger(db);
      openDevTables(store);
      assert.deepEqual(ledger(db), before, 'a second open applies nothing');
    } finally {
      await store.close();
    }
  });

  it('keeps the previous release’s migrations byte for byte, and the broker’s and development mode’s file names apart', () => {
    for (const m of previousReleaseFiles())
      assert.equal(sha256Hex(readFileSync(m.path, 'utf8')), m.sha256, `${m.name} was edited after release`);
    const broker = sqlFiles(BROKER_MIGRATIONS);
    const dev = sqlFiles(DEV_MIGRATIONS_DIR);
    assert.deepEqual(
      dev,
      [
        '002_sandbox_github.sql',
        '003_dev_identity_provider.sql',
        '005_sandbox_github_app.sql',
        '008_sandbox_github_repositories.sql',
        '016_sandbox_github_repo_creator.sql',
      ],
      'src/dev/migrations/ holds the moved files under their old names, and the ones added since',
    );
    assert.deepEqual(
      broker.filter((name) => dev.includes(name)),
      [],
      'one ledger: a name in both folders would be applied once, for one of them',
    );
  });

  describe('a database the previous release made with npm run dev', () => {
    let file: string;
    before(() => {
      file = join(dir, 'previous', 'data', 'broker.db');
      mkdirSync(join(dir, 'previous', 'data'), { recursive: true });
      previousReleaseDatabase(file);
    });

    it('opens in production: the broker migrates only what is new, works, and leaves the development tables alone', async () => {
      const copy = join(dir, 'previous-in-production.db');
      copyFileSync(file, copy);
      const store = openSqliteStore(copy);
      try {
        const db = sqliteHandle(store);
        const recorded = ledger(db);
        assert.deepEqual(
          recorded.map((m) => m.name),
          releaseLedger(),
          'the rows for 002, 003 and 005 stay; the broker neither chokes on nor removes them, and adds only its newer migrations',
        );
        assert.deepEqual(migrate(db), []);
        await store.sessions.create('after-upgrade', Date.now() + 60_000);
        assert.ok(await store.sessions.find('after-upgrade'));
        assert.deepEqual(
          ['sandbox_github_users', 'sandbox_github_tokens', 'sandbox_github_grants', 'sandbox_github_issues', 'dev_idp_models'].map((t) =>
            count(db, t),
          ),
          [4, 1, 1, 1, 2],
        );
      } finally {
        await store.close();
      }
    });

    it('opens in development mode with its sandbox users, tokens, grants and issues and its IdP clients and sessions', async () => {
      const { dev } = await startDevBrokerOnFreePort(
        (port) => ({ PATH: process.env.PATH, PORT: String(port), DATABASE_PATH: file }),
        createLogger('error', () => {}),
      );
      const sandbox = `${dev.publicUrl}/sandbox/github`;
      try {
        const me = await fetch(`${sandbox}/api/v3/user`, { headers: { authorization: `Bearer ${LEGACY_TOKEN}` } });
        assert.equal(me.status, 200, 'a sandbox token issued before the upgrade still works');
        assert.deepEqual(((await me.json()) as { id: number; login: string }).login, 'legacy');
        const issue = await fetch(`${sandbox}/octo/old/issues/1`);
        assert.equal(issue.status, 200);
        assert.match(await issue.text(), /Filed before the upgrade/);
        assert.match(
          await (await fetch(`${sandbox}/legacy`)).text(),
          new RegExp(`/legacy/applications/${CLIENT_ID.replaceAll('.', '\\.')}/revoke`),
          'the grant survived',
        );
        const authorize = new URL(`${dev.publicUrl}/idp/auth`);
        for (const [k, v] of Object.entries({
          client_id: 'legacy-assistant',
          redirect_uri: 'http://127.0.0.1:9/callback',
          response_type: 'code',
          scope: 'openid',
          code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
          code_challenge_method: 'S256',
        }))
          authorize.searchParams.set(k, v);
        const auth = await fetch(authorize, { redirect: 'manual' });
        assert.equal(auth.status, 303, 'the IdP finds the client registered before the upgrade');
        assert.match(auth.headers.get('location') ?? '', /\/idp\/interaction\//);
      } finally {
        await dev.running.close();
      }

      const store = openSqliteStore(file);
      try {
        const before = ledger(sqliteHandle(store));
        const { sandboxGitHub, identityProvider } = openDevTables(store);
        assert.deepEqual(ledger(sqliteHandle(store)), before, 'adopted, not re-applied');
        assert.deepEqual(sandboxGitHub.findUser('LEGACY'), { id: 1000, login: 'legacy', name: 'Legacy User' });
        assert.equal(sandboxGitHub.ensureUser('newcomer').id, 1001, 'the id counter continues');
        assert.deepEqual(
          sandboxGitHub.listGrants('legacy').map((g) => [g.clientId, g.scopes]),
          [[CLIENT_ID, ['repo']]],
        );
        assert.equal(
          sandboxGitHub.createIssue({ owner: 'octo', repo: 'old', title: 'After', body: null, labels: [], author: 'legacy', createdAt: 1 })
            .number,
          2,
        );
        const old = sandboxGitHub.findRepository('octo', 'old');
        assert.ok(old && Number.isSafeInteger(old.id), 'a repository made before repositories had ids has one now');
        assert.equal(old.createdAt, sandboxGitHub.getIssue('octo', 'old', 1)!.createdAt, 'created when its first issue was');
        const fresh = sandboxGitHub.ensureRepository('octo', 'new', 5);
        assert.ok(fresh.id > old.id, 'and new ones are numbered after it');
        assert.ok(sandboxGitHub.findRepository('octocat', 'Hello-World'), 'seeded');
        assert.equal(identityProvider.find('Client', 'legacy-assistant')?.payload.client_name, 'Legacy assistant');
        assert.equal(identityProvider.find('Session', 'legacy-session')?.payload.accountId, 'legacy');
      } finally {
        await store.close();
      }
    });
  });
});
