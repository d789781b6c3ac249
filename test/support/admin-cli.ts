import { spawn } from 'node:child_process';

export interface AdminRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real `npm run admin` command (src/cli/admin.ts) in its own process with `env` (the broker's environment) and only PATH and HOME beside it. */
export function spawnAdmin(env: Record<string, string>, args: string[]): Promise<AdminRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/admin.ts', ...args], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
