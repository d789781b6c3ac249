// What a run produces: the rows of the printed table and the figures of bench/results.json, which
// every phase adds to, and the description of the machine they were taken on.
import { execFileSync } from 'node:child_process';
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
  return { nproc: availableParallelism(), cpu, free, node: process.version, kernel: release(), loadavgAtStart: loadavgNow() };
}

export const loadavgNow = () => loadavg().map((n) => round(n, 2));
