// The throughput phase's rows and issue 23's connected-path targets: `node --import tsx --test bench/test/*.test.ts`.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LoadResult } from '../lib/load.js';
import { formatTable } from '../lib/table.js';
import { baselineTarget, defaultsTarget, limitsOffTarget, throughputRows } from '../lib/throughput-rows.js';
import { loadResult } from './load-result.js';

/** One concurrency's results: the baselines at 1000 req/s (p50 1 ms, p99 4 ms), the brokers as given. */
function at(c: number, brokerRps: number, brokerP50 = 1, dirt = 0): LoadResult[] {
  return [
    loadResult(baselineTarget('ping'), c, 1000, 1),
    loadResult(baselineTarget('github_whoami'), c, 1000, 1, 0, 200),
    loadResult(defaultsTarget('list_connections'), c, brokerRps, brokerP50, dirt),
    loadResult(limitsOffTarget('list_connections'), c, brokerRps + 100, brokerP50),
    loadResult(defaultsTarget('github_whoami'), c, brokerRps, brokerP50, 0, 200),
    loadResult(limitsOffTarget('github_whoami'), c, brokerRps + 100, brokerP50, 0, 200),
  ];
}

describe('the throughput rows', () => {
  it('puts the default-limits row against ≥ 1.0× the baseline, the limits-off row beside it, and the p99 at c=16 against 1.1×', () => {
    const rows = throughputRows([...at(1, 1000), ...at(16, 1000, 1.1)], 600);
    assert.deepEqual(
      rows.map((r) => [r.section, r.measure, r.met]),
      [
        ['throughput', 'baseline ping, c=1', undefined],
        ['throughput', 'list_connections, default limits, c=1', true],
        ['throughput', 'list_connections, limits off, c=1', undefined],
        ['throughput', 'baseline github_whoami, c=1', undefined],
        ['throughput', 'github_whoami, default limits, c=1', true],
        ['throughput', 'github_whoami, limits off, c=1', undefined],
        ['throughput', 'baseline ping, c=16', undefined],
        ['throughput', 'list_connections, default limits, c=16', true],
        ['throughput', 'list_connections, limits off, c=16', undefined],
        ['latency', 'list_connections p99, default limits, c=16', true],
        ['throughput', 'baseline github_whoami, c=16', undefined],
        ['throughput', 'github_whoami, default limits, c=16', true],
        ['throughput', 'github_whoami, limits off, c=16', undefined],
        ['latency', 'github_whoami p99, default limits, c=16', true],
      ],
    );
    assert.match(rows[1]!.value, /^1000 req\/s = 100 % of baseline ping, .*busiest user 240 calls\/min \(limit 600\)$/);
    assert.match(rows[4]!.value, / \+ 200 µs stand-in/);
    assert.match(rows[9]!.value, /^4\.4 ms = 1\.10× baseline ping's 4 ms \(limits off 4\.4 ms\)$/);
    for (const line of formatTable(rows).split('\n')) assert.ok([...line].length <= 120, line);
  });

  it('misses just below 1.0×, just above 1.1× p99, and with errors', () => {
    const below = throughputRows(at(16, 999, 1.11), 600).filter((r) => r.met !== undefined);
    assert.deepEqual(
      below.map((r) => r.met),
      [false, false, false, false],
    );
    const errors = throughputRows(at(1, 2000, 1, 5), 600);
    assert.equal(errors[1]!.met, false);
    assert.match(errors[1]!.value, /— ERRORS$/);
  });

  it('says when the busiest user reached the per-user limit', () => {
    const rows = throughputRows(at(1, 3000), 600);
    assert.match(rows[1]!.value, /busiest user 720 calls\/min \(limit 600, REACHED\)/);
  });
});
