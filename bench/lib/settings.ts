// The bench's knobs (environment variables, bench/README.md) and fixed sizes, read once, and the
// progress line every phase prints.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLogger } from '../../src/log.js';

export const BENCH_DIR = fileURLToPath(new URL('../', import.meta.url));

/** Every phase, in the order a run takes them. */
export const PHASE_NAMES = [
  'throughput',
  'overhead',
  'first',
  'completion',
  'exchange',
  'gateway',
  'observability',
  'postgres',
  'held',
  'store',
  'policy',
] as const;
export type PhaseName = (typeof PHASE_NAMES)[number];

export const DURATION = Number(process.env.BENCH_DURATION ?? 5);
export const MAX_ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
export const PROFILE = process.env.BENCH_PROFILE === '1';
/** `--cpu-prof` into bench/profiles/<dir> under BENCH_PROFILE=1 (a process writes its profile when it stops). */
export const profiled = (dir: string): string[] => (PROFILE ? ['--cpu-prof', '--cpu-prof-dir', join(BENCH_DIR, 'profiles', dir)] : []);
export const PHASES = new Set((process.env.BENCH_PHASES ?? PHASE_NAMES.join(',')).split(',').map((p) => p.trim()));
export const phaseSelected = (name: PhaseName) => PHASES.has(name);
/** The names in `selected` that are no phase (a typo in BENCH_PHASES would otherwise run nothing, silently). */
export const unknownPhases = (selected: Iterable<string>) => [...selected].filter((p) => !(PHASE_NAMES as readonly string[]).includes(p));
export const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? '1,16,64').split(',').map(Number);
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
/** Whether BENCH_TOOLS (unset: every tool) lets `tool` be loaded. */
export const toolSelected = (tool: string) => !process.env.BENCH_TOOLS || process.env.BENCH_TOOLS.split(',').includes(tool);

export const CONNECTED_USERS = 256;
export const FIRST_CALLS = 200;
export const COMPLETION_SAMPLES = 20;
export const HELD = 10_000;
export const LOOKUPS = 20_000;

/** The knobs that change what is measured; a run with any of them set is not recorded (BENCH_PHASES only selects). */
export const MEASURING_KNOBS = [
  'BENCH_CONCURRENCY',
  'BENCH_ROWS',
  'BENCH_DURATION',
  'BENCH_ROUNDS',
  'BENCH_TOOLS',
  'BENCH_PROFILE',
] as const;

/** `results.settings`: what the figures of this run were taken with. */
export const settingsRecord = () => ({
  durationSeconds: DURATION,
  rounds: ROUNDS,
  concurrency: CONCURRENCY,
  connectedUsers: CONNECTED_USERS,
  firstCalls: FIRST_CALLS,
  completionSamples: COMPLETION_SAMPLES,
  held: HELD,
  storeRows: [1000, MAX_ROWS],
  lookups: LOOKUPS,
});

export const silent = createLogger('error', () => {});
export const started = Date.now();
export const say = (line: string) => process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s] ${line}\n`);
