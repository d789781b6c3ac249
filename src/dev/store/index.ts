// Development mode's own tables (the sandbox GitHub's and the dev IdP's), in the broker's SQLite
// file but never in a production database: only development mode applies src/dev/migrations/.
// These files run statements on their own tables only, through the handle the store hands out
// (extendSqliteSchema); they never open a database or import a driver (test/layering.test.ts).
import { fileURLToPath } from 'node:url';
import { extendSqliteSchema, type Store } from '../../store/index.js';
import { DevIdpStore } from './dev-idp-store.js';
import { SandboxGitHubStore } from './sandbox-github-store.js';

export { DevIdpStore, type DevIdpRecord } from './dev-idp-store.js';
export * from './sandbox-github-store.js';

/**
 * The previous release applied these from migrations/sqlite/ and recorded them in
 * `schema_migrations` under the same names, so a database it made is already migrated here.
 */
export const DEV_MIGRATIONS_DIR = fileURLToPath(new URL('../migrations/', import.meta.url));

export interface DevTables {
  sandboxGitHub: SandboxGitHubStore;
  identityProvider: DevIdpStore;
}

/** Creates (or adopts) development mode's tables in a SQLite store's file and opens them. */
export function openDevTables(store: Store): DevTables {
  const db = extendSqliteSchema(store, DEV_MIGRATIONS_DIR);
  return { sandboxGitHub: new SandboxGitHubStore(db), identityProvider: new DevIdpStore(db) };
}
