// Test helper: a throwaway PostgreSQL cluster (initdb into a temp dir, postgres on a free port of
// 127.0.0.1, trust auth for the `broker` superuser), which tests can stop and start again.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from '../../src/dev/free-port.js';

const run = promisify(execFile);
const USER = 'broker';

export interface PgServer {
  url: string;
  port: number;
  /**
   * Creates a fresh database and returns its URL. `icuLocale` gives it that ICU collation (as a
   * production database created with, say, en_US.UTF-8 has) instead of the cluster's byte order.
   */
  createDatabase(name?: string, options?: { icuLocale?: string }): Promise<string>;
  /** Fast shutdown (SIGINT: clients are disconnected), resolving once the server has exited. */
  stop(): Promise<void>;
  /** Starts the server again on the same port and data directory. */
  start(): Promise<void>;
  restart(): Promise<void>;
  /** Stops the server and removes its directory. */
  destroy(): Promise<void>;
}

/**
 * Why a suite's PostgreSQL half does not run here, or false when it does: `npm run test:quick` skips
 * it (TEST_QUICK=1), and a machine without Debian's server binaries cannot run it.
 */
export function postgresSkipReason(): string | false {
  if (process.env.TEST_QUICK === '1') return 'TEST_QUICK=1 (npm run test:quick): the PostgreSQL half runs in npm test';
  try {
    binDir();
    return false;
  } catch {
    return 'no initdb under /usr/lib/postgresql/*/bin: apt-get install postgresql to run the PostgreSQL half';
  }
}

/** The bin folder of the newest PostgreSQL installed from Debian's packages. */
function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter(
          (v) => /^\d+(\.\d+)?$/.test(v) && existsSync(join(root, v, 'bin', 'postgres')) && existsSync(join(root, v, 'bin', 'initdb')),
        )
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0)
    throw new Error(`no PostgreSQL server found under ${root}/*/bin: install it with \`apt-get install postgresql\``);
  return join(root, versions[0]!, 'bin');
}

/** postgres refuses to run as root, so as root both initdb and the server run as the `postgres` user. */
async function runAs(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const [uid, gid] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]).catch(() => {
    throw new Error('running as root needs a `postgres` OS user to run the test cluster (apt-get install postgresql creates it)');
  });
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/** Whether our cluster (the one serving `data`) answers on `port`: another suite's may hold a port we were told was free. */
async function canConnect(port: number, data: string): Promise<boolean> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: USER, database: 'postgres', connectionTimeoutMillis: 1_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    const { rows } = await client.query<{ data_directory: string }>('SHOW data_directory');
    return rows[0]?.data_directory === data;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

export async function startPostgres(): Promise<PgServer> {
  const bin = binDir();
  const user = await runAs();
  const dir = await mkdtemp(join(tmpdir(), 'broker-pg-'));
  if (user) await chown(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  const logPath = join(dir, 'postgres.log');
  let port = await freePort();
  const spawnAs = user ? { uid: user.uid, gid: user.gid } : {};

  try {
    await run(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', USER, '--no-sync', '-E', 'UTF8', '--locale=C'], {
      cwd: dir,
      ...spawnAs,
    });
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    const stderr = (err as { stderr?: string }).stderr ?? '';
    throw new Error(`initdb failed: ${stderr || String(err)}`);
  }

  let proc: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const killOnExit = () => proc?.kill('SIGQUIT');
  process.once('exit', killOnExit);

  const logTail = async () => (await readFile(logPath, 'utf8').catch(() => '')).split('\n').slice(-20).join('\n');

  async function start(): Promise<void> {
    if (proc) return;
    const log = openSync(logPath, 'a');
    const child = spawn(
      join(bin, 'postgres'),
      [
        '-D',
        data,
        '-p',
        String(port),
        '-k',
        dir,
        '-h',
        '127.0.0.1',
        '-c',
        'fsync=off',
        '-c',
        'synchronous_commit=off',
        '-c',
        'full_page_writes=off',
      ],
      { cwd: dir, stdio: ['ignore', log, log], ...spawnAs },
    );
    closeSync(log);
    proc = child;
    let hasExited = false;
    exited = new Promise((resolve) =>
      child.once('exit', () => {
        hasExited = true;
        if (proc === child) proc = undefined;
        resolve();
      }),
    );
    const deadline = Date.now() + 30_000;
    while (!(await canConnect(port, data))) {
      if (hasExited) {
        const tail = await logTail();
        throw Object.assign(new Error(`postgres exited during startup:\n${tail}`), {
          portTaken: /could not bind|already in use/i.test(tail),
        });
      }
      if (Date.now() > deadline) {
        child.kill('SIGQUIT');
        throw new Error(`postgres did not accept connections within 30 s:\n${await logTail()}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async function stop(): Promise<void> {
    const child = proc;
    if (!child) return;
    child.kill('SIGINT');
    await exited;
  }

  let counter = 0;
  const urlFor = (database: string) => `postgres://${USER}@127.0.0.1:${port}/${database}`;

  // The port was free when asked; another suite running beside this one may have bound it since.
  for (let attempt = 1; ; attempt++) {
    try {
      await start();
      break;
    } catch (err) {
      if (!(err as { portTaken?: boolean }).portTaken || attempt === 5) {
        process.removeListener('exit', killOnExit);
        await rm(dir, { recursive: true, force: true });
        throw err;
      }
      port = await freePort();
    }
  }
  return {
    url: urlFor('postgres'),
    port,
    async createDatabase(name = `broker_test_${++counter}_${randomBytes(3).toString('hex')}`, options = {}) {
      const client = new pg.Client({ connectionString: urlFor('postgres') });
      client.on('error', () => {});
      await client.connect();
      try {
        const icu =
          options.icuLocale === undefined
            ? ''
            : ` TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '${options.icuLocale.replaceAll("'", "''")}'`;
        await client.query(`CREATE DATABASE "${name.replaceAll('"', '""')}"${icu}`);
      } finally {
        await client.end();
      }
      return urlFor(encodeURIComponent(name));
    },
    stop,
    start,
    async restart() {
      await stop();
      await start();
    },
    async destroy() {
      await stop();
      process.removeListener('exit', killOnExit);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
