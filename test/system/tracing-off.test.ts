// Traces off (no OTEL_* variable): a broker process records no span and resolves no module of the
// OpenTelemetry SDK or exporter. Each check runs test/fixtures/tracing/tool-call.ts in its own
// process, as which modules a process loads can only be seen from a fresh one.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runNode } from '../support/node-process.js';

const ROOT = join(import.meta.dirname, '../..');

describe('traces, off', () => {
  /** Runs test/fixtures/tracing/tool-call.ts in its own process with `env`; returns its report and the OTel modules it resolved. */
  async function toolCallIn(env: Record<string, string>): Promise<{ report: Record<string, unknown>; modules: string[] }> {
    const dir = mkdtempSync(join(tmpdir(), 'otel-imports-'));
    const log = join(dir, 'imports.log');
    try {
      const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('OTEL_')));
      const {
        code,
        stdout: out,
        stderr: err,
      } = await runNode(
        ['--import', 'tsx', '--import', './test/fixtures/tracing/import-log.mjs', 'test/fixtures/tracing/tool-call.ts'],
        { ...clean, ...env, OTEL_IMPORT_LOG: log },
        { cwd: ROOT },
      );
      assert.equal(code, 0, err);
      const modules = existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
      return { report: JSON.parse(out.trim().split('\n').at(-1)!) as Record<string, unknown>, modules };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  const SDK = /\/@opentelemetry\/(?!api\/)/;

  it('records no span and loads no module of the SDK or the exporter, and sends GitHub no traceparent', async () => {
    const { report, modules } = await toolCallIn({});
    assert.deepEqual(report, { ok: true, tracing: false, delegate: 'NoopTracerProvider', githubTraceparents: 0 });
    assert.ok(
      modules.some((m) => m.includes('/@opentelemetry/api/')),
      'the hooks saw the API load (so they would see the SDK)',
    );
    assert.deepEqual(
      modules.filter((m) => SDK.test(m)),
      [],
    );
  });

  it('loads them, by the same path, once OTEL_TRACES_EXPORTER names an exporter (the check above can fail)', async () => {
    const { report, modules } = await toolCallIn({
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:9/v1/traces',
    });
    assert.equal(report.ok, true);
    assert.equal(report.tracing, true);
    assert.equal(report.githubTraceparents, 0, 'GitHub gets no traceparent with traces on either');
    for (const pkg of ['sdk-trace-node', 'sdk-trace-base', 'exporter-trace-otlp-http'])
      assert.ok(
        modules.some((m) => m.includes(`/@opentelemetry/${pkg}/`)),
        pkg,
      );
  });
});
