// The throughput phase's table rows (issue 23's connected-path targets): each broker tool against
// the bare SDK handler's same-call baseline at each concurrency, on a broker with every limit at
// its default (the row with the target) and on one with the limits off (beside it, no target); and
// the p99 at c=16 against the baseline's own p99.
import { dirty, errorsNote, type LoadResult } from './load.js';
import type { Row } from './report.js';
import { ms, us } from './stats.js';

/** Each broker tool and the bare server's tool it is read against (the same call, or `ping` for one without an upstream). */
export const COMPARED = [
  { tool: 'list_connections', baselineTool: 'ping' },
  { tool: 'github_whoami', baselineTool: 'github_whoami' },
] as const;

/** Throughput with the default limits on: at least the bare SDK handler's, at every concurrency. */
export const CONNECTED_RATIO_TARGET = 1.0;
/** p99 at c=16 with the default limits on: at most this much of the bare SDK handler's own p99. */
export const CONNECTED_P99_TARGET = 1.1;

/** The target names of the phase's load results. */
export const baselineTarget = (tool: string) => `baseline ${tool}`;
export const defaultsTarget = (tool: string) => `broker ${tool}`;
export const limitsOffTarget = (tool: string) => `broker ${tool}, limits off`;

const stand = (r: LoadResult) => (r.upstreamCpuPerRequestUs ? ` + ${us(r.upstreamCpuPerRequestUs)} stand-in` : '');
const figures = (r: LoadResult) => `p50 ${ms(r.p50)}, p99 ${ms(r.p99)}; CPU ${us(r.cpuPerRequestUs)}/req${stand(r)}`;

/**
 * The rows from the pooled results of one run (`results`, named as above); `mcpLimitPerMinute` is
 * the per-user limit the defaults broker ran with, which the busiest user's rate is read against.
 */
export function throughputRows(results: readonly LoadResult[], mcpLimitPerMinute: number): Row[] {
  const rows: Row[] = [];
  const find = (target: string, c: number) => results.find((r) => r.connections === c && r.target === target);
  for (const c of [...new Set(results.map((r) => r.connections))]) {
    for (const { tool, baselineTool } of COMPARED) {
      const base = find(baselineTarget(baselineTool), c);
      if (!base) continue;
      rows.push({
        section: 'throughput',
        measure: `baseline ${baselineTool}, c=${c}`,
        value: `${Math.round(base.rps)} req/s, ${figures(base)}${errorsNote(base)}`,
      });
      const share = (r: LoadResult) => `${Math.round(r.rps)} req/s = ${Math.round((r.rps / base.rps) * 100)} % of baseline ${baselineTool}`;
      const on = find(defaultsTarget(tool), c);
      if (on) {
        const clean = dirty(on) + dirty(base) === 0;
        const busiest = Math.round(on.busiestUserPerMinute);
        rows.push({
          section: 'throughput',
          measure: `${tool}, default limits, c=${c}`,
          value:
            `${share(on)}, ${figures(on)}; busiest user ${busiest} calls/min (limit ${mcpLimitPerMinute}` +
            `${busiest >= mcpLimitPerMinute ? ', REACHED' : ''})${errorsNote(on, base)}`,
          target: `≥ ${Math.round(CONNECTED_RATIO_TARGET * 100)} % of baseline`,
          met: clean && on.rps >= CONNECTED_RATIO_TARGET * base.rps,
        });
      }
      const off = find(limitsOffTarget(tool), c);
      if (off)
        rows.push({
          section: 'throughput',
          measure: `${tool}, limits off, c=${c}`,
          value: `${share(off)}, ${figures(off)}${errorsNote(off)}`,
        });
      if (c === 16 && on) {
        const ratio = on.p99 / base.p99;
        rows.push({
          section: 'latency',
          measure: `${tool} p99, default limits, c=16`,
          value: `${ms(on.p99)} = ${ratio.toFixed(2)}× baseline ${baselineTool}'s ${ms(base.p99)}${off ? ` (limits off ${ms(off.p99)})` : ''}`,
          target: `≤ ${CONNECTED_P99_TARGET}× baseline p99`,
          met: dirty(on) + dirty(base) === 0 && ratio <= CONNECTED_P99_TARGET,
        });
      }
    }
  }
  return rows;
}
