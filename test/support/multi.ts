// Support for tests that run the broker as several child processes on one SQLite file: the IdP and
// the GitHub stand-in in this process, brokers spawned with `spawnBroker`, and a browser that is
// "pinned" to one process the way a load balancer in front of PUBLIC_URL would route it.
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { freePort } from '../../src/dev/free-port.js';
import { Browser } from './browser.js';
import type { GitHubStandIn, StandInOptions } from './github-standin.js';
import type { StartedIdp } from './idp.js';
import { brokerIdpClient, startBrokerSurroundings, testBrokerEnv } from './stack.js';
import { resolveDeferred, useSuite, type Deferred } from './suite.js';

/** A broker in its own process (same code, `node --import tsx src/main.ts`), for multi-process tests. */
export async function spawnBroker(
  env: Record<string, string>,
): Promise<{ url: string; child: ChildProcess; output: () => string; stop(signal?: NodeJS.Signals): Promise<number | null> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`broker did not start:\n${output}`)), 20_000);
    const check = () => {
      const m = /"event":"listening","url":"([^"]+)"/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    // The broker logs on stdout; start-up failures go to stderr.
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`broker exited with ${code}:\n${output}`));
    });
  });
  return {
    url,
    child,
    output: () => output,
    stop: (signal = 'SIGTERM') =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve(child.exitCode);
        child.once('exit', (code) => resolve(code));
        child.kill(signal);
      }),
  };
}

export type SpawnedBroker = Awaited<ReturnType<typeof spawnBroker>>;

export interface MultiStack {
  /** PUBLIC_URL shared by every process: the listen URL of the first one (`portA`). */
  publicUrl: string;
  portA: number;
  dir: string;
  idp: StartedIdp;
  github: GitHubStandIn;
  /** The environment of a broker listening on `port` (default `portA`); every process shares the rest. */
  envFor(port?: number): Record<string, string>;
  token(sub: string): Promise<string>;
  /** Spawns a broker on `port` and remembers it so that `close` stops it. */
  spawn(port?: number, extraEnv?: Record<string, string>): Promise<SpawnedBroker>;
  close(): Promise<void>;
}

export interface MultiStackOptions {
  holdSeconds?: number;
  standIn?: StandInOptions;
  env?: Record<string, string>;
  /** Claims the IdP gives an account beside the defaults (e.g. `groups`). */
  idpAccountClaims?: (accountId: string) => Record<string, unknown>;
  /** Claims the IdP's `profile` scope releases into ID tokens beside name and preferred_username. */
  idpProfileClaims?: string[];
}

/** IdP + GitHub stand-in + a shared environment; brokers are started with `spawn`. */
export async function startMultiStack(options: MultiStackOptions = {}): Promise<MultiStack> {
  const {
    dir,
    port: portA,
    publicUrl,
    github,
    idp,
  } = await startBrokerSurroundings('broker-multi-', await freePort(), options.standIn, (url) => ({
    clients: [brokerIdpClient(url)],
    ...(options.idpAccountClaims ? { accountClaims: options.idpAccountClaims } : {}),
    ...(options.idpProfileClaims ? { profileClaims: options.idpProfileClaims } : {}),
  }));
  const base: Record<string, string> = {
    ...testBrokerEnv({ publicUrl, dir, idp, github, holdSeconds: options.holdSeconds }),
    ...options.env,
  };
  const children: SpawnedBroker[] = [];
  const envFor = (port = portA) => ({ ...base, PORT: String(port) });
  return {
    publicUrl,
    portA,
    dir,
    idp,
    github,
    envFor,
    token: (sub) => idp.mintAccessToken({ sub }),
    async spawn(port = portA, extraEnv = {}) {
      const child = await spawnBroker({ ...envFor(port), ...extraEnv });
      children.push(child);
      return child;
    },
    async close() {
      await Promise.all(children.filter((c) => c.child.exitCode === null && c.child.signalCode === null).map((c) => c.stop('SIGKILL')));
      await idp.close();
      await github.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `startMultiStack` for the enclosing `describe`, started before its first test and closed after its last (`useSuite`). */
export function useMultiStack(options: Deferred<MultiStackOptions> = {}, hook: { timeout?: number } = {}): MultiStack {
  return useSuite('the multi-process stack', async () => startMultiStack(await resolveDeferred(options)), hook);
}

/**
 * A browser whose requests for `publicOrigin` all go to `backendOrigin` instead, like a load
 * balancer that routes this user to one process. `requests` records the backend actually hit.
 */
export class PinnedBrowser extends Browser {
  constructor(
    private readonly publicOrigin: string,
    private readonly backendOrigin: string,
  ) {
    super();
  }

  override request(
    url: string,
    init: { method?: string; body?: URLSearchParams; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    const u = new URL(url);
    const target = u.origin === this.publicOrigin ? new URL(u.pathname + u.search + u.hash, this.backendOrigin).href : url;
    return super.request(target, init);
  }
}
