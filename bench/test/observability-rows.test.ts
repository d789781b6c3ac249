// The observability phase's rows and target: `node --import tsx --test bench/test/*.test.ts`.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LoadResult } from '../lib/load.js';
import { observabilityRows, type ObservedLoad, type ScrapeStats } from '../lib/observability-rows.js';
import { median } from '../lib/stats.js';
import { formatTable } from '../lib/table.js';

const result = (target: string, connections: number, rps: number, cpu: number, dirt = 0): LoadResult => ({
  target,
  connections,
  seconds: 10,
  requests: rps * 10,
  rps,
  p50: 1,
  p99: 4,
  mean: 1,
  errors: 0,
  non2xx: dirt,
  badBodies: 0,
  busiestUserPerMinute: 0,
  cpuPerRequestUs: cpu,
  upstreamCpuPerRequestUs: 0,
});

const observed = (ratios: number[], more: Partial<ObservedLoad> = {}): ObservedLoad => ({
  tool: 'list_connections',
  connections: 16,
  quiet: result('quiet', 16, 1000, 800),
  observed: result('observed', 16, 960, 840),
  ratios,
  logBytesPerRequest: 225,
  collectorCpuPerRequestUs: 3,
  ...more,
});

const scraped: ScrapeStats = { scrapes: 40, failed: 0, meanBytes: 11_366, p50Ms: 4.2 };

describe('the observability rows', () => {
  it('reads the median of the pairs (the mean of the middle two for an even count) against ≥ 0.95', () => {
    assert.equal(median([1.3, 0.8, 0.96, 0.94]), 0.95);
    assert.equal(median([3, 1, 2]), 2);
    const [met, missed] = observabilityRows([observed([0.8, 0.94, 0.96, 1.3]), observed([0.8, 0.94, 0.958, 1.3])], scraped);
    assert.equal(met!.met, true);
    assert.equal(met!.target, '≥ 0.95');
    assert.match(met!.value, /observed ÷ quiet 0\.95 \(median of 4: 0\.80 0\.94 0\.96 1\.30\)/);
    assert.match(
      met!.value,
      /^quiet 1000 req\/s, CPU 800 µs\/req; observed 960 req\/s, CPU 840 µs\/req \(\+5 %\) \+ 3 µs collector, 225 B of log\/req/,
    );
    assert.equal(missed!.met, false);
  });

  it('claims nothing met when either broker had errors, a scrape failed or none ran, or the observed broker logged nothing', () => {
    const good = [1, 1, 1, 1];
    const quietDirty = observabilityRows([observed(good, { quiet: result('quiet', 16, 1000, 800, 3) })], scraped)[0]!;
    assert.equal(quietDirty.met, false);
    assert.match(quietDirty.value, /CPU 800 µs\/req — ERRORS;/);
    assert.equal(observabilityRows([observed(good, { observed: result('observed', 16, 1000, 800, 1) })], scraped)[0]!.met, false);
    const failedScrape = observabilityRows([observed(good)], { ...scraped, failed: 1 });
    assert.equal(failedScrape[0]!.met, false);
    assert.match(failedScrape[1]!.value, /1 FAILED/);
    const noScrape = observabilityRows([observed(good)], { scrapes: 0, failed: 0, meanBytes: NaN, p50Ms: NaN });
    assert.equal(noScrape[0]!.met, false);
    assert.equal(noScrape[1]!.value, 'NONE during the observed runs');
    const silent = observabilityRows([observed(good, { logBytesPerRequest: 40 })], scraped)[0]!;
    assert.equal(silent.met, false);
    assert.ok(silent.value.endsWith('— NOT LOGGING'));
    assert.equal(observabilityRows([observed(good)], scraped)[0]!.met, true);
  });

  it('has a row per tool and concurrency and one for the scrapes, within 120 columns', () => {
    const loads = ['list_connections', 'github_whoami'].flatMap((tool) =>
      [1, 16].map((c) => observed([0.75, 1.73, 1.09, 0.82], { tool, connections: c, quiet: result('quiet', c, 1342.4, 1649.6) })),
    );
    const rows = observabilityRows(loads, scraped);
    assert.deepEqual(
      rows.map((r) => r.measure),
      ['list_connections, c=1', 'list_connections, c=16', 'github_whoami, c=1', 'github_whoami, c=16', '/metrics scraped every second'],
    );
    assert.equal(rows.at(-1)!.value, '40 scrapes during the observed runs, all 200, 11.1 KB each, p50 4.2 ms');
    assert.equal(rows.at(-1)!.met, undefined);
    const table = formatTable(rows);
    assert.match(table, /^observability +\| result/);
    for (const line of table.split('\n')) assert.ok([...line].length <= 120, line);
  });
});
