// The process collectors of /metrics (event-loop monitor, GC observer) start only when /metrics is
// first served: checked in a fresh process, as the metrics registry is one per process.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runNode } from '../support/node-process.js';

describe('the metrics registry', () => {
  it('runs no process collectors (event-loop monitor, GC observer) until /metrics is served', async () => {
    // A fresh process: the registry is one per process.
    const metricsModule = new URL('../../src/observability/metrics.ts', import.meta.url).href;
    const endpointModule = new URL('../../src/observability/endpoint.ts', import.meta.url).href;
    const code = [
      `const { registry } = await import(${JSON.stringify(metricsModule)});`,
      `const { metricsHandler } = await import(${JSON.stringify(endpointModule)});`,
      `const has = () => registry.getSingleMetric('nodejs_eventloop_lag_seconds') !== undefined;`,
      `const before = has(); metricsHandler('a-metrics-token-for-tests'); console.log(JSON.stringify({ before, after: has() }));`,
    ].join(' ');
    const run = await runNode(['--import', 'tsx', '--input-type=module', '-e', code], { PATH: process.env.PATH ?? '' });
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout.trim()), { before: false, after: true });
  });
});
