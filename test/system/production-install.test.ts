// The production path, as an operator runs it: a built tree (package.json, package-lock.json, dist/,
// views/, public/, migrations/) installed with `npm ci --omit=dev` — no TypeScript, no tsx, no
// oidc-provider — starts with `npm start` and answers /readyz 200. Without dist/, `npm start` says
// so in one line. npm's cache is usually warm (the checkout's own install filled it); on a cold
// machine better-sqlite3 downloads and compiles, hence the long timeout.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { BROKER_CLIENT } from '../support/stack.js';
import { freePort, startIdp, type StartedIdp } from '../support/idp.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const npmVersion = spawnSync('npm', ['--version'], { encoding: 'utf8' });
const NPM_MISSING = npmVersion.error || npmVersion.status !== 0 ? 'npm is not on PATH: the production install cannot be tried' : false;

/** The child's environment: ours without npm's per-run variables (this file may itself run under `npm test`). */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) && k !== 'NODE_OPTIONS'));
  return { ...env, ...extra };
}

function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, output }));
  });
}

describe('a production install (npm ci --omit=dev, npm start)', { skip: NPM_MISSING, timeout: 20 * 60_000 }, () => {
  let dir: string;
  let idp: StartedIdp;
  let port: number;
  let child: ChildProcess | undefined;
  let output = '';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'broker-production-'));
    for (const entry of ['package.json', 'package-lock.json', 'scripts', 'views', 'public', 'migrations'])
      cpSync(join(ROOT, entry), join(dir, entry), { recursive: true });
    port = await freePort();
    idp = await startIdp({
      clients: [
        {
          client_id: BROKER_CLIENT.id,
          client_secret: BROKER_CLIENT.secret,
          redirect_uris: [`http://127.0.0.1:${port}/auth/callback`],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
      resource: `http://127.0.0.1:${port}/mcp`,
    });
  });

  after(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      process.kill(-child.pid!, 'SIGKILL');
      await exited;
    }
    await idp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('installs only the runtime dependencies', async (t) => {
    const started = Date.now();
    const install = await run(
      'npm',
      ['ci', '--omit=dev', '--ignore-scripts=false', '--no-audit', '--no-fund', '--prefer-offline'],
      dir,
      cleanEnv({ NODE_ENV: 'production' }),
    );
    t.diagnostic(`npm ci --omit=dev took ${Math.round((Date.now() - started) / 1000)} s`);
    assert.equal(install.code, 0, install.output);
    assert.ok(existsSync(join(dir, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node')), 'better-sqlite3 was built');
    for (const dev of ['typescript', 'tsx', 'oidc-provider', '@modelcontextprotocol/client'])
      assert.ok(!existsSync(join(dir, 'node_modules', dev)), `${dev} is a dev dependency and was not installed`);
  });

  it('says in one line that dist/ is missing when npm start runs before npm run build', async () => {
    const start = await run('npm', ['start', '--silent'], dir, cleanEnv({ NODE_ENV: 'production' }));
    assert.notEqual(start.code, 0);
    assert.equal(start.output.trim(), 'dist/main.js is missing: run `npm run build` first (npm start runs the compiled broker from dist/)');
  });

  it('builds with npm run build (in the checkout) and starts from dist/ with npm start, ready, and stops on SIGTERM', async () => {
    // The build needs the dev dependencies, so it runs in the checkout and writes into the copy.
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    const build = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', join(dir, 'dist')], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    assert.equal(build.status, 0, build.stdout + build.stderr);
    assert.ok(!existsSync(join(dir, 'dist/dev')), 'development mode (oidc-provider, sandbox GitHub) is not part of the build');

    const publicUrl = `http://127.0.0.1:${port}`;
    const env = cleanEnv({
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: String(port),
      PUBLIC_URL: publicUrl,
      DATABASE_PATH: join(dir, 'data/broker.db'),
      OIDC_ISSUER: idp.issuer,
      OIDC_CLIENT_ID: BROKER_CLIENT.id,
      OIDC_CLIENT_SECRET: BROKER_CLIENT.secret,
      GITHUB_CLIENT_ID: 'Iv1.production-install-test',
      GITHUB_CLIENT_SECRET: randomBytes(20).toString('hex'),
      BROKER_SECRET: randomBytes(32).toString('base64url'),
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      LOG_LEVEL: 'info',
    });
    // Its own process group, so `after` can end npm and the broker together if anything hangs.
    child = spawn('npm', ['start', '--silent'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    child.stdout!.on('data', (d) => (output += d));
    child.stderr!.on('data', (d) => (output += d));
    const exited = new Promise<number | null>((resolve) => child!.once('exit', resolve));

    let ready: { status: number; body: unknown } | undefined;
    for (const deadline = Date.now() + 30_000; Date.now() < deadline && child.exitCode === null; await sleep(200)) {
      const res = await fetch(`${publicUrl}/readyz`).catch(() => undefined);
      if (res) {
        ready = { status: res.status, body: await res.json() };
        if (res.status === 200) break;
      }
    }
    assert.equal(ready?.status, 200, `readyz ${JSON.stringify(ready)}; output:\n${output}`);
    assert.deepEqual(ready.body, { status: 'ready', store: 'sqlite', checks: { database: 'ok', identity_provider: 'ok' } });
    assert.match(output, /"event":"listening"/);
    assert.doesNotMatch(output, /"level":"(warn|error)"|Error:|\n\s+at /, 'a clean start');

    // As a container runtime stops it: SIGTERM to npm alone, which must reach the broker (no shell in between).
    child.kill('SIGTERM');
    assert.equal(await exited, 0, output);
    assert.match(output, /"event":"shutting_down"/);

    // The key rotation command runs from the built tree too (no tsx in a production install).
    const rotate = await run(process.execPath, ['dist/cli/rotate-keys.js'], dir, env);
    assert.equal(rotate.code, 0, rotate.output);
    assert.match(rotate.output, /Every row uses the current key/);
  });
});
