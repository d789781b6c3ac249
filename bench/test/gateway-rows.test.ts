// The gateway phase's rows and targets: `node --import tsx --test bench/test/*.test.ts`.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { gatewayRows } from '../lib/gateway-rows.js';
import type { LoadResult } from '../lib/load.js';
import { formatTable } from '../lib/table.js';
import { GATEWAY_TOOL, upstreamsYaml } from '../phases/gateway.js';
import { loadResult } from './load-result.js';

/** Gateway results: the upstream spends 300 µs of CPU a request. */
const result = (target: string, connections: number, rps: number, p50: number, dirt = 0): LoadResult =>
  loadResult(target, connections, rps, p50, dirt, 300);

/** The same direct and proxy figures at c=1 and c=16, with the broker's p50 at c=1 and throughput at c=16 as given. */
const atOneAndSixteen = (brokerP50AtOne: number, brokerRpsAtSixteen: number) => [
  {
    connections: 1,
    direct: result('direct', 1, 1000, 0.5),
    proxy: result('proxy', 1, 900, 0.75),
    broker: result('broker', 1, 600, brokerP50AtOne),
  },
  {
    connections: 16,
    direct: result('direct', 16, 2000, 5),
    proxy: result('proxy', 16, 1800, 6),
    broker: result('broker', 16, brokerRpsAtSixteen, 9),
  },
];

describe('the gateway rows', () => {
  it('meets the latency target when the broker adds at most 1.5 ms p50 beyond the proxy, and the throughput one at 0.6× direct', () => {
    const rows = gatewayRows(atOneAndSixteen(2.25, 1200));
    assert.deepEqual(
      rows.map((r) => [r.measure, r.met]),
      [
        ['direct to the upstream, c=1', undefined],
        ['added by a bare proxy, c=1', undefined],
        ['added by the broker, c=1', undefined],
        ['broker beyond the proxy, p50, c=1', true],
        ['throughput direct / proxy, c=16', undefined],
        ['throughput through the broker, c=16', true],
      ],
    );
    assert.match(rows[1]!.value, /^p50 \+0\.25 ms/);
    assert.match(rows[3]!.value, /^\+1\.5 ms/);
    assert.match(rows[5]!.value, /^1200 req\/s = 60 % of direct/);
  });

  it('misses the targets just past them, and with errors on either side', () => {
    const missed = gatewayRows(atOneAndSixteen(2.26, 1199));
    assert.deepEqual(
      missed.filter((r) => r.met !== undefined).map((r) => r.met),
      [false, false],
    );
    const dirty = gatewayRows([
      {
        connections: 1,
        direct: result('direct', 1, 1000, 0.5),
        proxy: result('proxy', 1, 900, 0.7, 2),
        broker: result('broker', 1, 900, 0.8),
      },
    ]);
    assert.equal(dirty.find((r) => r.met !== undefined)!.met, false);
    assert.ok(dirty[1]!.value.endsWith('— ERRORS'));
  });

  it('says "gateway not available" with no broker figures, and keeps the table within 120 columns', () => {
    const rows = gatewayRows(
      [
        { connections: 1, direct: result('direct', 1, 1000, 0.5), proxy: result('proxy', 1, 900, 0.7) },
        { connections: 16, direct: result('direct', 16, 2000, 5), proxy: result('proxy', 16, 1800, 6) },
      ],
      `the broker does not list ${GATEWAY_TOOL} (tools/list: github_create_issue, github_whoami, list_connections)`,
    );
    assert.equal(rows.filter((r) => r.met !== undefined).length, 0, 'nothing claimed met or missed');
    assert.match(rows.at(-1)!.value, /^gateway not available: the broker does not list bench_ping/);
    for (const line of formatTable(rows).split('\n')) assert.ok([...line].length <= 120, line);
  });

  it('configures the upstream as the issue documents it', () => {
    assert.deepEqual(parseYaml(upstreamsYaml('http://127.0.0.1:5/mcp')), {
      upstreams: [{ id: 'bench', url: 'http://127.0.0.1:5/mcp', auth: 'none' }],
    });
    assert.equal(GATEWAY_TOOL, 'bench_ping');
  });
});
