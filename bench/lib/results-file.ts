// Whether and how a run records its figures in bench/results.json (bench/README.md, "What a run
// writes"): a full run with the default settings replaces the file; a run of some phases only
// (BENCH_PHASES, nothing else set) merges its phases into it and keeps the others; a run with any
// knob that changes what is measured leaves it alone. Every outcome is one line for the end of the run.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import type { Row } from './report.js';

/** What a phase contributes, as declared in bench/phases/. */
export interface PhaseOutput {
  name: string;
  sections: readonly string[];
  keys: readonly string[];
}

export type Results = Record<string, unknown>;

/** `full`: every phase with the default settings; `merge`: some phases, default settings; `none`: not recorded, and why. */
export type Recording = { kind: 'full' } | { kind: 'merge' } | { kind: 'none'; reason: string };

export function recordingFor(
  env: Readonly<Record<string, string | undefined>>,
  measuringKnobs: readonly string[],
  selected: ReadonlySet<string>,
  phases: readonly PhaseOutput[],
): Recording {
  const set = measuringKnobs.filter((k) => env[k]);
  if (set.length) return { kind: 'none', reason: `${set.join(', ')} set` };
  return phases.every((p) => selected.has(p.name)) ? { kind: 'full' } : { kind: 'merge' };
}

/**
 * `existing` with the keys and the rows of the phases in `ran` replaced by `fresh`'s, in the order of
 * a full run, and this run appended to `partialRuns`. machine, settings, totalSeconds and
 * finishedAt stay those of the run the file holds (with no file, there are none but `fresh`'s
 * machine and settings).
 */
export function mergeResults(
  existing: Results | undefined,
  fresh: Results,
  phases: readonly PhaseOutput[],
  ran: readonly string[],
): Results {
  const base = existing ?? { machine: fresh.machine, settings: fresh.settings };
  const replaced = new Set(ran);
  const ownerOfKey = new Map(phases.flatMap((p) => p.keys.map((k) => [k, p.name] as const)));
  const ownerOfSection = new Map(phases.flatMap((p) => p.sections.map((s) => [s, p.name] as const)));
  const order = ['machine', 'settings', ...phases.flatMap((p) => p.keys), 'rows', 'totalSeconds', 'finishedAt', 'partialRuns'];
  const rowsOf = (results: Results) => (Array.isArray(results.rows) ? (results.rows as Row[]) : []);
  const rows = [
    ...phases.flatMap((p) => (replaced.has(p.name) ? rowsOf(fresh) : rowsOf(base)).filter((r) => ownerOfSection.get(r.section) === p.name)),
    // Rows of a section no phase declares any more stay, after the others.
    ...rowsOf(base).filter((r) => !ownerOfSection.has(r.section)),
  ];
  const partialRuns = [
    ...(Array.isArray(base.partialRuns) ? base.partialRuns : []),
    { phases: ran, finishedAt: fresh.finishedAt, totalSeconds: fresh.totalSeconds, machine: fresh.machine },
  ];
  const out: Results = {};
  for (const key of new Set([...order, ...Object.keys(base)])) {
    if (key === 'rows') out.rows = rows;
    else if (key === 'partialRuns') out.partialRuns = partialRuns;
    else if (replaced.has(ownerOfKey.get(key) ?? '')) {
      if (key in fresh) out[key] = fresh[key];
    } else if (key in base) out[key] = base[key];
  }
  return out;
}

/** Records `fresh` at `path` as `recording` says and returns the line that tells what happened. */
export function recordResults(
  path: string,
  recording: Recording,
  fresh: Results,
  phases: readonly PhaseOutput[],
  ran: readonly string[],
): string {
  const count = Array.isArray(fresh.rows) ? fresh.rows.length : 0;
  const rows = `${count} row${count === 1 ? '' : 's'}`;
  if (recording.kind === 'none') return `${path} left as it was (${recording.reason}: only runs with the default settings are recorded)`;
  if (recording.kind === 'full') {
    writeFileSync(path, `${JSON.stringify(fresh, null, 2)}\n`);
    return `wrote ${path}: the full run, every phase (${rows}, ${fresh.totalSeconds} s in all)`;
  }
  if (ran.length === 0) return `${path} left as it was (no selected phase measured anything)`;
  let existing: Results | undefined;
  if (existsSync(path)) {
    try {
      existing = JSON.parse(readFileSync(path, 'utf8')) as Results;
    } catch (err) {
      return `${path} left as it was (it is not JSON, so this run's phases cannot be merged into it: ${err instanceof Error ? err.message : String(err)})`;
    }
    if (!isDeepStrictEqual(existing.settings, fresh.settings))
      return `${path} left as it was (its settings differ from this run's, so its phases and these would not compare)`;
  }
  const merged = mergeResults(existing, fresh, phases, ran);
  writeFileSync(path, `${JSON.stringify(merged, null, 2)}\n`);
  const kept = phases.filter((p) => !ran.includes(p.name) && p.keys.some((k) => k in merged)).map((p) => p.name);
  const from = existing ? `from the run finished ${String(existing.finishedAt ?? 'at an unknown time')}` : '';
  return existing
    ? `merged into ${path}: ${ran.join(', ')} from this run (${rows})${kept.length ? `; ${kept.join(', ')} kept ${from}` : ''}`
    : `wrote ${path}: a partial file, ${ran.join(', ')} only (${rows}; there was no file to merge into)`;
}
