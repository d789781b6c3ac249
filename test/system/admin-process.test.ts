// `npm run admin` as the operator runs it (node --import tsx src/cli/admin.ts): what only the process
// shows — its exit code, its streams, no stack trace. Every command's behaviour is in
// test/admin.test.ts, through the same function in-process.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { spawnAdmin } from '../support/node-process.js';

describe('npm run admin, the process', () => {
  // No development database either (the repository's ./data may hold one from npm run dev).
  const env = { PATH: process.env.PATH ?? '', DATABASE_PATH: '/nonexistent/broker.db' };

  it('answers --help and a command --help on stdout with exit 0, without any configuration', async () => {
    const top = await spawnAdmin(env, ['--help']);
    assert.equal(top.code, 0, top.stderr);
    assert.match(top.stdout, /connections list/);
    const one = await spawnAdmin(env, ['audit', 'export', '--help']);
    assert.equal(one.code, 0);
    assert.match(one.stdout, /^Usage: npm run admin -- audit export /);
  });

  it('exits 2 with one stderr line and nothing on stdout for a usage error', async () => {
    const run = await spawnAdmin(env, ['connexions', 'list']);
    assert.equal(run.code, 2);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /^admin: unknown command "connexions" \(see "npm run admin -- --help"\)\n$/);
  });

  it('exits 1 naming the problem, with no stack trace, when the environment cannot describe the service', async () => {
    const run = await spawnAdmin(env, ['stats']);
    assert.equal(run.code, 1);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /^Configuration error: PUBLIC_URL is required\n/);
    assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
  });
});
