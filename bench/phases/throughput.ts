// Throughput and latency: the baselines and the broker's list_connections and github_whoami side
// by side at each concurrency, the broker twice: broker D with every limit at its default (what a
// deployment runs; the 256 users in turn, so none reaches the per-user limit) and broker E, A's
// environment with the limits off, started with D so that the pair differs in the limits alone
// (not in age or in what it served before), in the same interleaved rounds; and the per-request overhead against the baseline at
// c=1. `list_connections` is compared with the bare server's `ping` (no upstream call);
// `github_whoami` with the bare server's own `github_whoami` (the same GET /user at the stand-in,
// one fixed token).
import { freePort } from '../../test/support/idp.js';
import { errorCounts, interleavedRounds, roundLoad, type LoadResult, type LoadTarget } from '../lib/load.js';
import { definePhase } from '../lib/phase.js';
import { CONCURRENCY, DURATION, profiled, say, toolSelected } from '../lib/settings.js';
import { checkTargets, withDefaultLimits } from '../lib/stack.js';
import { mean, ms, round, us } from '../lib/stats.js';
import { baselineTarget, COMPARED, defaultsTarget, limitsOffTarget, throughputRows } from '../lib/throughput-rows.js';

/** MCP_RATE_LIMIT_PER_MINUTE's default (src/config/env.ts), which broker D runs with. */
export const MCP_LIMIT_DEFAULT = 600;

export const throughput = definePhase({
  name: 'throughput',
  sections: ['throughput', 'latency'],
  keys: ['throughput', 'perRequestOverhead'],
  async run({ stack, resources, report }) {
    const { baseline, gh, tokens, users, env } = stack;
    const [brokerD, brokerE] = await Promise.all([
      resources.spawnBroker('broker D', { ...withDefaultLimits(env), PORT: String(await freePort()) }, profiled('broker-defaults')),
      resources.spawnBroker('broker E', { ...env, PORT: String(await freePort()) }, profiled('broker-limits-off')),
    ]);
    await checkTargets(brokerD.url, tokens, users, 'broker D ');
    await checkTargets(brokerE.url, tokens, users, 'broker E ');
    const targets: LoadTarget[] = [
      { name: baselineTarget('ping'), url: baseline.url, tool: 'ping', pid: baseline.pid, upstream: undefined },
      { name: baselineTarget('github_whoami'), url: baseline.url, tool: 'github_whoami', pid: baseline.pid, upstream: gh.pid },
      ...COMPARED.flatMap(({ tool }) => {
        const upstream = tool === 'github_whoami' ? gh.pid : undefined;
        return [
          { name: defaultsTarget(tool), url: brokerD.url, tool, pid: brokerD.pid, upstream },
          { name: limitsOffTarget(tool), url: brokerE.url, tool, pid: brokerE.pid, upstream },
        ];
      }),
    ].filter((t) => toolSelected(t.tool));
    const load1: LoadResult[] = [];
    for (const c of CONCURRENCY) {
      for (const [i, r] of (await interleavedRounds(targets, c, tokens, DURATION)).entries()) {
        const t = targets[i]!;
        load1.push(r);
        say(
          `${t.name.padEnd(36)} c=${String(c).padStart(2)}: ${Math.round(r.rps)} req/s, p50 ${ms(r.p50)}, p99 ${ms(r.p99)}, CPU ${us(r.cpuPerRequestUs)}/req` +
            (t.upstream ? ` (+ GitHub stand-in ${us(r.upstreamCpuPerRequestUs)})` : '') +
            errorCounts(r, ','),
        );
      }
    }
    await Promise.all([brokerD.stop(), brokerE.stop()]);
    report.results.throughput = load1.map(roundLoad);
    for (const row of throughputRows(load1, MCP_LIMIT_DEFAULT)) report.row(row);
    const c1 = (t: string) => load1.find((r) => r.connections === 1 && r.target === t)!;
    if (
      CONCURRENCY.includes(1) &&
      ['baseline ping', 'broker list_connections', 'broker github_whoami'].every((t) => load1.some((r) => r.target === t))
    ) {
      const perRequestOverhead: PerRequestOverhead = {
        note: "broker D (default limits), c=1 closed loop: mean time per request (1000 / req/s) minus the baseline's, in ms; and server CPU per request minus the baseline's, in µs (all concurrencies pooled)",
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
