// `npm run bench`: the broker against a bare MCP server, on loopback, in one run.
// Prints a table and records bench/results.json; bench/README.md explains every row.
//
// Processes: this one (orchestration, the load generator, the identity provider, which the brokers
// only contact to discover it and fetch its JWKS once), and children for the baseline server, the
// GitHub stand-in and each broker (`node --import tsx src/main.ts`, exactly as the tests spawn it).
// The `postgres` phase adds a throwaway PostgreSQL cluster (test/support/postgres.ts), brokers on
// it, and the round-robin proxy in a process of its own (bench/lib/proxy-server.ts).
//
// One module per phase in bench/phases/, the shared pieces in bench/lib/. Knobs (environment):
// BENCH_DURATION, BENCH_ROWS, BENCH_PROFILE, BENCH_PHASES, BENCH_CONCURRENCY, BENCH_ROUNDS,
// BENCH_TOOLS (bench/lib/settings.ts, bench/README.md).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Phase, PhaseContext } from './lib/phase.js';
import { cpuProbeMs, loadavgNow, machine, Report } from './lib/report.js';
import { Resources } from './lib/resources.js';
import { recordingFor, recordResults } from './lib/results-file.js';
import {
  BENCH_DIR,
  MEASURING_KNOBS,
  PHASE_NAMES,
  PHASES,
  phaseSelected,
  say,
  settingsRecord,
  started,
  unknownPhases,
} from './lib/settings.js';
import { startStack } from './lib/stack.js';
import { round } from './lib/stats.js';
import { formatTable } from './lib/table.js';
import { completion } from './phases/completion.js';
import { exchange } from './phases/exchange.js';
import { first } from './phases/first.js';
import { gateway } from './phases/gateway.js';
import { held } from './phases/held.js';
import { observability } from './phases/observability.js';
import { overhead } from './phases/overhead.js';
import { policy } from './phases/policy.js';
import { postgres } from './phases/postgres.js';
import { store } from './phases/store.js';
import { throughput } from './phases/throughput.js';

/** Every phase in the order of a run (PHASE_NAMES). */
const ALL: readonly Phase[] = [throughput, overhead, first, completion, exchange, gateway, observability, policy, postgres, held, store];

const unknown = unknownPhases(PHASES);
if (unknown.length)
  say(`BENCH_PHASES: no phase named ${unknown.map((p) => JSON.stringify(p)).join(', ')} (the phases: ${PHASE_NAMES.join(', ')})`);

const report = new Report();
report.results.machine = machine();
report.results.settings = settingsRecord();
const resources = new Resources(mkdtempSync(join(tmpdir(), 'broker-bench-')));

async function main(): Promise<void> {
  const stack = await startStack(resources);
  const ctx: PhaseContext = { stack, resources, report };
  const run = async (phase: Phase) => {
    if (!phaseSelected(phase.name)) return;
    const keys = new Set(Object.keys(report.results));
    const rows = report.rows.length;
    await phase.run(ctx);
    // What a phase declares is what a partial run merges: say so when the two drift apart.
    const undeclared = [
      ...Object.keys(report.results).filter((k) => !keys.has(k) && !phase.keys.includes(k)),
      ...report.rows
        .slice(rows)
        .filter((r) => !phase.sections.includes(r.section))
        .map((r) => `section ${r.section}`),
    ];
    if (undeclared.length) say(`${phase.name} phase: not in its declared keys and sections: ${[...new Set(undeclared)].join(', ')}`);
  };
  // On broker A, the baseline and the GitHub stand-in (exchange on brokers X and Y of its own beside
  // the JWT baseline; gateway on broker G of its own, the baseline as its upstream; observability on a quiet and an observed
  // broker of its own; postgres last: broker A is still up, so its figures are taken in the same rounds as PostgreSQL's).
  // policy: on a broker P of its own beside broker A, in the same rounds.
  for (const phase of [throughput, overhead, first, completion, exchange, gateway, observability, policy, postgres]) await run(phase);
  await stack.brokerA.stop(); // SIGTERM: a graceful exit, which also writes the CPU profile when asked
  await stack.baseline.stop();
  await stack.gh.stop();
  // A fresh broker of its own, still signing in at the IdP.
  await run(held);
  await stack.idp.close();
  resources.idp = undefined;
  // In this process only.
  await run(store);
}

let failed = false;
try {
  await main();
} catch (err) {
  failed = true;
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.stderr.write(resources.describeChildren());
} finally {
  await resources.release();
}
report.results.rows = report.rows;
(report.results.machine as Record<string, unknown>).loadavgAtEnd = loadavgNow();
(report.results.machine as Record<string, unknown>).cpuProbeMsAtEnd = cpuProbeMs();
report.results.totalSeconds = round((Date.now() - started) / 1000, 1);
report.results.finishedAt = new Date().toISOString();
if (failed) process.stderr.write('bench/results.json left as it was (the run failed)\n');
else {
  process.stdout.write(`\n${formatTable(report.rows)}`);
  const ran = ALL.filter((p) => phaseSelected(p.name) && p.keys.some((k) => k in report.results)).map((p) => p.name);
  const recording = recordingFor(process.env, MEASURING_KNOBS, PHASES, ALL);
  say(recordResults(join(BENCH_DIR, 'results.json'), recording, report.results, ALL, ran));
}
process.exit(failed ? 1 : 0);
