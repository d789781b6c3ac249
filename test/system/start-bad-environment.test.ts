// `npm start` with a bad environment, as the process does it: exit code 1, one stderr line per
// problem, no stack trace, and nothing written before the configuration is valid.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { freePort } from '../../src/dev/free-port.js';
import { missing, productionEnv, REQUIRED } from '../support/production-env.js';

/** A complete, valid production-shaped environment with nothing optional set, then `overrides`. */
const validEnv = (overrides: Record<string, string | undefined> = {}) => productionEnv(overrides);

/** Runs `src/main.ts` with exactly `env` and waits (at most 60 s) for it to exit. */
async function runMain(env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: fileURLToPath(new URL('../../', import.meta.url)),
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const code = await new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`still running after 60 s:\n${stderr}`));
    }, 60_000);
    child.once('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  return { code, stdout, stderr };
}

describe('starting the service with a bad environment', () => {
  it('exits with code 1 and one stderr line naming the missing variable, without a stack trace', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'broker-config-'));
    try {
      const dbPath = join(dir, 'broker.db');
      const env: NodeJS.ProcessEnv = {
        PATH: process.env.PATH,
        ...validEnv({ BROKER_SECRET: undefined, PORT: '0', PUBLIC_URL: 'http://127.0.0.1:1', DATABASE_PATH: dbPath }),
      };
      const { code, stdout, stderr } = await runMain(env);
      assert.equal(code, 1);
      assert.equal(stderr, 'Configuration error: BROKER_SECRET is required\n');
      assert.equal(stdout, '');
      assert.equal(existsSync(dbPath), false, 'no database is created before the configuration is valid');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits with code 1 and one stderr line per missing variable in an empty environment, all in one go', async () => {
    const { code, stdout, stderr } = await runMain({ PATH: process.env.PATH });
    assert.equal(code, 1);
    assert.equal(stderr, REQUIRED.map((name) => `Configuration error: ${missing(name)}\n`).join(''));
    assert.equal(stdout, '');
  });

  it('exits with code 1 and one line naming DATABASE_URL (without its password) when PostgreSQL cannot be reached', async () => {
    const port = await freePort();
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      ...validEnv({
        PORT: '0',
        PUBLIC_URL: 'http://127.0.0.1:1',
        DATABASE_URL: `postgres://broker:hunter2-secret@127.0.0.1:${port}/broker`,
      }),
    };
    const { code, stdout, stderr } = await runMain(env);
    assert.equal(code, 1);
    assert.match(stderr, /^Could not start: DATABASE_URL: cannot open the PostgreSQL database \(.*ECONNREFUSED.*\)\n$/);
    assert.doesNotMatch(stderr, /hunter2/);
    assert.equal(stdout, '');
  });

  it('stops `npm start` with one line naming the variable when a webhook secret is missing or malformed, never echoing it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'broker-webhooks-'));
    try {
      const file = join(dir, 'webhooks.yaml');
      writeFileSync(file, ['webhooks:', '  - id: audit-sink', '    url: https://hooks.example.com/broker'].join('\n'));
      for (const [secret, line] of [
        [undefined, 'WEBHOOK_AUDIT_SINK_SECRET is required for webhook "audit-sink" (whsec_ and the base64 of 24 to 64 random bytes)'],
        ['whsec_c2hvcnQ=', 'WEBHOOK_AUDIT_SINK_SECRET must be whsec_ followed by the base64 of 24 to 64 random bytes'],
      ] as const) {
        const env = validEnv({ PROVIDERS_FILE: file, WEBHOOK_AUDIT_SINK_SECRET: secret, PORT: '0', PUBLIC_URL: 'http://127.0.0.1:1' });
        const { code, stdout, stderr } = await runMain({ PATH: process.env.PATH, ...env });
        assert.equal(code, 1);
        assert.equal(stderr, `Configuration error: ${line}\n`);
        assert.equal(stdout, '');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names PORT when the port is taken, and the file and what to do when the database is not SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'broker-start-'));
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as AddressInfo).port;
      const inUse = await runMain({
        PATH: process.env.PATH,
        ...validEnv({ PORT: String(port), PUBLIC_URL: 'http://127.0.0.1:1', DATABASE_PATH: join(dir, 'broker.db') }),
      });
      assert.equal(inUse.code, 1);
      assert.equal(
        inUse.stderr,
        `Could not start: PORT: 127.0.0.1:${port} is already in use (another broker or npm run dev?); stop that process or set PORT to a free port\n`,
      );

      const corrupt = join(dir, 'corrupt.db');
      writeFileSync(corrupt, 'this is not a SQLite file, but it is long enough to have a header: '.repeat(20));
      const damaged = await runMain({
        PATH: process.env.PATH,
        ...validEnv({ PORT: '0', PUBLIC_URL: 'http://127.0.0.1:1', DATABASE_PATH: corrupt }),
      });
      assert.equal(damaged.code, 1);
      assert.match(
        damaged.stderr,
        new RegExp(
          `^Could not start: DATABASE_PATH: ${corrupt.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is not a SQLite database or is damaged \\(.*\\); restore it from a backup, or move it away to start with an empty one\n$`,
        ),
      );
      assert.doesNotMatch(damaged.stderr, /\n\s+at /, 'no stack trace');
    } finally {
      taken.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names every bad setting at once, placeholders and an unknown LOG_LEVEL included', async () => {
    const { code, stderr } = await runMain({
      PATH: process.env.PATH,
      ...validEnv({ OIDC_CLIENT_SECRET: 'change-me', BROKER_SECRET: 'change-me', LOG_LEVEL: 'verbose', PUBLIC_URL: undefined }),
    });
    assert.equal(code, 1);
    assert.deepEqual(
      stderr
        .trimEnd()
        .split('\n')
        .map((l) => /^Configuration error: ([A-Z_]+)/.exec(l)?.[1]),
      ['OIDC_CLIENT_SECRET', 'BROKER_SECRET', 'PUBLIC_URL', 'LOG_LEVEL'],
    );
  });
});
