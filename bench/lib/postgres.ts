// PostgreSQL helpers for the bench's `postgres` phase: whether a throwaway cluster can be started
// here at all (test/support/postgres.ts needs the server binaries, and as root a `postgres` user),
// and the CPU time of that cluster (the postmaster and every backend it forked).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ticksPerSecond } from './proc.js';

/** Why no throwaway cluster can be started here, or undefined when one can. */
export function postgresUnavailable(): string | undefined {
  const root = '/usr/lib/postgresql';
  const found =
    existsSync(root) &&
    readdirSync(root).some(
      (v) => /^\d+(\.\d+)?$/.test(v) && existsSync(join(root, v, 'bin', 'postgres')) && existsSync(join(root, v, 'bin', 'initdb')),
    );
  if (!found) return `no PostgreSQL server binaries under ${root}/*/bin (apt-get install postgresql)`;
  if (process.getuid?.() === 0) {
    try {
      execFileSync('id', ['-u', 'postgres'], { stdio: 'ignore' });
    } catch {
      return 'running as root needs a `postgres` OS user to run the cluster (apt-get install postgresql creates it)';
    }
  }
  return undefined;
}

interface Stat {
  pid: number;
  ppid: number;
  /** utime + stime, clock ticks. */
  own: number;
  /** cutime + cstime: children already exited and reaped, clock ticks. */
  reaped: number;
}

function readStat(pid: number): Stat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined; // gone meanwhile
  }
  // Fields after the command name's closing parenthesis: state is [0], ppid [1], utime [11], stime [12], cutime [13], cstime [14].
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { pid, ppid: Number(f[1]), own: Number(f[11]) + Number(f[12]), reaped: Number(f[13]) + Number(f[14]) };
}

const pids = () =>
  readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number);

/** The pid of the postmaster listening on `port` (its command line has `-p <port>`). */
export function postmasterPid(port: number): number {
  for (const pid of pids()) {
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (!/(^|\/)postgres$/.test(argv[0] ?? '')) continue;
    const p = argv.indexOf('-p');
    if (p >= 0 && argv[p + 1] === String(port)) return pid;
  }
  throw new Error(`no postmaster with -p ${port} in /proc`);
}

/**
 * CPU time (user + system, ms) of the cluster: the postmaster, its live children (the backends
 * serving the brokers' pools, the checkpointer, the WAL writer…) and the children it has reaped.
 * A backend that exits between two readings loses at most its last tick, and the pools keep theirs
 * open for 30 s idle, so the difference over a load run is the cluster's work for that run.
 */
export function clusterCpuMs(postmaster: number): number {
  const root = readStat(postmaster);
  if (!root) throw new Error(`postmaster ${postmaster} is gone`);
  let ticks = root.own + root.reaped;
  for (const pid of pids()) {
    if (pid === postmaster) continue;
    const s = readStat(pid);
    if (s?.ppid === postmaster) ticks += s.own;
  }
  return (ticks * 1000) / ticksPerSecond();
}
