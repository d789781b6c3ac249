// Child processes for the bench: every server runs in its own Node process (under tsx, like the
// tests' spawnBroker), so the load generator in the parent never shares an event loop with them,
// and their RSS and CPU time can be read from /proc.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

export interface Child {
  name: string;
  pid: number;
  url: string;
  child: ChildProcess;
  output(): string;
  /** Sends `signal` and resolves with the exit code once the process is gone. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const ROOT = new URL('../../', import.meta.url);

/** Where a child's stdout goes instead of the parent, and how its readiness shows without its log line. */
export interface SpawnOptions {
  /** A file descriptor for stdout: the write end of a pipe another process reads (the observability phase's log collector). */
  stdout: number;
  /** Polled (GET, every 100 ms) until it answers 200; its origin is the child's url. */
  readyUrl: string;
}

/**
 * Runs `node [execArgv] --import tsx <script>` from the repository root and waits for its
 * `{"event":"listening","url":...}` log line (the broker's own, which the bench servers copy), or,
 * with `options`, with stdout on `options.stdout`, for `options.readyUrl` to answer.
 */
export async function spawnNode(
  name: string,
  script: string,
  env: Record<string, string>,
  execArgv: string[] = [],
  options?: SpawnOptions,
): Promise<Child> {
  const child = spawn(process.execPath, [...execArgv, '--import', 'tsx', script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', options ? options.stdout : 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (d: Buffer) => {
    output += d;
    // Keep the tail only: a long run must not grow the parent's memory.
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  child.stdout?.on('data', keep);
  child.stderr!.on('data', keep);
  const url = await new Promise<string>((resolve, reject) => {
    let done = false;
    const finish = (err: Error | undefined, url?: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolve(url!);
    };
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      finish(new Error(`${name} did not start in 30 s:\n${output}`));
    }, 30_000);
    const check = () => {
      const m = /"event":"listening","url":"([^"]+)"/.exec(output);
      if (m) finish(undefined, m[1]!);
    };
    const onExit = (code: number | null) => finish(new Error(`${name} exited with ${code}:\n${output}`));
    child.once('exit', onExit);
    if (!options) {
      child.stdout!.on('data', check);
      child.stderr!.on('data', check);
      return;
    }
    const poll = () => {
      if (done) return;
      fetch(options.readyUrl).then(
        async (res) => {
          await res.arrayBuffer();
          if (res.ok) finish(undefined, new URL(options.readyUrl).origin);
          else setTimeout(poll, 100);
        },
        () => setTimeout(poll, 100),
      );
    };
    poll();
  });
  return {
    name,
    pid: child.pid!,
    url,
    child,
    output: () => output,
    stop: (signal = 'SIGTERM') =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
        const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', (code) => {
          clearTimeout(force);
          resolve(code);
        });
        child.kill(signal);
      }),
  };
}

/** Resident set size of a process in bytes (`VmRSS` in /proc/<pid>/status). */
export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

let ticks: number | undefined;

/** The kernel's clock ticks per second (`getconf CLK_TCK`, 100 when it cannot say), the unit of /proc CPU times. */
export function ticksPerSecond(): number {
  ticks ??= (() => {
    try {
      return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      return 100;
    }
  })();
  return ticks;
}

/** User + system CPU time of a process in milliseconds (`utime`, `stime` in /proc/<pid>/stat). */
export function cpuMs(pid: number): number {
  return statCpuMs(`/proc/${pid}/stat`);
}

/**
 * CPU time of the process's main thread (its JavaScript) alone, in ms, to the nanosecond
 * (`schedstat`; `stat` counts in 10 ms ticks, too coarse for a quiet process): not V8's GC and
 * compiler threads, nor libuv's pool.
 */
export function mainThreadCpuMs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
}

/** CPU time of every thread of the process, in ms, to the nanosecond (see {@link mainThreadCpuMs}). */
export function preciseCpuMs(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // A thread that ended meanwhile.
    }
  }
  return ns / 1e6;
}

function statCpuMs(path: string): number {
  const stat = readFileSync(path, 'utf8');
  // The command name (field 2) may contain spaces: count fields from after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * 1000) / ticksPerSecond();
}
