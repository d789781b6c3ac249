// What metrics and logging cost on the connected path (issue 14): `list_connections` and
// `github_whoami` at c=1 and c=16 against two fresh brokers on broker A's SQLite file, alike but
// for two knobs. Quiet: LOG_LEVEL=warn, no METRICS_TOKEN (/metrics not served). Observed:
// LOG_LEVEL=info, its stdout a FIFO that a `cat` into /dev/null reads (a collector's pipe, not a
// terminal), and METRICS_TOKEN set with /metrics scraped every second while it is loaded (a
// Prometheus at a short interval). The quiet broker's stdout goes to a collector of its own, so the
// two differ only in what they write and serve. Runs alternate Q O, O Q, … in 2 × BENCH_ROUNDS
// pairs of BENCH_DURATION / 2 s each, so that the machine's drift hits both; the figure is the
// median of the pairs' observed ÷ quiet req/s.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, constants, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../test/support/idp.js';
import { combine, errorCounts, load, roundLoad, type Run } from '../lib/load.js';
import { observabilityRows, type ObservedLoad, type ScrapeStats } from '../lib/observability-rows.js';
import { definePhase } from '../lib/phase.js';
import { cpuMs, type Child } from '../lib/proc.js';
import { DURATION, profiled, ROUNDS, say, toolSelected } from '../lib/settings.js';
import { checkTargets } from '../lib/stack.js';
import { mean, median, percentile, round, us } from '../lib/stats.js';

const TOOLS = ['list_connections', 'github_whoami'] as const;
const CONCURRENCIES = [1, 16] as const;
export const PAIRS = 2 * ROUNDS;
export const RUN_SECONDS = DURATION / 2;
const SCRAPE_INTERVAL_MS = 1000;

/** Bytes a process has read (`rchar` in /proc/<pid>/io); NaN when the kernel does not say. */
function bytesRead(pid: number): number {
  try {
    return Number(/^rchar:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

interface Collector {
  /** The FIFO's write end, for the broker's stdout; closed here once the broker holds its own. */
  fd: number;
  child: ChildProcess;
}

/** A FIFO at `path` and a `cat` copying it to /dev/null. */
function startCollector(path: string): Collector {
  execFileSync('mkfifo', [path]);
  // O_RDWR: opening a FIFO so does not wait for a reader (Linux), and nobody gets SIGPIPE before cat opens it.
  const fd = openSync(path, constants.O_RDWR);
  const child = spawn('cat', [path], { stdio: ['ignore', 'ignore', 'ignore'] });
  return { fd, child };
}

/** GET /metrics with the bearer every second while `active`, like a Prometheus scraping one target. */
class Scraper {
  active = false;
  private readonly times: number[] = [];
  private readonly sizes: number[] = [];
  private failed = 0;
  private inFlight: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly url: string,
    private readonly token: string,
  ) {
    this.timer = setInterval(() => {
      if (this.active) this.inFlight = this.scrape();
    }, SCRAPE_INTERVAL_MS);
  }

  private async scrape(): Promise<void> {
    const t0 = performance.now();
    try {
      const res = await fetch(this.url, { headers: { authorization: `Bearer ${this.token}` } });
      const body = await res.text();
      if (res.status !== 200 || !body.includes('broker_http_requests_total')) this.failed++;
      else this.sizes.push(Buffer.byteLength(body));
    } catch {
      this.failed++;
    }
    this.times.push(performance.now() - t0);
  }

  async stop(): Promise<ScrapeStats> {
    clearInterval(this.timer);
    await this.inFlight;
    return { scrapes: this.times.length, failed: this.failed, meanBytes: mean(this.sizes), p50Ms: percentile(this.times, 50) };
  }
}

export const observability = definePhase({
  name: 'observability',
  async run({ stack, resources, report }) {
    const { env, tokens, users } = stack;
    const metricsToken = randomBytes(24).toString('hex');
    const collectors: Collector[] = [];
    const brokers: Child[] = [];
    let scraper: Scraper | undefined;
    try {
      const start = async (name: string, knobs: Record<string, string>) => {
        const port = await freePort();
        const collector = startCollector(join(resources.dir, `${name}.stdout.fifo`));
        collectors.push(collector);
        try {
          const profile = profiled(`observability-${name}`);
          const broker = await resources.spawnBroker(`broker ${name}`, { ...env, ...knobs, PORT: String(port) }, profile, {
            stdout: collector.fd,
            readyUrl: `http://127.0.0.1:${port}/healthz`,
          });
          brokers.push(broker);
          return { broker, collector: collector.child.pid! };
        } finally {
          closeSync(collector.fd);
        }
      };
      const quiet = await start('quiet', { LOG_LEVEL: 'warn', METRICS_TOKEN: '', METRICS_PORT: '' });
      const observed = await start('observed', { LOG_LEVEL: 'info', METRICS_TOKEN: metricsToken, METRICS_PORT: '' });
      await checkTargets(quiet.broker.url, tokens, users, 'quiet broker: ');
      await checkTargets(observed.broker.url, tokens, users, 'observed broker: ');
      const auth = { authorization: `Bearer ${metricsToken}` };
      const served = async (url: string) => (await fetch(`${url}/metrics`, { headers: auth })).status;
      if ((await served(quiet.broker.url)) === 200) throw new Error('the quiet broker serves /metrics');
      if ((await served(observed.broker.url)) !== 200) throw new Error('the observed broker does not serve /metrics');
      say(`observability: quiet ${quiet.broker.url}, observed ${observed.broker.url} (${PAIRS} pairs of ${RUN_SECONDS} s runs)`);

      scraper = new Scraper(`${observed.broker.url}/metrics`, metricsToken);
      const s = scraper;
      const targets = [
        { name: 'quiet', ...quiet },
        { name: 'observed', ...observed },
      ];
      /** One run on one broker; the observed one is scraped meanwhile and its log output counted. */
      const once = async (t: (typeof targets)[number], tool: string, c: number, seconds: number) => {
        const scraped = t.name === 'observed';
        const bytes0 = bytesRead(t.collector);
        s.active = scraped;
        try {
          const run = await load(t.broker.url, tool, tokens, c, seconds, t.broker.pid, undefined, { collector: () => cpuMs(t.collector) });
          return { run, logBytes: bytesRead(t.collector) - bytes0 };
        } finally {
          s.active = false;
        }
      };
      const tools = TOOLS.filter(toolSelected);
      // Fresh processes: warm their JIT on each tool first.
      for (const tool of tools) for (const t of targets) await once(t, tool, 16, 2);
      const loads: ObservedLoad[] = [];
      for (const tool of tools) {
        for (const c of CONCURRENCIES) {
          for (const t of targets) await once(t, tool, c, 1);
          const runs: Record<string, Run[]> = { quiet: [], observed: [] };
          const ratios: number[] = [];
          let logBytes = 0;
          for (let p = 0; p < PAIRS; p++) {
            for (const t of p % 2 === 0 ? targets : [...targets].reverse()) {
              const { run, logBytes: b } = await once(t, tool, c, RUN_SECONDS);
              runs[t.name]!.push(run);
              if (t.name === 'observed') logBytes += b;
            }
            const rps = (r: Run) => r.requests / r.seconds;
            ratios.push(rps(runs.observed![p]!) / rps(runs.quiet![p]!));
          }
          const q = combine('quiet', c, runs.quiet!);
          const o = combine('observed', c, runs.observed!);
          const l: ObservedLoad = {
            tool,
            connections: c,
            quiet: q,
            observed: o,
            ratios,
            logBytesPerRequest: logBytes / o.requests,
            collectorCpuPerRequestUs: o.extraCpuPerRequestUs?.collector ?? NaN,
          };
          loads.push(l);
          say(
            `observability ${tool.padEnd(16)} c=${String(c).padStart(2)}: quiet ${Math.round(q.rps)} req/s, CPU ${us(q.cpuPerRequestUs)}/req${errorCounts(q, ',')}; ` +
              `observed ${Math.round(o.rps)} req/s, CPU ${us(o.cpuPerRequestUs)}/req, ${Math.round(l.logBytesPerRequest)} B log/req${errorCounts(o, ',')}; ` +
              `median ratio ${round(median(ratios), 3)}`,
          );
        }
      }
      const scrapes = await s.stop();
      scraper = undefined;
      report.results.observability = {
        pairs: PAIRS,
        runSeconds: RUN_SECONDS,
        loads: loads.map((l) => ({
          tool: l.tool,
          connections: l.connections,
          quiet: roundLoad(l.quiet),
          observed: roundLoad(l.observed),
          ratios: l.ratios.map((r) => round(r)),
          medianRatio: round(median(l.ratios)),
          logBytesPerRequest: round(l.logBytesPerRequest),
          collectorCpuPerRequestUs: round(l.collectorCpuPerRequestUs),
        })),
        scrapes: { ...scrapes, meanBytes: round(scrapes.meanBytes), p50Ms: round(scrapes.p50Ms) },
      };
      for (const row of observabilityRows(loads, scrapes)) report.row(row);
    } finally {
      await scraper?.stop();
      await Promise.all(brokers.map((b) => b.stop()));
      for (const c of collectors) c.child.kill('SIGKILL');
    }
  },
});
