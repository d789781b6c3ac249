// The table a run prints: one small table per section (in the order the sections first appear),
// headed by the section's name, with the columns measure | result | target | met (the last two
// only where a row of the section has them), each as wide as its content. When a section does not
// fit in `width`, measure and target are narrowed and cells wrap at spaces, so that no line is
// wider; a row's continuation lines are indented by two spaces, so a row starts where its measure
// does not.
import type { Row } from './report.js';

const SEPARATOR = ' | ';
const INDENT = '  ';
/** The widest the measure and target columns get; the result column takes what is left. */
const MEASURE_MAX = 34;
const TARGET_MAX = 18;
const RESULT_MIN = 20;

/** Length in code points: µ, ≥, ≈, ×, → and — are one column each. */
const length = (s: string) => [...s].length;

/** Splits `text` into lines of at most `width` code points at spaces (a longer word is cut). */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ').filter(Boolean)) {
    const room = width - (lines.length ? INDENT.length : 0);
    if (line && length(line) + 1 + length(word) <= room) {
      line += ` ${word}`;
      continue;
    }
    if (line) lines.push(line);
    let rest = word;
    for (let r = Math.max(1, width - (lines.length ? INDENT.length : 0)); length(rest) > r; r = Math.max(1, width - INDENT.length)) {
      lines.push([...rest].slice(0, r).join(''));
      rest = [...rest].slice(r).join('');
    }
    line = rest;
  }
  if (line || lines.length === 0) lines.push(line);
  return lines.map((l, i) => (i ? INDENT + l : l));
}

const pad = (s: string, width: number) => s + ' '.repeat(Math.max(0, width - length(s)));

function formatSection(section: string, rows: readonly Row[], width: number): string[] {
  const hasTarget = rows.some((r) => r.target);
  const hasMet = rows.some((r) => r.met !== undefined);
  const header = [section, 'result', ...(hasTarget ? ['target'] : []), ...(hasMet ? [''] : [])];
  // A '|' inside a cell (the PostgreSQL rows put one between the two stores) would read as a column break.
  const cells = rows.map((r) => [
    r.measure,
    r.value.replaceAll('|', '¦'),
    ...(hasTarget ? [r.target ?? ''] : []),
    ...(hasMet ? [r.met === undefined ? '' : r.met ? 'met' : 'MISSED'] : []),
  ]);
  const natural = header.map((h, i) => Math.max(length(h), ...cells.map((c) => length(c[i]!))));
  const fits = natural.reduce((a, n) => a + n, 0) + (natural.length - 1) * SEPARATOR.length <= width;
  const widths = fits
    ? natural
    : natural.map((n, i) => (i === 0 ? Math.min(n, MEASURE_MAX) : i === 2 && hasTarget ? Math.min(n, TARGET_MAX) : n));
  const others = widths.reduce((a, w, i) => (i === 1 ? a : a + w), 0) + (widths.length - 1) * SEPARATOR.length;
  widths[1] = Math.min(natural[1]!, Math.max(RESULT_MIN, width - others));
  // Trailing empty cells are left off, so a row without a target ends with its result.
  const line = (cols: readonly string[]) => {
    let n = cols.length;
    while (n > 1 && !cols[n - 1]) n--;
    return cols
      .slice(0, n)
      .map((c, i) => pad(c, widths[i]!))
      .join(SEPARATOR)
      .trimEnd();
  };
  const out = [line(header), widths.map((w) => '-'.repeat(w)).join('-|-')];
  for (const cols of cells) {
    const wrapped = cols.map((c, i) => wrap(c, widths[i]!));
    const height = Math.max(...wrapped.map((w) => w.length));
    for (let l = 0; l < height; l++) out.push(line(wrapped.map((w) => w[l] ?? '')));
  }
  return out;
}

export function formatTable(rows: readonly Row[], width = 120): string {
  const sections = [...new Set(rows.map((r) => r.section))];
  return `${sections
    .map((s) =>
      formatSection(
        s,
        rows.filter((r) => r.section === s),
        width,
      ).join('\n'),
    )
    .join('\n\n')}\n`;
}
