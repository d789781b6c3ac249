// The process's last line of defence (src/observability/process-guards.ts): a rejection nobody
// handled is logged and counted and the process keeps serving; an uncaught exception is logged and
// counted and the process exits 1; a background task's failure is logged with its name.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runNode } from '../support/node-process.js';

const LOG = new URL('../../src/log.ts', import.meta.url).href;
const GUARDS = new URL('../../src/observability/process-guards.ts', import.meta.url).href;
const METRICS = new URL('../../src/observability/metrics.ts', import.meta.url).href;
const env = { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info' };

/** `node -e <code>` with the logger as `log`, the guards installed, and the metrics registry as `registry`. */
const script = (body: string) => [
  '--import',
  'tsx',
  '--input-type=module',
  '-e',
  `const { createLogger } = await import(${JSON.stringify(LOG)});
   const { installProcessGuards, backgroundFailure } = await import(${JSON.stringify(GUARDS)});
   const { registry } = await import(${JSON.stringify(METRICS)});
   const log = createLogger();
   installProcessGuards(log);
   const count = async (kind) => (await registry.getSingleMetric('broker_unhandled_errors_total').get()).values.find((v) => v.labels.kind === kind)?.value ?? 0;
   ${body}`,
];

const lines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('process guards', () => {
  it('logs and counts a rejection nobody handled, and the process goes on (the RangeError of a too-deep JSON.stringify)', async () => {
    const run = await runNode(
      script(`
        let deep = {}; for (let i = 0; i < 200000; i++) deep = { d: deep };
        Promise.resolve().then(() => JSON.stringify(deep));
        await new Promise((r) => setTimeout(r, 50));
        log.info('still_serving', { rejections: await count('rejection') });
        process.exit(0);`),
      env,
    );
    assert.equal(run.code, 0, run.stderr);
    const events = lines(run.stdout);
    const rejection = events.find((e) => e.event === 'unhandled_rejection');
    assert.ok(rejection, run.stdout);
    assert.equal(rejection.errorName, 'RangeError');
    assert.equal(events.find((e) => e.event === 'still_serving')?.rejections, 1, 'counted, and the process went on');
  });

  it('logs and counts an uncaught exception, then exits 1 for the supervisor to restart a process whose state may be half-done', async () => {
    const run = await runNode(script(`setTimeout(() => { throw new TypeError('from an event handler'); }, 1);`), env);
    assert.equal(run.code, 1);
    const exception = lines(run.stdout).find((e) => e.event === 'uncaught_exception');
    assert.ok(exception, run.stdout);
    assert.equal(exception.errorName, 'TypeError');
    assert.equal(exception.message, 'from an event handler');
  });

  it('names the background task whose failure it logs, and counts it, without an unhandled rejection', async () => {
    const run = await runNode(
      script(`
        Promise.reject(new Error('disk full')).catch(backgroundFailure('upstream_tools_remember'));
        await new Promise((r) => setTimeout(r, 20));
        log.info('counted', { background: await count('background'), rejections: await count('rejection') });
        process.exit(0);`),
      env,
    );
    assert.equal(run.code, 0, run.stderr);
    const events = lines(run.stdout);
    const failed = events.find((e) => e.event === 'background_task_failed');
    assert.equal(failed?.task, 'upstream_tools_remember');
    assert.equal(failed?.message, 'disk full');
    const counted = events.find((e) => e.event === 'counted');
    assert.equal(counted?.background, 1);
    assert.equal(counted?.rejections, 0);
  });
});
