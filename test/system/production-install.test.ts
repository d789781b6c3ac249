// The production path, as the image builds and runs it, without a container engine: the
// Dockerfile's stages run in temporary folders (test/support/dockerfile.ts) — `npm ci` and
// `npm run build` in one, `npm ci --omit=dev` in another, the runtime's COPY steps gathering
// node_modules, dist/, views/, public/, migrations/ and scripts/ into a third. That tree (no
// TypeScript, no tsx, no oidc-provider) starts with the image's CMD and with `npm start`, answers
// /readyz 200, passes the image's HEALTHCHECK, and stops promptly on SIGTERM. Without dist/,
// `npm start` says so in one line. What cannot run here (the base images, the image's user and its
// /data ownership) is checked as text in the first describe.
//
// npm's cache is usually warm (the checkout's own install filled it). In an image build,
// better-sqlite3's install script unpacks the prebuilt addon it downloads from GitHub; this machine
// has no such download, so the stages get the same file from a local prebuild made of the
// checkout's own compiled addon (prebuild-install's `local_prebuilds` setting) instead of compiling
// it twice more (three minutes on 2 cores). The compile itself is what the checkout's `npm ci` ran.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { BROKER_CLIENT } from '../support/stack.js';
import { freePort, startIdp, type StartedIdp } from '../support/idp.js';
import { env as stageEnv, execForm, healthcheck, last, readDockerfile, runStages, stage, type BuildResult } from '../support/dockerfile.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const npmVersion = spawnSync('npm', ['--version'], { encoding: 'utf8' });
const NPM_MISSING = npmVersion.error || npmVersion.status !== 0 ? 'npm is not on PATH: the production install cannot be tried' : false;
const STAGES = readDockerfile(ROOT);
const RUNTIME = stage(STAGES, 'runtime');
/** The node user of the official node images. */
const NODE_UID = '1000';

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

/**
 * A folder holding better-sqlite3's addon as prebuild-install names and unpacks a downloaded one
 * (`<name>-v<version>-node-v<abi>-<platform>-<arch>.tar.gz` with build/Release/ inside), made from
 * the checkout's compiled addon: this Node's ABI, this platform, so the stages' addon loads here.
 */
function localPrebuild(folder: string): string {
  const addon = join(ROOT, 'node_modules/better-sqlite3');
  const { version } = JSON.parse(readFileSync(join(addon, 'package.json'), 'utf8')) as { version: string };
  mkdirSync(folder, { recursive: true });
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  const packed = spawnSync('tar', ['-czf', join(folder, name), '-C', addon, 'build/Release/better_sqlite3.node'], { encoding: 'utf8' });
  assert.equal(packed.status, 0, `tar: ${packed.error?.message ?? packed.stderr}`);
  return folder;
}

/** `node` in an exec-form command is the image's Node; here, the one running this test. */
function localNode(argv: string[]): [string, string[]] {
  const [command, ...args] = argv;
  return [command === 'node' ? process.execPath : command!, args];
}

describe('the Dockerfile, as text (what no test here can run)', () => {
  it('builds on the full Node 20 image and runs on the slim one, both pinned by digest', () => {
    const pinned = /^(node:[\w.-]+)@sha256:[0-9a-f]{64}$/;
    assert.deepEqual(
      STAGES.map((s) => [s.name, pinned.exec(s.image)?.[1] ?? `${s.image} (not pinned by a sha256 digest)`]),
      [
        ['build', 'node:20-bookworm'],
        ['deps', 'node:20-bookworm'],
        ['runtime', 'node:20-bookworm-slim'],
      ],
    );
    assert.equal(stage(STAGES, 'build').image, stage(STAGES, 'deps').image, 'build and deps are one image (the addon compiled in deps)');
    assert.match(
      readFileSync(join(ROOT, 'Dockerfile'), 'utf8'),
      /docker buildx imagetools inspect/,
      'the Dockerfile says how to update them',
    );
    // The addon compiled in deps must load in runtime: one Node major, one Debian release.
    assert.equal(STAGES.at(-1), RUNTIME, 'the runtime stage is the last one (what `docker build` tags)');
  });

  it('runs as a numeric non-root user that owns the data folder the SQLite default points into, and nothing else', () => {
    const user = last(RUNTIME, 'USER')?.args;
    assert.ok(user, 'the runtime stage sets USER');
    assert.match(user, /^\d+(:\d+)?$/, 'numeric, so a platform can check it is not root');
    assert.notEqual(user.split(':')[0], '0');
    assert.equal(user.split(':')[0], NODE_UID);
    const dataDir = stageEnv(RUNTIME).DATABASE_PATH!.replace(/\/[^/]+$/, '');
    const runs = RUNTIME.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
    assert.ok(
      runs.some((r) => r.includes(`mkdir -p ${dataDir}`) && r.includes(`chown ${user} ${dataDir}`)),
      `a RUN creates ${dataDir} owned by ${user}: ${runs.join(' | ')}`,
    );
    // The application files stay root-owned: the broker cannot rewrite its own code.
    for (const i of RUNTIME.instructions.filter((x) => x.keyword === 'COPY')) assert.doesNotMatch(i.args, /--chown/, i.args);
    const userAt = RUNTIME.instructions.findIndex((i) => i.keyword === 'USER');
    assert.ok(
      RUNTIME.instructions.slice(userAt).every((i) => i.keyword !== 'RUN' && i.keyword !== 'COPY'),
      'nothing is copied or run after USER',
    );
  });

  it('listens on every interface at the port it exposes, in production mode', () => {
    const env = stageEnv(RUNTIME);
    assert.equal(env.NODE_ENV, 'production');
    assert.equal(env.HOST, '0.0.0.0', 'the loopback default is unreachable from outside a container');
    assert.equal(last(RUNTIME, 'EXPOSE')?.args, env.PORT);
  });

  it('starts node itself in exec form (SIGTERM reaches the broker), and checks health with node on /healthz', () => {
    assert.deepEqual(execForm(last(RUNTIME, 'CMD')!.args), ['node', 'dist/main.js']);
    assert.equal(last(RUNTIME, 'STOPSIGNAL')?.args ?? 'SIGTERM', 'SIGTERM');
    assert.equal(last(RUNTIME, 'ENTRYPOINT'), undefined, 'no entrypoint wraps node');
    const check = healthcheck(RUNTIME);
    assert.ok(check, 'the runtime stage has a HEALTHCHECK');
    assert.equal(check.command[0], 'node', 'the slim image has no curl or wget');
    assert.match(check.command.join(' '), /\/healthz/);
  });

  it('keeps secrets and local state out of the build context (.dockerignore)', () => {
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    for (const entry of ['.env', '.env.*', '.git', 'node_modules', 'dist', 'data', '*.db', 'dev-secrets.json'])
      assert.ok(ignored.includes(entry), `.dockerignore lists ${entry}`);
    assert.ok(ignored.includes('!.env.example'), 'the template alone is let back in');
  });
});

describe(
  'the image built without a container engine (its stages in temporary folders), started and probed',
  { skip: NPM_MISSING, timeout: 25 * 60_000 },
  () => {
    let work: string;
    let built: BuildResult | undefined;
    let runtimeDir: string;
    let idp: StartedIdp;
    let port: number;
    let env: NodeJS.ProcessEnv;
    let child: ChildProcess | undefined;
    let prebuilds: string;

    before(async () => {
      work = mkdtempSync(join(tmpdir(), 'broker-image-'));
      prebuilds = localPrebuild(join(work, 'prebuilds'));
      runtimeDir = join(work, RUNTIME.name);
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
      // The image's environment, with what this machine needs instead: loopback (every test server
      // binds 127.0.0.1), a free port, a temporary database; and a minimal production configuration.
      env = cleanEnv({
        ...stageEnv(RUNTIME),
        HOST: '127.0.0.1',
        PORT: String(port),
        DATABASE_PATH: join(work, 'data/broker.db'),
        PUBLIC_URL: `http://127.0.0.1:${port}`,
        OIDC_ISSUER: idp.issuer,
        OIDC_CLIENT_ID: BROKER_CLIENT.id,
        OIDC_CLIENT_SECRET: BROKER_CLIENT.secret,
        GITHUB_CLIENT_ID: 'Iv1.production-install-test',
        GITHUB_CLIENT_SECRET: randomBytes(20).toString('hex'),
        BROKER_SECRET: randomBytes(32).toString('base64url'),
        TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
        LOG_LEVEL: 'info',
      });
    });

    after(async () => {
      if (child && child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child!.once('exit', resolve));
        process.kill(-child.pid!, 'SIGKILL');
        await exited;
      }
      await idp?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    /** Starts `argv` in its own process group (so `after` can end it and whatever it started), collecting its output. */
    function start(argv: [string, string[]]): { process: ChildProcess; output: () => string; exited: Promise<number | null> } {
      let output = '';
      const started = spawn(argv[0], argv[1], { cwd: runtimeDir, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
      child = started;
      started.stdout!.on('data', (d) => (output += d));
      started.stderr!.on('data', (d) => (output += d));
      return { process: started, output: () => output, exited: new Promise((resolve) => started.once('exit', resolve)) };
    }

    async function waitReady(running: { process: ChildProcess; output: () => string }): Promise<void> {
      let ready: { status: number; body: unknown } | undefined;
      for (const deadline = Date.now() + 30_000; Date.now() < deadline && running.process.exitCode === null; await sleep(200)) {
        const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
        if (res) {
          ready = { status: res.status, body: await res.json() };
          if (res.status === 200) break;
        }
      }
      assert.equal(ready?.status, 200, `readyz ${JSON.stringify(ready)}; output:\n${running.output()}`);
      assert.deepEqual(ready.body, { status: 'ready', store: 'sqlite', checks: { database: 'ok', identity_provider: 'ok' } });
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      assert.equal(health.status, 200);
      assert.deepEqual(await health.json(), { status: 'ok' });
      assert.match(running.output(), /"event":"listening"/);
      assert.doesNotMatch(running.output(), /"level":"(warn|error)"|Error:|\n\s+at /, 'a clean start');
    }

    function runHealthcheck(): { status: number | null; ms: number } {
      const check = healthcheck(RUNTIME)!;
      const [command, args] = localNode(check.command);
      const timeoutMs = Number.parseInt(check.options.timeout ?? '30', 10) * 1000;
      const started = Date.now();
      const result = spawnSync(command, args, { cwd: runtimeDir, env, timeout: timeoutMs });
      return { status: result.status, ms: Date.now() - started };
    }

    it('runs the build and deps stages (npm ci, npm run build; npm ci --omit=dev) and gathers the runtime tree', async (t) => {
      const started = Date.now();
      built = await runStages(STAGES, {
        context: ROOT,
        workRoot: work,
        // Only what makes it fast here (the warm cache) or states the image's npm defaults (npm 10
        // runs install scripts; this machine's may be configured otherwise). The steps run as written.
        env: cleanEnv({
          npm_config_prefer_offline: 'true',
          npm_config_ignore_scripts: 'false',
          npm_config_update_notifier: 'false',
          npm_config_better_sqlite3_local_prebuilds: prebuilds,
        }),
        run: async (command, cwd, stepEnv) => {
          const stepStarted = Date.now();
          const step = await run('sh', ['-c', command], cwd, stepEnv);
          t.diagnostic(`${command} (${Math.round((Date.now() - stepStarted) / 1000)} s)`);
          assert.equal(step.code, 0, `${command}:\n${step.output}`);
        },
      });
      t.diagnostic(`the three stages took ${Math.round((Date.now() - started) / 1000)} s`);
      assert.deepEqual(
        built.notRun.map((s) => s.stage),
        ['runtime'],
        `only the runtime's own file-system step is not run here: ${JSON.stringify(built.notRun)}`,
      );

      // The runtime tree: the production dependencies with the compiled addon, the build's output, nothing of development.
      assert.ok(existsSync(join(runtimeDir, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node')), 'better-sqlite3 was built');
      for (const dev of ['typescript', 'tsx', 'oidc-provider', 'eslint', '@modelcontextprotocol/server-everything'])
        assert.ok(!existsSync(join(runtimeDir, 'node_modules', dev)), `${dev} is a dev dependency and was not installed`);
      assert.ok(existsSync(join(runtimeDir, 'node_modules/@modelcontextprotocol/client')), 'the client is a runtime dependency');
      assert.ok(
        existsSync(join(runtimeDir, 'dist/main.js')) && existsSync(join(runtimeDir, 'dist/client/index.d.ts')),
        'npm run build ran',
      );
      assert.ok(!existsSync(join(runtimeDir, 'dist/dev')), 'development mode (oidc-provider, sandbox GitHub) is not part of the build');
      assert.ok(!existsSync(join(runtimeDir, 'src')) && !existsSync(join(runtimeDir, 'test')), 'no sources in the runtime tree');
    });

    it('says in one line that dist/ is missing when npm start runs before npm run build', async () => {
      assert.ok(built, 'the stages ran');
      renameSync(join(runtimeDir, 'dist'), join(work, 'dist-aside'));
      try {
        const started = await run('npm', ['start', '--silent'], runtimeDir, env);
        assert.notEqual(started.code, 0);
        assert.equal(
          started.output.trim(),
          'dist/main.js is missing: run `npm run build` first (npm start runs the compiled broker from dist/)',
        );
      } finally {
        renameSync(join(work, 'dist-aside'), join(runtimeDir, 'dist'));
      }
    });

    it("starts the image's CMD ready, passes its HEALTHCHECK, and exits promptly and cleanly on SIGTERM", async () => {
      assert.ok(built, 'the stages ran');
      const running = start(localNode(execForm(last(RUNTIME, 'CMD')!.args)!));
      await waitReady(running);

      const healthy = runHealthcheck();
      assert.equal(healthy.status, 0, 'HEALTHCHECK passes while the broker runs');

      // As the container runtime stops it: SIGTERM to node, PID 1 in the container.
      const signalled = Date.now();
      running.process.kill('SIGTERM');
      assert.equal(await running.exited, 0, running.output());
      const tookMs = Date.now() - signalled;
      assert.ok(tookMs < 5000, `exited ${tookMs} ms after SIGTERM with nothing in flight`);
      assert.equal(running.process.signalCode, null, 'it exited by itself, not killed by the signal');
      assert.match(running.output(), /"event":"shutting_down"/);
      assert.match(running.output(), /"signal":"SIGTERM"/);
      assert.doesNotMatch(running.output(), /"level":"(warn|error)"|Error:|\n\s+at /, 'a clean stop');

      const down = runHealthcheck();
      assert.equal(down.status, 1, 'HEALTHCHECK fails once nothing answers');
    });

    it('starts with npm start from the same tree, ready, and stops on SIGTERM sent to npm', async () => {
      assert.ok(built, 'the stages ran');
      const running = start(['npm', ['start', '--silent']]);
      await waitReady(running);
      // SIGTERM to npm alone, which must reach the broker (npm start execs it, no shell in between).
      running.process.kill('SIGTERM');
      assert.equal(await running.exited, 0, running.output());
      assert.match(running.output(), /"event":"shutting_down"/);
    });

    it('runs the key rotation command from the built tree (no tsx in a production install)', async () => {
      assert.ok(built, 'the stages ran');
      const rotate = await run(process.execPath, ['dist/cli/rotate-keys.js'], runtimeDir, env);
      assert.equal(rotate.code, 0, rotate.output);
      assert.match(rotate.output, /Every row uses the current key/);
    });
  },
);
