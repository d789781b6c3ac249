// The shape of one phase of the bench (bench/phases/): what it measures is its own; what it adds to
// the table and to bench/results.json is declared, so a partial run can be merged into a full one.
import type { Report } from './report.js';
import type { Resources } from './resources.js';
import type { PhaseName } from './settings.js';
import type { Stack } from './stack.js';

export interface PhaseContext {
  stack: Stack;
  resources: Resources;
  report: Report;
}

export interface Phase {
  name: PhaseName;
  /** The table sections of its rows. */
  sections: readonly string[];
  /** The results.json keys it writes. */
  keys: readonly string[];
  run(ctx: PhaseContext): Promise<void>;
}

/** A phase; its table section and its results.json key are its name unless it says otherwise. */
export function definePhase(phase: Omit<Phase, 'sections' | 'keys'> & Partial<Pick<Phase, 'sections' | 'keys'>>): Phase {
  return { ...phase, sections: phase.sections ?? [phase.name], keys: phase.keys ?? [phase.name] };
}
