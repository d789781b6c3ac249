// The quick suites (test/*.test.ts) run in four processes instead of one process each: a process
// loads the TypeScript loader, the broker and its libraries once, which costs about 3 s of CPU a
// suite otherwise (most of the old `npm run test:quick`). `npm run test:quick` and `npm test` start
// `test/quick/1.ts` … `4.ts`; each imports its share of the suites, whose `describe`s
// register on that process's root test and run one after another, as they would alone.
// `node --import tsx --test test/<name>.test.ts` still runs one suite in a process of its own.
//
// What suites share in a process, and why that holds: module state (the metrics registry, the
// OpenTelemetry global) — the suites that read it count deltas or set it up in their own hooks;
// process.env — a suite that changes it restores it in its `after` (support/tls.ts); a top-level
// `after` runs when the process's last suite ends instead of the file's.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';

const TEST = join(import.meta.dirname, '..');

/** Every quick suite, as `npm test` and `test/suites.test.ts` name them. */
export const quickSuites = (): string[] =>
  readdirSync(TEST)
    .filter((name) => name.endsWith('.test.ts'))
    .sort();

/**
 * How long each suite took alone (`quick-seconds.json`; `node --import tsx test/support/quick-seconds.ts`
 * measures them again). Time, not size, is what a shard must balance: a short suite that waits on
 * timeouts costs more than a long one of pure units (by size, one shard took twice the others).
 */
const SECONDS: Record<string, number> = JSON.parse(readFileSync(join(import.meta.dirname, 'quick-seconds.json'), 'utf8'));

/** A suite's expected seconds: measured, or, for a suite not measured yet, its size at the measured suites' median pace. */
function costOf(name: string, bytesPerSecond: number): number {
  return SECONDS[name] ?? statSync(join(TEST, name)).size / bytesPerSecond;
}

/**
 * The suites of shard `index` (1-based) of `count`: the longest first, each to the shard with the
 * least so far, so the shards take about as long. Every suite is in exactly one shard, whatever the count.
 */
export function shardOf(index: number, count: number): string[] {
  const suites = quickSuites();
  const paces = suites
    .filter((name) => SECONDS[name] !== undefined)
    .map((name) => statSync(join(TEST, name)).size / SECONDS[name]!)
    .sort((a, b) => a - b);
  const bytesPerSecond = paces[Math.floor(paces.length / 2)] ?? 10_000;
  const byCost = suites
    .map((name) => ({ name, cost: costOf(name, bytesPerSecond) }))
    .sort((a, b) => b.cost - a.cost || a.name.localeCompare(b.name));
  const load = Array.from({ length: count }, () => 0);
  const shards = Array.from({ length: count }, () => [] as string[]);
  for (const { name, cost } of byCost) {
    const lightest = load.indexOf(Math.min(...load));
    load[lightest]! += cost;
    shards[lightest]!.push(name);
  }
  return shards[index - 1]!;
}

/** Imports the suites of shard `index` of `count`; a suite that cannot load fails as a test of its own. */
export async function runShard(index: number, count: number): Promise<void> {
  for (const name of shardOf(index, count)) {
    try {
      await import(pathToFileURL(join(TEST, name)).href);
    } catch (err) {
      test(`test/${name} loads`, () => {
        throw err;
      });
    }
  }
}
