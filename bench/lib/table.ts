// The table a run prints.
import type { Row } from './report.js';

export function printTable(rows: readonly Row[]): void {
  const header = ['', 'measure', 'result', 'target', ''];
  const body = rows.map((r) => [r.section, r.measure, r.value, r.target ?? '', r.met === undefined ? '' : r.met ? 'met' : 'MISSED']);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ').trimEnd();
  process.stdout.write(`\n${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('-|-')}\n${body.map(line).join('\n')}\n`);
}
