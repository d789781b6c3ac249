import { spawn } from 'node:child_process';

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
