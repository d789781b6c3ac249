import Database from 'better-sqlite3';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export type Db = Database.Database;

const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/sqlite/', import.meta.url));

/** Opens the SQLite file (creating its folder), tunes it for several processes, and migrates it. */
export function openDatabase(path: string): Db {
  if (path !== ':memory:') {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    ownerOnly(path);
  }
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
  } catch (err) {
    db.close();
    // A file that is not SQLite (or damaged): say which file, and what to do, not just "file is not a database".
    const code = (err as { code?: unknown }).code;
    if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT')
      throw new Error(
        `DATABASE_PATH: ${path} is not a SQLite database or is damaged (${(err as Error).message}); restore it from a backup, or move it away to start with an empty one`,
      );
    throw err;
  }
  // WAL + NORMAL is durable across process crashes (only an OS crash can lose the last commits).
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  // Keep more of the connections index in memory: lookups stay flat as the table grows
  // (see bench/README.md, "store"). Pages are read through mmap rather than copied.
  db.pragma('cache_size = -32768');
  db.pragma('mmap_size = 268435456');
  db.pragma('foreign_keys = ON');
  migrate(db);
  return db;
}

/**
 * Creates the database file readable by its owner only (SQLite would create it 0644), and tightens
 * files an earlier release left wider. SQLite gives the -wal and -shm files it creates the main
 * file's mode, so they follow; existing ones are tightened here too.
 */
function ownerOnly(path: string): void {
  closeSync(openSync(path, 'a', 0o600));
  for (const file of [path, `${path}-wal`, `${path}-shm`]) if (existsSync(file)) chmodSync(file, 0o600);
}

/**
 * Applies `dir/*.sql` (default `migrations/sqlite/`) in name order, each once, recording them in
 * `schema_migrations`. Rows naming files `dir` does not hold are left alone: development mode's
 * migrations (src/dev/migrations/) share the ledger, and a database it used opens in production too.
 */
export function migrate(db: Db, dir = MIGRATIONS_DIR): string[] {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort();
  const applied: string[] = [];
  for (const name of files) {
    // BEGIN IMMEDIATE serialises concurrent starters: the second one sees the row and skips.
    const apply = db.transaction(() => {
      if (db.prepare('SELECT 1 FROM schema_migrations WHERE name = ?').get(name)) return false;
      db.exec(readFileSync(join(dir, name), 'utf8'));
      db.prepare('INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)').run(name, Date.now());
      return true;
    });
    if (apply.immediate()) applied.push(name);
  }
  return applied;
}
