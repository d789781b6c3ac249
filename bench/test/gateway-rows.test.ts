// The gateway phase's rows and targets: `node --import tsx --test bench/test/*.test.ts`.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { gatewayRows } from '../lib/gateway-rows.js';
import type { LoadResult } from '../lib/load.js';
import { formatTable } from '../lib/table.js';
import { GATEWAY_TOOL, PROVIDER_TOOL, upstreamsYaml } from '../phases/gateway.js';
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
    limitsOff: result('limits off', 1, 650, brokerP50AtOne - 0.25),
  },
  {
    connections: 16,
    direct: result('direct', 16, 2000, 5),
    proxy: result('proxy', 16, 1800, 6),
    broker: result('broker', 16, brokerRpsAtSixteen, 9),
    limitsOff: result('limits off', 16, 1700, 8),
  },
];

describe('the gateway rows', () => {
  it('meets the latency target when the broker adds at most 1.0 ms p50 beyond the proxy, and the throughput one at 0.8× direct', () => {
    const rows = gatewayRows('provider: github', atOneAndSixteen(1.75, 1600));
    assert.deepEqual(
      rows.map((r) => [r.measure, r.met]),
      [
        ['provider: github: direct, c=1', undefined],
        ['provider: github: added by a bare proxy, c=1', undefined],
        ['provider: github: added by the broker, c=1', undefined],
        ['provider: github: beyond the proxy, p50, c=1', true],
        ['provider: github: direct / proxy, c=16', undefined],
        ['provider: github: through the broker, c=16', true],
      ],
    );
    assert.match(rows[1]!.value, /^p50 \+0\.25 ms/);
    assert.match(rows[3]!.value, /^\+1 ms \(p99 \+4 ms\); limits off \+0\.75 ms$/);
    assert.equal(rows[3]!.target, '≤ 1.0 ms');
    assert.match(rows[5]!.value, /^1600 req\/s = 80 % of direct, .*; limits off 85 %$/);
  });

  it('misses the targets just past them, and with errors on either side', () => {
    const missed = gatewayRows('auth: none', atOneAndSixteen(1.76, 1599));
    assert.deepEqual(
      missed.filter((r) => r.met !== undefined).map((r) => r.met),
      [false, false],
    );
    const dirty = gatewayRows('auth: none', [
      {
        connections: 1,
        direct: result('direct', 1, 1000, 0.5),
        proxy: result('proxy', 1, 900, 0.7, 2),
        broker: result('broker', 1, 900, 0.8),
      },
    ]);
    assert.equal(dirty.find((r) => r.met !== undefined)!.met, false);
    assert.ok(dirty[1]!.value.endsWith('— ERRORS'));
    assert.match(dirty[3]!.value, /limits off not run$/);
  });

  it('says "gateway not available" with no broker figures, and keeps the table within 120 columns', () => {
    const rows = gatewayRows(
      'auth: none',
      [
        { connections: 1, direct: result('direct', 1, 1000, 0.5), proxy: result('proxy', 1, 900, 0.7) },
        { connections: 16, direct: result('direct', 16, 2000, 5), proxy: result('proxy', 16, 1800, 6) },
      ],
      `broker G: the broker does not list ${GATEWAY_TOOL} (tools/list: github_create_issue, github_whoami, list_connections)`,
    );
    assert.equal(rows.filter((r) => r.met !== undefined).length, 0, 'nothing claimed met or missed');
    assert.match(rows.at(-1)!.value, /^gateway not available: broker G: the broker does not list bench_ping/);
    for (const line of formatTable([...rows, ...gatewayRows('provider: github', atOneAndSixteen(3, 900))]).split('\n'))
      assert.ok([...line].length <= 120, line);
  });

  it('configures the upstreams as the issues document them: auth: none, and provider: github with the user token', () => {
    assert.deepEqual(parseYaml(upstreamsYaml('http://127.0.0.1:5/mcp')), {
      upstreams: [{ id: 'bench', url: 'http://127.0.0.1:5/mcp', auth: 'none' }],
    });
    assert.deepEqual(parseYaml(upstreamsYaml('http://127.0.0.1:5/mcp', 'http://127.0.0.1:6/mcp')).upstreams[1], {
      id: 'gh',
      url: 'http://127.0.0.1:6/mcp',
      provider: 'github',
      scopes: ['repo'],
      tools: { include: ['get_me'] },
    });
    assert.equal(GATEWAY_TOOL, 'bench_ping');
    assert.equal(PROVIDER_TOOL, 'gh_get_me');
  });
});
