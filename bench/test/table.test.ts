// The printed table: `node --import tsx --test bench/test/*.test.ts` (bench/README.md).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import type { Row } from '../lib/report.js';
import { formatTable, wrap } from '../lib/table.js';

const columns = (line: string) => [...line].length;
/** The rows of the recorded full run, PostgreSQL's included. */
const recorded = (JSON.parse(readFileSync(new URL('../results.json', import.meta.url), 'utf8')) as { rows: Row[] }).rows;

describe('the bench table', () => {
  it('fits every line of the recorded full run, PostgreSQL rows included, in 120 columns', () => {
    assert.ok(
      recorded.some((r) => r.section === 'postgres' && r.value.length > 150),
      'the fixture has the long PostgreSQL rows',
    );
    const lines = formatTable(recorded).split('\n');
    const wide = lines.filter((l) => columns(l) > 120);
    assert.deepEqual(wide, []);
  });

  it('keeps every word of every cell, in order, under a heading that names its section', () => {
    const lines = formatTable(recorded).split('\n');
    const text = lines.join(' ');
    for (const r of recorded) {
      for (const cell of [r.measure, r.value, r.target ?? '']) {
        let at = 0;
        for (const word of cell.replaceAll('|', '¦').split(' ').filter(Boolean)) {
          at = text.indexOf(word, at);
          assert.ok(at >= 0, `${JSON.stringify(word)} of ${JSON.stringify(cell)} is missing`);
        }
      }
    }
    for (const section of new Set(recorded.map((r) => r.section)))
      assert.ok(
        lines.some((l) => l.startsWith(`${section} `)),
        `a table headed ${section}`,
      );
  });

  it('prints a | inside a cell as ¦, so that it does not read as a column break', () => {
    const table = formatTable([
      { section: 'postgres', measure: 'list_connections, c=1', value: 'SQLite 1200 req/s | PostgreSQL 940 req/s' },
    ]);
    assert.equal(table.split('\n')[2], 'list_connections, c=1 | SQLite 1200 req/s ¦ PostgreSQL 940 req/s');
  });

  it('starts each row on an unindented measure and indents its continuation lines', () => {
    const row: Row = {
      section: 'postgres',
      measure: 'list_connections via proxy, c=16: 1 / 2 / 3 instances',
      value: 'x '.repeat(120).trim(),
      target: 'no errors, every instance served',
      met: true,
    };
    const lines = formatTable([row]).split('\n').slice(2).filter(Boolean);
    assert.ok(lines.length > 2);
    assert.match(lines[0]!, /^list_connections via proxy, c=16: +\| x x .* \| no errors, every +\| met$/);
    assert.match(lines[1]!, /^ {2}1 \/ 2 \/ 3 instances +\| {3}x x .* \| {3}instance served$/);
    for (const l of lines.slice(2)) assert.match(l, /^ +\| {3}x( x)*$/);
  });

  it('does not pad a narrow table out to 120 columns', () => {
    const table = formatTable([{ section: 'first call', measure: 'n=200', value: 'p50 2 ms' }]);
    assert.equal(table, 'first call | result\n-----------|---------\nn=200      | p50 2 ms\n');
  });

  it('wraps at spaces, cuts only a word longer than the column', () => {
    assert.deepEqual(wrap('p50 1.36 ms, p99 7.96 ms after', 12), ['p50 1.36 ms,', '  p99 7.96', '  ms after']);
    assert.deepEqual(wrap('abcdefghijkl', 5), ['abcde', '  fgh', '  ijk', '  l']);
    assert.deepEqual(wrap('', 5), ['']);
  });
});
