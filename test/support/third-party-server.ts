// A third-party MCP server as a child process for the interop suites (the TypeScript SDK's example
// OAuth server, FastMCP): its own process group, its output kept for failure messages, ready once
// its MCP URL answers HTTP, and gone after close() (SIGTERM, then SIGKILL if it lingers).
import { spawn, spawnSync } from 'node:child_process';
import { killGroupOnExit, stopGroup } from './node-process.js';
import { join } from 'node:path';

const KEEP_CHARS = 16_000;

export interface ThirdPartyServer {
  /** Its MCP endpoint. */
  url: string;
  /** The last of what it wrote (stdout and stderr). */
  output(): string;
  close(): Promise<void>;
}

export interface ThirdPartyOptions {
  /** Named in errors. */
  name: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  url: string;
  startTimeoutMs?: number;
}

export async function startThirdPartyServer(options: ThirdPartyOptions): Promise<ThirdPartyServer> {
  const child = spawn(options.command, options.args, {
    env: { PATH: process.env.PATH ?? '', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  killGroupOnExit(child);
  let text = '';
  const keep = (c: Buffer) => (text = (text + c.toString('utf8')).slice(-KEEP_CHARS));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const close = async () => {
    await stopGroup(child);
  };
  const timeout = options.startTimeoutMs ?? 30_000;
  const deadline = Date.now() + timeout;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${options.name} exited (${child.exitCode ?? child.signalCode}) before answering on ${options.url}:\n${text}`);
    try {
      // Any HTTP answer (its 401, say) means it serves.
      await fetch(options.url, { method: 'POST', signal: AbortSignal.timeout(1000) });
      return { url: options.url, output: () => text, close };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await close();
      throw new Error(`${options.name} did not answer on ${options.url} within ${timeout} ms:\n${text}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * A venv under `dir` with `packages` installed by pip; its python, or why not (the caller skips
 * with it): no venv module, or no package index this machine reaches that has them.
 */
export function pythonWith(dir: string, packages: string[]): { python: string } | { skip: string } {
  const venv = join(dir, 'venv');
  const made = spawnSync('python3', ['-m', 'venv', venv], { timeout: 60_000, encoding: 'utf8' });
  if (made.status !== 0)
    return { skip: `no Python venv on this machine (${(made.stderr || made.error?.message || '').trim().slice(0, 120)})` };
  const pip = spawnSync(
    join(venv, 'bin', 'pip'),
    ['install', '--disable-pip-version-check', '--timeout', '10', '--retries', '0', ...packages],
    { timeout: 180_000, encoding: 'utf8' },
  );
  if (pip.status !== 0) {
    const why = (pip.stderr || pip.error?.message || '').trim().split('\n').at(-1) ?? '';
    return { skip: `pip could not install ${packages.join(' ')} (no package index with them reachable from this machine): ${why}` };
  }
  return { python: join(venv, 'bin', 'python') };
}
