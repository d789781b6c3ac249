// The bench's knobs: `node --import tsx --test bench/test/*.test.ts` (bench/README.md).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PHASE_NAMES, unknownPhases } from '../lib/settings.js';

describe('the bench knobs', () => {
  it('names the BENCH_PHASES entries that are no phase, and only those', () => {
    assert.deepEqual(unknownPhases(PHASE_NAMES), []);
    assert.deepEqual(unknownPhases(['first', 'throughtput', '', 'held']), ['throughtput', '']);
  });
});
