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
import { readdirSync, statSync } from 'node:fs';
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
 * The suites of shard `index` (1-based) of `count`: the largest first, each to the shard with the
 * least so far (sizes stand in for cost), so the shards take about as long. Every suite is in
 * exactly one shard, whatever the count.
 */
export function shardOf(index: number, count: number): string[] {
  const bySize = quickSuites()
    .map((name) => ({ name, size: statSync(join(TEST, name)).size }))
    .sort((a, b) => b.size - a.size || a.name.localeCompare(b.name));
  const load = Array.from({ length: count }, () => 0);
  const shards = Array.from({ length: count }, () => [] as string[]);
  for (const { name, size } of bySize) {
    const lightest = load.indexOf(Math.min(...load));
    load[lightest]! += size;
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
