import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { APPLICATION_NAME, describeError, type ErrorReporter } from './pool.js';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/postgres/', import.meta.url));

/** Any fixed number will do, as long as every broker instance uses the same one. */
const MIGRATION_LOCK_KEY = 0x6d63_7062_726b; // "mcpbrk"

/**
 * Applies `dir/*.sql` in name order, each once and in its own transaction, recording them in
 * `schema_migrations`; returns the names it applied. Runs on a client of its own so that the
 * pool's statement timeout does not cut a long migration short.
 */
export async function migrate(url: string, options: { connectTimeoutMs: number; onError: ErrorReporter; dir?: string }): Promise<string[]> {
  const dir = options.dir ?? MIGRATIONS_DIR;
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: options.connectTimeoutMs,
    application_name: APPLICATION_NAME,
  });
  client.on('error', (err) => options.onError('postgres_migration_client_error', describeError(err)));
  await client.connect();
  const applied: string[] = [];
  try {
    for (const name of files) {
      await client.query('BEGIN');
      try {
        // Taken before anything else, including CREATE TABLE IF NOT EXISTS: two sessions running
        // that concurrently can both pass the "not exists" check and one fails on pg_type.
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
        await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)');
        const done = await client.query('SELECT 1 FROM schema_migrations WHERE name = $1', [name]);
        if (done.rowCount === 0) {
          await client.query(await readFile(join(dir, name), 'utf8'));
          await client.query('INSERT INTO schema_migrations (name, applied_at) VALUES ($1, $2)', [name, Date.now()]);
          applied.push(name);
        }
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
    }
  } finally {
    await client.end().catch(() => {});
  }
  return applied;
}
