// PostgreSQL beside SQLite, while broker A (SQLite) is still up: a throwaway cluster holding the
// same connections as broker A's file; broker P1 on it loaded in the same interleaved rounds as
// broker A and the baseline; then 1, 2 and 3 instances behind a round-robin proxy; then completion
// detection across two instances.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { startPostgres } from '../../test/support/postgres.js';
import { completionFigures, completionSamples } from '../lib/browser.js';
import {
  combine,
  dirty,
  errorCounts,
  interleavedRounds,
  load,
  roundLoad,
  type LoadResult,
  type LoadTarget,
  type Run,
} from '../lib/load.js';
import { definePhase } from '../lib/phase.js';
import { clusterCpuMs, postgresUnavailable, postmasterPid } from '../lib/postgres.js';
import { cpuMs, type Child } from '../lib/proc.js';
import { CONCURRENCY, DURATION, profiled, ROUNDS, say, toolSelected } from '../lib/settings.js';
import { checkTargets, seedConnections } from '../lib/stack.js';
import { ms, round, us } from '../lib/stats.js';
import { expectComplete, firstCall } from '../lib/wire.js';

const proxySeq = new Map<Child, number>();

/** Requests each backend of a bench/lib/proxy-server.ts child answered since the last call. */
async function proxyHits(proxy: Child): Promise<number[]> {
  const seq = (proxySeq.get(proxy) ?? 0) + 1;
  proxySeq.set(proxy, seq);
  const line = new RegExp(`\\{"event":"hits","seq":${seq},"counts":(\\[[0-9,]*\\])\\}`);
  process.kill(proxy.pid, 'SIGUSR2');
  for (const deadline = Date.now() + 5_000; Date.now() < deadline; await sleep(20)) {
    const m = line.exec(proxy.output());
    if (m) return JSON.parse(m[1]!) as number[];
  }
  throw new Error(`${proxy.name} did not report its hits`);
}

/** Issue 23: on PostgreSQL, the same rows within 10 % of SQLite's (same run, same rounds). */
const PG_RATIO_TARGET = 0.9;

export const postgres = definePhase({
  name: 'postgres',
  async run({ stack, resources, report }) {
    const unavailable = postgresUnavailable();
    if (unavailable) {
      say(`postgres phase skipped: ${unavailable}`);
      return;
    }
    const { idp, publicUrl, env, users, tokens, encryptionKey, baseline, brokerA, gh } = stack;
    const out: Record<string, unknown> = {};
    report.results.postgres = out;

    const t0 = performance.now();
    const pgServer = await startPostgres();
    resources.pgServer = pgServer;
    const databaseUrl = await pgServer.createDatabase('bench');
    const postmaster = postmasterPid(pgServer.port);
    const pgCpu = () => clusterCpuMs(postmaster);
    const clusterMs = performance.now() - t0;
    const s0 = performance.now();
    // As for SQLite: through the real ConnectionService, sealed with the broker's key.
    await seedConnections(await openPostgresStore(databaseUrl), idp.issuer, users, encryptionKey);
    const seedMs = performance.now() - s0;
    // DATABASE_URL wins; DATABASE_PATH names a file that must never appear.
    const unusedPath = join(resources.dir, 'unused-with-postgres.db');
    const pgEnv = { ...env, DATABASE_URL: databaseUrl, DATABASE_PATH: unusedPath };
    const p1 = await resources.spawnBroker('broker P1', { ...pgEnv, PORT: '0' }, profiled('postgres'));
    say(
      `postgres: cluster on port ${pgServer.port} in ${round(clusterMs / 1000, 1)} s, ${users.length} connections seeded in ${round(seedMs / 1000, 2)} s, broker P1 ${p1.url}`,
    );
    out.clusterStartSeconds = round(clusterMs / 1000, 2);
    out.seedSeconds = round(seedMs / 1000, 2);
    await checkTargets(p1.url, tokens, users, 'PostgreSQL ');

    // -- the column: baseline, SQLite (broker A) and PostgreSQL (P1), interleaved as in the throughput phase
    const tools = ['list_connections', 'github_whoami'].filter(toolSelected);
    const targets: LoadTarget[] = [
      ...(toolSelected('ping')
        ? [{ name: 'baseline ping', url: baseline.url, tool: 'ping', pid: baseline.pid, upstream: undefined, extra: {} }]
        : []),
      ...tools.flatMap((tool): LoadTarget[] => {
        const upstream = tool === 'github_whoami' ? gh.pid : undefined;
        return [
          { name: `SQLite ${tool}`, url: brokerA.url, tool, pid: brokerA.pid, upstream, extra: {} },
          { name: `PostgreSQL ${tool}`, url: p1.url, tool, pid: p1.pid, upstream, extra: { postgres: pgCpu } },
        ];
      }),
    ];
    // P1 is a fresh process while broker A has run every earlier phase: let its JIT catch up first.
    for (const tool of tools) await load(p1.url, tool, tokens, 16, 3, p1.pid);
    const column: LoadResult[] = [];
    for (const c of CONCURRENCY) {
      for (const [i, res] of (await interleavedRounds(targets, c, tokens, DURATION)).entries()) {
        const t = targets[i]!;
        column.push(res);
        const pgPart = res.extraCpuPerRequestUs?.postgres;
        say(
          `${t.name.padEnd(27)} c=${String(c).padStart(2)}: ${Math.round(res.rps)} req/s, p50 ${ms(res.p50)}, p99 ${ms(res.p99)}, CPU ${us(res.cpuPerRequestUs)}/req` +
            (pgPart !== undefined ? ` + PostgreSQL ${us(pgPart)}` : '') +
            (t.upstream ? ` (+ GitHub stand-in ${us(res.upstreamCpuPerRequestUs)})` : '') +
            errorCounts(res, ','),
        );
      }
    }
    out.column = column.map(roundLoad);
    for (const c of CONCURRENCY) {
      const base = column.find((r) => r.connections === c && r.target === 'baseline ping');
      for (const tool of tools) {
        const sq = column.find((r) => r.connections === c && r.target === `SQLite ${tool}`)!;
        const pg = column.find((r) => r.connections === c && r.target === `PostgreSQL ${tool}`)!;
        const clean = dirty(sq) + dirty(pg) === 0;
        const stand = (r: LoadResult) => (r.upstreamCpuPerRequestUs ? ` + ${us(r.upstreamCpuPerRequestUs)} stand-in` : '');
        report.row({
          section: 'postgres',
          measure: `${tool}, c=${c}`,
          value:
            `SQLite ${Math.round(sq.rps)} req/s, p99 ${ms(sq.p99)}, CPU ${us(sq.cpuPerRequestUs)}/req${stand(sq)} | ` +
            `PostgreSQL ${Math.round(pg.rps)} req/s, p99 ${ms(pg.p99)}, CPU ${us(pg.cpuPerRequestUs)}/req + ${us(pg.extraCpuPerRequestUs?.postgres ?? NaN)} PostgreSQL${stand(pg)} ` +
            `(${Math.round((pg.rps / sq.rps) * 100)} % of SQLite${base ? `, ${Math.round((pg.rps / base.rps) * 100)} % of baseline` : ''})` +
            (clean ? '' : ' — ERRORS'),
          target: `≥ ${PG_RATIO_TARGET * 100} % of SQLite`,
          met: clean && pg.rps >= PG_RATIO_TARGET * sq.rps,
        });
      }
    }

    // -- 1, 2 and 3 instances behind the round-robin proxy (in its own process), list_connections
    const cInst = CONCURRENCY.includes(16) ? 16 : Math.max(...CONCURRENCY.filter((c) => c <= 64), 1);
    // allSettled: a failed start must not leave the other one outside `children`.
    const more = await Promise.allSettled([
      resources.spawnBroker('broker P2', { ...pgEnv, PORT: '0' }),
      resources.spawnBroker('broker P3', { ...pgEnv, PORT: '0' }),
    ]);
    for (const m of more) if (m.status === 'rejected') throw m.reason;
    const instances = [p1, ...more.map((m) => (m as PromiseFulfilledResult<Child>).value)];
    // P2 and P3 are fresh processes; P1 has just run the column.
    for (const b of instances.slice(1)) await load(b.url, 'list_connections', tokens, cInst, 3, b.pid);
    const proxies: Child[] = [];
    for (const n of [1, 2, 3])
      proxies.push(
        await resources.start(`proxy ×${n}`, 'bench/lib/proxy-server.ts', {
          PORT: '0',
          PROXY_BACKENDS: instances
            .slice(0, n)
            .map((b) => b.url)
            .join(','),
        }),
      );
    for (const proxy of proxies)
      expectComplete(await firstCall(proxy.url, tokens[2]!, 'list_connections'), `list_connections through ${proxy.name}`);
    const setups = [1, 2, 3].map((n) => ({
      n,
      proxy: proxies[n - 1]!,
      pids: instances.slice(0, n).map((b) => b.pid),
      runs: [] as Run[],
      hits: new Array<number>(n).fill(0),
    }));
    const extraFor = (proxy: Child) => ({ proxy: () => cpuMs(proxy.pid), postgres: pgCpu });
    for (const s of setups) {
      await load(s.proxy.url, 'list_connections', tokens, cInst, 2, s.pids); // warm-up (the proxy's too), not recorded
      await proxyHits(s.proxy); // and its hits do not count
    }
    for (let r = 0; r < ROUNDS; r++) {
      for (const s of r % 2 === 0 ? setups : [...setups].reverse()) {
        s.runs.push(await load(s.proxy.url, 'list_connections', tokens, cInst, DURATION, s.pids, undefined, extraFor(s.proxy)));
        (await proxyHits(s.proxy)).forEach((h, i) => (s.hits[i]! += h));
      }
    }
    const spread = setups.map((s) => ({
      n: s.n,
      hits: s.hits,
      result: combine(`${s.n} PostgreSQL instance(s) behind the proxy`, cInst, s.runs),
    }));
    for (const { n, hits, result } of spread) {
      const x = result.extraCpuPerRequestUs ?? {};
      say(
        `${n} instance(s) behind the proxy, list_connections c=${cInst}: ${Math.round(result.rps)} req/s, p50 ${ms(result.p50)}, p99 ${ms(result.p99)}; ` +
          `CPU/req brokers ${us(result.cpuPerRequestUs)}, proxy ${us(x.proxy ?? NaN)}, PostgreSQL ${us(x.postgres ?? NaN)}; hits ${hits.join('/')}` +
          errorCounts(result, ';'),
      );
    }
    out.instances = spread.map(({ n, hits, result }) => ({ instances: n, hitsPerInstance: hits, ...roundLoad(result) }));
    const one = spread[0]!.result.rps;
    const everyInstanceServed = spread.every((s) => s.hits.length === s.n && s.hits.every((h) => h > 0));
    const clean = spread.every((s) => dirty(s.result) === 0);
    report.row({
      section: 'postgres',
      measure: `list_connections via proxy, c=${cInst}: 1 / 2 / 3 instances`,
      value:
        `${spread.map((s) => Math.round(s.result.rps)).join(' / ')} req/s (${spread
          .slice(1)
          .map((s) => `${s.n}: ${Math.round((s.result.rps / one) * 100)} %`)
          .join(', ')} of 1); p99 ${spread.map((s) => ms(s.result.p99)).join(' / ')}; ` +
        `requests per instance ${spread.map((s) => s.hits.join('+')).join(' | ')}` +
        (clean ? '' : ' — ERRORS'),
      target: 'no errors, every instance served',
      met: clean && everyInstanceServed,
    });
    report.row({
      section: 'postgres',
      measure: `CPU per request, 1 / 2 / 3 instances`,
      value: (['brokers', 'proxy', 'postgres'] as const)
        .map(
          (k) =>
            `${k === 'postgres' ? 'PostgreSQL' : k} ${spread.map((s) => us(k === 'brokers' ? s.result.cpuPerRequestUs : (s.result.extraCpuPerRequestUs?.[k] ?? NaN))).join(' / ')}`,
        )
        .join('; '),
    });

    // -- completion detection across instances: held on P1, the provider callback on P2 (LISTEN/NOTIFY)
    {
      const { s, record, value } = completionFigures(await completionSamples(idp, publicUrl, p1.url, instances[1]!.url, 'bench-cd-pg'));
      out.completionAcrossInstances = record;
      report.row({
        section: 'postgres',
        measure: `completion across instances (n=${s.n})`,
        value,
        target: 'p50 < 250 ms',
        met: s.p50 < 250,
      });
      say(`completion detection across PostgreSQL instances: p50 ${ms(s.p50)}, p99 ${ms(s.p99)}`);
    }

    for (const proxy of proxies) await proxy.stop();
    await Promise.all(instances.map((b) => b.stop()));
    out.databasePathCreated = existsSync(unusedPath);
    if (out.databasePathCreated) say(`postgres: a broker created the unused DATABASE_PATH ${unusedPath}`);
    await pgServer.destroy();
    resources.pgServer = undefined;
  },
});
