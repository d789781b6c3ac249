// How log lines reach stdout: events at once, access lines within 25 ms, in order, and nothing lost when the process exits.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { runNode } from '../support/node-process.js';

const LOG = new URL('../../src/log.ts', import.meta.url).href;
const env = { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info' };
const events = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { event: string }).event);

/** `node -e <code>` with the broker's logger imported as `log`. */
const script = (body: string) => [
  '--import',
  'tsx',
  '--input-type=module',
  '-e',
  `const { createLogger } = await import(${JSON.stringify(LOG)}); const log = createLogger(); ${body}`,
];

describe('log output on stdout', () => {
  it('writes every line before process.exit, as a failed start-up exits right after its error line', async () => {
    const run = await runNode(
      script(`for (let i = 0; i < 50; i++) log.info('line_' + i); log.error('config_invalid'); process.exit(1);`),
      env,
    );
    assert.equal(run.code, 1);
    assert.deepEqual(events(run.stdout), [...Array.from({ length: 50 }, (_, i) => `line_${i}`), 'config_invalid'], run.stderr);
  });

  it('writes an event line before the code that logged it goes on: it survives a SIGKILL in the same turn, behind the waiting access lines', async () => {
    const run = await runNode(
      script(
        `for (let i = 0; i < 5; i++) log.info('http_request', { n: i }); log.info('connection_created'); process.kill(process.pid, 'SIGKILL');`,
      ),
      env,
    );
    assert.equal(run.code, null);
    assert.deepEqual(events(run.stdout), [...Array.from({ length: 5 }, () => 'http_request'), 'connection_created'], run.stderr);
  });

  it('writes access lines, in order, within a flush interval: those logged 100 ms before a SIGKILL survive it', async () => {
    const run = await runNode(
      script(
        `for (let i = 0; i < 50; i++) log.info('http_request', { n: i }); setTimeout(() => process.kill(process.pid, 'SIGKILL'), 100);`,
      ),
      env,
    );
    assert.equal(run.code, null);
    const lines = run.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { event: string; n: number });
    assert.deepEqual(
      lines.map((l) => l.n),
      Array.from({ length: 50 }, (_, i) => i),
      run.stderr,
    );
  });

  it('writes the lines logged before an uncaught exception', async () => {
    const run = await runNode(script(`log.error('about_to_fail'); setImmediate(() => { throw new Error('boom'); });`), env);
    assert.notEqual(run.code, 0);
    assert.deepEqual(events(run.stdout), ['about_to_fail']);
  });

  it('a lone line of a running process reaches stdout within a second, without waiting for more lines', async () => {
    const child = spawn(
      process.execPath,
      script(`process.stderr.write(Date.now() + '\\n'); log.info('listening'); setInterval(() => {}, 1000);`),
      {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    try {
      let loggedAt = NaN;
      child.stderr.on('data', (d) => (loggedAt = Number(String(d).trim())));
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        const timer = setTimeout(() => reject(new Error('no line on stdout within 10 s')), 10_000);
        child.stdout.on('data', (d) => {
          out += d;
          if (out.includes('\n')) {
            clearTimeout(timer);
            resolve(out);
          }
        });
      });
      assert.deepEqual(events(line), ['listening']);
      assert.ok(Date.now() - loggedAt < 1000, `${Date.now() - loggedAt} ms after it was logged`);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('writes one JSON line per event on stdout, at LOG_LEVEL, with the event first among its fields', async () => {
    const run = await runNode(
      script(`log.debug('hidden', {}); log.info('listening', { url: 'http://127.0.0.1:1' }); log.error('failed', { message: 'x' });`),
      env,
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stderr, '');
    const lines = run.stdout.trimEnd().split('\n');
    const parsed = lines.map((l) => JSON.parse(l) as { level: string; event: string; time: string });
    assert.deepEqual(
      parsed.map((l) => [l.level, l.event]),
      [
        ['info', 'listening'],
        ['error', 'failed'],
      ],
    );
    for (const l of parsed) assert.ok(!Number.isNaN(Date.parse(l.time)), `an ISO time: ${l.time}`);
    assert.match(lines[0]!, /"event":"listening","url":"http:\/\/127\.0\.0\.1:1"/);
  });
});
