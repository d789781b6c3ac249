// Throughput and latency: the baselines, list_connections and github_whoami side by side at each
// concurrency; and the per-request overhead against the baseline at c=1. `list_connections` is
// compared with the bare server's `ping` (no upstream call); `github_whoami` with the bare server's
// own `github_whoami` (the same GET /user at the stand-in, one fixed token).
import { dirty, errorCounts, interleavedRounds, roundLoad, type LoadResult, type LoadTarget } from '../lib/load.js';
import { definePhase } from '../lib/phase.js';
import { CONCURRENCY, DURATION, say, toolSelected } from '../lib/settings.js';
import { mean, ms, round, us } from '../lib/stats.js';

/** Each broker tool, the bare server's tool it is read against, and the share of that baseline's req/s it should reach. */
const COMPARED = [
  { tool: 'list_connections', baselineTool: 'ping', target: 0.7 },
  { tool: 'github_whoami', baselineTool: 'github_whoami', target: 0.85 },
] as const;

export const throughput = definePhase({
  name: 'throughput',
  sections: ['throughput', 'latency'],
  keys: ['throughput', 'perRequestOverhead'],
  async run({ stack, report }) {
    const { baseline, brokerA, gh, tokens } = stack;
    const targets: LoadTarget[] = [
      { name: 'baseline ping', url: baseline.url, tool: 'ping', pid: baseline.pid, upstream: undefined },
      { name: 'baseline github_whoami', url: baseline.url, tool: 'github_whoami', pid: baseline.pid, upstream: gh.pid },
      { name: 'broker list_connections', url: brokerA.url, tool: 'list_connections', pid: brokerA.pid, upstream: undefined },
      { name: 'broker github_whoami', url: brokerA.url, tool: 'github_whoami', pid: brokerA.pid, upstream: gh.pid },
    ].filter((t) => toolSelected(t.tool));
    const load1: LoadResult[] = [];
    for (const c of CONCURRENCY) {
      for (const [i, r] of (await interleavedRounds(targets, c, tokens, DURATION)).entries()) {
        const t = targets[i]!;
        load1.push(r);
        say(
          `${t.name.padEnd(24)} c=${String(c).padStart(2)}: ${Math.round(r.rps)} req/s, p50 ${ms(r.p50)}, p99 ${ms(r.p99)}, CPU ${us(r.cpuPerRequestUs)}/req` +
            (t.upstream ? ` (+ GitHub stand-in ${us(r.upstreamCpuPerRequestUs)})` : '') +
            errorCounts(r, ','),
        );
      }
    }
    report.results.throughput = load1.map(roundLoad);
    for (const c of CONCURRENCY) {
      for (const { tool, baselineTool, target } of COMPARED) {
        const base = load1.find((r) => r.connections === c && r.target === `baseline ${baselineTool}`);
        const r = load1.find((x) => x.connections === c && x.target === `broker ${tool}`);
        if (!base) continue;
        report.row({
          section: 'throughput',
          measure: `baseline ${baselineTool}, c=${c}`,
          value:
            `${Math.round(base.rps)} req/s, p50 ${ms(base.p50)}, p99 ${ms(base.p99)}; CPU ${us(base.cpuPerRequestUs)}/req` +
            (base.upstreamCpuPerRequestUs ? ` + ${us(base.upstreamCpuPerRequestUs)} stand-in` : '') +
            (dirty(base) ? ' — ERRORS' : ''),
        });
        if (!r) continue;
        const ratio = r.rps / base.rps;
        const clean = dirty(r) + dirty(base) === 0;
        report.row({
          section: 'throughput',
          measure: `${tool}, c=${c}`,
          value:
            `${Math.round(r.rps)} req/s = ${Math.round(ratio * 100)} % of baseline ${baselineTool}, p50 ${ms(r.p50)}, p99 ${ms(r.p99)}; CPU ${us(r.cpuPerRequestUs)}/req` +
            (r.upstreamCpuPerRequestUs ? ` + ${us(r.upstreamCpuPerRequestUs)} stand-in` : '') +
            (clean ? '' : ' — ERRORS'),
          target: `≥ ${Math.round(target * 100)} % of baseline`,
          met: clean && ratio >= target,
        });
        if (c === 16)
          report.row({
            section: 'latency',
            measure: `${tool} p99, c=16`,
            value: `${ms(r.p99)} (baseline ${baselineTool} ${ms(base.p99)})`,
            target: '< 20 ms',
            met: clean && r.p99 < 20,
          });
      }
    }
    const c1 = (t: string) => load1.find((r) => r.connections === 1 && r.target === t)!;
    if (
      CONCURRENCY.includes(1) &&
      ['baseline ping', 'broker list_connections', 'broker github_whoami'].every((t) => load1.some((r) => r.target === t))
    ) {
      const perRequestOverhead: PerRequestOverhead = {
        note: "c=1 closed loop: mean time per request (1000 / req/s) minus the baseline's, in ms; and server CPU per request minus the baseline's, in µs (all concurrencies pooled)",
        wallMs: {
          list_connections: round(1000 / c1('broker list_connections').rps - 1000 / c1('baseline ping').rps),
          github_whoami: round(1000 / c1('broker github_whoami').rps - 1000 / c1('baseline ping').rps),
        },
        cpuUs: Object.fromEntries(
          ['list_connections', 'github_whoami'].map((tool) => {
            const cpu = (name: string) => mean(load1.filter((r) => r.target === name).map((r) => r.cpuPerRequestUs));
            return [tool, round(cpu(`broker ${tool}`) - cpu('baseline ping'))];
          }),
        ),
      };
      report.results.perRequestOverhead = perRequestOverhead;
    }
  },
});

/** `results.perRequestOverhead`, which the overhead phase's first row reads. */
export interface PerRequestOverhead {
  note: string;
  wallMs: Record<string, number>;
  cpuUs: Record<string, number>;
}
