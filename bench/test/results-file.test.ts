// How a run records bench/results.json: `node --import tsx --test bench/test/*.test.ts` (bench/README.md).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { mergeResults, recordingFor, recordResults, type Results } from '../lib/results-file.js';
import { MEASURING_KNOBS } from '../lib/settings.js';

const phases = [
  { name: 'throughput', sections: ['throughput', 'latency'], keys: ['throughput', 'perRequestOverhead'] },
  { name: 'first', sections: ['first call'], keys: ['firstCallToUrl'] },
  { name: 'store', sections: ['store'], keys: ['storeScale'] },
];
const settings = { durationSeconds: 5, rounds: 2 };

/** A full run's file: every phase, rows interleaved across the throughput phase's two sections. */
const full = (): Results => ({
  machine: { nproc: 2, loadavgAtStart: [0.1] },
  settings,
  throughput: ['old throughput'],
  perRequestOverhead: { wallMs: 1 },
  firstCallToUrl: { p50: 2 },
  storeScale: { ratio: 1.3 },
  rows: [
    { section: 'throughput', measure: 't1', value: 'old' },
    { section: 'latency', measure: 'l1', value: 'old' },
    { section: 'throughput', measure: 't2', value: 'old' },
    { section: 'first call', measure: 'f', value: 'old' },
    { section: 'store', measure: 's', value: 'old' },
  ],
  totalSeconds: 376,
  finishedAt: '2026-11-29T14:51:00.000Z',
});

/** A run of the first phase only. */
const firstOnly = (): Results => ({
  machine: { nproc: 2, loadavgAtStart: [3.3] },
  settings,
  firstCallToUrl: { p50: 1.5 },
  rows: [{ section: 'first call', measure: 'f', value: 'new' }],
  totalSeconds: 12,
  finishedAt: '2026-12-01T10:00:00.000Z',
});

const dir = mkdtempSync(join(tmpdir(), 'bench-results-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const file = (content?: Results | string) => {
  const path = join(dir, `results-${n++}.json`);
  if (content !== undefined) writeFileSync(path, typeof content === 'string' ? content : `${JSON.stringify(content, null, 2)}\n`);
  return path;
};
const read = (path: string) => JSON.parse(readFileSync(path, 'utf8')) as Results;

describe('recording bench/results.json', () => {
  it('records a run with no knob set in full, one with BENCH_PHASES only by merging, and no run with a knob that changes the figures', () => {
    const all = new Set(phases.map((p) => p.name));
    assert.deepEqual(recordingFor({}, MEASURING_KNOBS, all, phases), { kind: 'full' });
    assert.deepEqual(recordingFor({ BENCH_PHASES: 'throughput,first,store' }, MEASURING_KNOBS, all, phases), { kind: 'full' });
    assert.deepEqual(recordingFor({ BENCH_PHASES: 'first' }, MEASURING_KNOBS, new Set(['first']), phases), { kind: 'merge' });
    for (const knob of MEASURING_KNOBS) {
      assert.deepEqual(recordingFor({ BENCH_PHASES: 'first', [knob]: '1' }, MEASURING_KNOBS, new Set(['first']), phases), {
        kind: 'none',
        reason: `${knob} set`,
      });
    }
    assert.deepEqual(recordingFor({ BENCH_DURATION: '1', BENCH_ROUNDS: '1' }, MEASURING_KNOBS, all, phases), {
      kind: 'none',
      reason: 'BENCH_DURATION, BENCH_ROUNDS set',
    });
  });

  it("merges a partial run's phases into the file and keeps the other phases, their rows in a full run's order", () => {
    const merged = mergeResults(full(), firstOnly(), phases, ['first']);
    assert.deepEqual(Object.keys(merged), [
      'machine',
      'settings',
      'throughput',
      'perRequestOverhead',
      'firstCallToUrl',
      'storeScale',
      'rows',
      'totalSeconds',
      'finishedAt',
      'partialRuns',
    ]);
    assert.deepEqual(merged.firstCallToUrl, { p50: 1.5 });
    assert.deepEqual(merged.throughput, ['old throughput']);
    assert.deepEqual(
      (merged.rows as { measure: string; value: string }[]).map((r) => `${r.measure}:${r.value}`),
      ['t1:old', 'l1:old', 't2:old', 'f:new', 's:old'],
    );
    // The file's own run stays what machine, totalSeconds and finishedAt describe; this one is listed.
    assert.deepEqual(merged.machine, full().machine);
    assert.equal(merged.finishedAt, '2026-11-29T14:51:00.000Z');
    assert.deepEqual(merged.partialRuns, [
      { phases: ['first'], finishedAt: '2026-12-01T10:00:00.000Z', totalSeconds: 12, machine: firstOnly().machine },
    ]);
    // A second partial run is listed after the first.
    assert.equal((mergeResults(merged, firstOnly(), phases, ['first']).partialRuns as unknown[]).length, 2);
  });

  it("drops a re-run phase's keys and rows that this run did not produce", () => {
    const fresh: Results = {
      ...firstOnly(),
      throughput: ['new throughput'],
      rows: [{ section: 'throughput', measure: 't1', value: 'new' }],
    };
    const merged = mergeResults(full(), fresh, phases, ['throughput']);
    assert.equal('perRequestOverhead' in merged, false);
    assert.deepEqual(merged.throughput, ['new throughput']);
    assert.deepEqual(
      (merged.rows as { measure: string }[]).map((r) => r.measure),
      ['t1', 'f', 's'],
    );
  });

  it('says in one line what it wrote, and where', () => {
    const fullPath = file(firstOnly());
    const fresh = full();
    assert.equal(
      recordResults(fullPath, { kind: 'full' }, fresh, phases, ['throughput', 'first', 'store']),
      `wrote ${fullPath}: the full run, every phase (5 rows, 376 s in all)`,
    );
    assert.deepEqual(read(fullPath), fresh);

    const mergedPath = file(full());
    assert.equal(
      recordResults(mergedPath, { kind: 'merge' }, firstOnly(), phases, ['first']),
      `merged into ${mergedPath}: first from this run (1 row); throughput, store kept from the run finished 2026-11-29T14:51:00.000Z`,
    );
    assert.deepEqual(read(mergedPath), mergeResults(full(), firstOnly(), phases, ['first']));

    const newPath = file();
    assert.equal(
      recordResults(newPath, { kind: 'merge' }, firstOnly(), phases, ['first']),
      `wrote ${newPath}: a partial file, first only (1 row; there was no file to merge into)`,
    );
    assert.deepEqual(read(newPath).firstCallToUrl, { p50: 1.5 });
  });

  it('leaves the file as it was, and says why, when the run is not to be recorded or cannot be merged', () => {
    const cases: [string, Parameters<typeof recordResults>[1], Results | string, string[], RegExp][] = [
      [
        'a knob set',
        { kind: 'none', reason: 'BENCH_DURATION set' },
        full(),
        ['first'],
        /left as it was \(BENCH_DURATION set: only runs with the default settings are recorded\)$/,
      ],
      [
        'other settings',
        { kind: 'merge' },
        { ...full(), settings: { durationSeconds: 8, rounds: 2 } },
        ['first'],
        /left as it was \(its settings differ from this run's/,
      ],
      ['not JSON', { kind: 'merge' }, '{ "rows": [', ['first'], /left as it was \(it is not JSON/],
      ['nothing measured', { kind: 'merge' }, full(), [], /left as it was \(no selected phase measured anything\)$/],
    ];
    for (const [what, recording, content, ran, message] of cases) {
      const path = file(content);
      const before = readFileSync(path, 'utf8');
      const line = recordResults(path, recording, firstOnly(), phases, ran);
      assert.ok(line.startsWith(`${path} left as it was`), `${what}: ${line}`);
      assert.match(line, message, what);
      assert.equal(readFileSync(path, 'utf8'), before, `${what}: the file is unchanged`);
    }
  });
});
