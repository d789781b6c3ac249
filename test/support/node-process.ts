import { spawn, type ChildProcess } from 'node:child_process';

export interface ProcessRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node <args>` to its exit with exactly `env` (and `cwd` where given), collecting its output; SIGKILLed after `timeoutMs` where given. */
export function runNode(args: string[], env: NodeJS.ProcessEnv, options: { cwd?: string; timeoutMs?: number } = {}): Promise<ProcessRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      env,
      ...(options.cwd ? { cwd: options.cwd } : {}),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Runs the real `npm run admin` command (src/cli/admin.ts) in its own process with `env` (the broker's environment) and only PATH and HOME beside it. */
export function spawnAdmin(env: Record<string, string>, args: string[]): Promise<ProcessRun> {
  return runNode(
    ['--import', 'tsx', 'src/cli/admin.ts', ...args],
    { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    { timeoutMs: 60_000 },
  );
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal); // its process group: it and whatever it spawned
  } catch {
    // already gone
  }
}

/** Whether `child` has exited, or does within `ms`. */
export async function exited(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** Ends a `detached` child's whole process group: SIGTERM, then SIGKILL after 3 s; resolves once it has exited. */
export async function stopGroup(child: ChildProcess): Promise<void> {
  signalGroup(child, 'SIGTERM');
  if (await exited(child, 3000)) return;
  signalGroup(child, 'SIGKILL');
  await exited(child, 3000);
}

/** SIGKILLs a `detached` child's process group if this process exits first. */
export function killGroupOnExit(child: ChildProcess): void {
  const orphanGuard = () => signalGroup(child, 'SIGKILL');
  process.once('exit', orphanGuard);
  child.once('exit', () => process.off('exit', orphanGuard));
}
