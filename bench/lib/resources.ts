// What a run holds that must go at its end, also when it fails: the child processes, the identity
// provider, the throwaway PostgreSQL cluster and the temporary directory.
import { rmSync } from 'node:fs';
import type { StartedIdp } from '../../test/support/idp.js';
import type { PgServer } from '../../test/support/postgres.js';
import { spawnNode, type Child, type SpawnOptions } from './proc.js';

export class Resources {
  readonly children: Child[] = [];
  idp: StartedIdp | undefined;
  pgServer: PgServer | undefined;

  constructor(readonly dir: string) {
    // A run that dies before `release` (an unhandled rejection) must not leave brokers running.
    process.once('exit', () => {
      for (const c of this.children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    });
  }

  /** Starts a child server and keeps it in `children`, so that the end of the run stops it. */
  async start(name: string, script: string, env: Record<string, string>, execArgv: string[] = [], options?: SpawnOptions): Promise<Child> {
    const child = await spawnNode(name, script, env, execArgv, options);
    this.children.push(child);
    return child;
  }

  /** A broker process: `node --import tsx src/main.ts`, configured by `env`. */
  spawnBroker(name: string, env: Record<string, string>, execArgv: string[] = [], options?: SpawnOptions): Promise<Child> {
    return this.start(name, 'src/main.ts', env, execArgv, options);
  }

  /** Each child's state and the tail of its output, for the report of a failed run. */
  describeChildren(): string {
    return this.children
      .map((c) => {
        const state =
          c.child.exitCode === null && c.child.signalCode === null ? 'running' : `exited (${c.child.exitCode ?? c.child.signalCode})`;
        return `--- ${c.name}, ${state}, output (tail) ---\n${c.output().slice(-3000)}\n`;
      })
      .join('');
  }

  async release(): Promise<void> {
    await Promise.all(this.children.map((c) => c.stop('SIGKILL').catch(() => undefined)));
    await this.idp?.close().catch(() => undefined);
    await this.pgServer?.destroy().catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
