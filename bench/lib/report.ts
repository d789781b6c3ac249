// What a run produces: the rows of the printed table and the figures of bench/results.json, which
// every phase adds to, and the description of the machine they were taken on.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg, release } from 'node:os';
import { round } from './stats.js';

export interface Row {
  section: string;
  measure: string;
  value: string;
  target?: string;
  met?: boolean;
}

export class Report {
  readonly rows: Row[] = [];
  readonly results: Record<string, unknown> = {};

  row(row: Row): void {
    this.rows.push(row);
  }
}

export function machine(): Record<string, unknown> {
  const cpu = /^model name\s*:\s*(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown';
  let free = '';
  try {
    free = execFileSync('free', ['-h'], { encoding: 'utf8' }).trim();
  } catch {
    free = 'free(1) not available';
  }
  return {
    nproc: availableParallelism(),
    cpu,
    free,
    node: process.version,
    kernel: release(),
    loadavgAtStart: loadavgNow(),
    cpuProbeMsAtStart: cpuProbeMs(),
  };
}

export const loadavgNow = () => loadavg().map((n) => round(n, 2));

/**
 * A fixed single-threaded workload (hashing, JSON, a loop), in ms, best of three: the same machine
 * kind varies by 3× from day to day here, so runs' absolute figures are compared through it.
 */
export function cpuProbeMs(): number {
  const block = Buffer.alloc(1 << 20, 7);
  const doc = { items: Array.from({ length: 200 }, (_, i) => ({ id: i, name: `item ${i}`, tags: ['a', 'b'] })) };
  const once = () => {
    const started = performance.now();
    const hash = createHash('sha256');
    for (let i = 0; i < 64; i++) hash.update(block);
    hash.digest();
    for (let i = 0; i < 300; i++) JSON.parse(JSON.stringify(doc));
    let x = 0;
    for (let i = 0; i < 20_000_000; i++) x += i % 7;
    if (x < 0) throw new Error('unreachable');
    return performance.now() - started;
  };
  return round(Math.min(once(), once(), once()), 1);
}
