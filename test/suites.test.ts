// The split between the inner loop and the whole run: `npm run test:quick` runs test/*.test.ts,
// in-process only; suites that start Chromium, PostgreSQL clusters, broker processes, `npm ci` or
// any other process live in test/system/ and run only in `npm test`.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { shardOf } from './support/quick-shard.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const TEST = join(ROOT, 'test');

/** What makes a suite not quick, by the module that does it. */
const HEAVY_IMPORTS: Record<string, string> = {
  'playwright-core': 'drives Chromium',
  './support/multi.js': 'spawns broker processes',
  './support/postgres.js': 'starts a PostgreSQL cluster',
};

const quickSuites = () => readdirSync(TEST).filter((name) => name.endsWith('.test.ts'));
const importsOf = (text: string) =>
  [...text.matchAll(/^import\b([^;]*?)\bfrom\s+'([^']+)'/gms)].map((m) => ({ names: m[1]!, specifier: m[2]! }));
/** Imports that bring code in (not `import type`): what runs when the suite loads. */
const valueImportsOf = (text: string) => importsOf(text).filter(({ names }) => !/^\s*type\b/.test(names));

/** The child_process calls a suite could start a process with, called by name. */
const SPAWNING_CALL = /\b(?:spawn|spawnSync|exec|execSync|execFile|execFileSync|fork|runNode|spawnAdmin|spawnBroker)\(/;

/** The test/support modules that can start a process: they import node:child_process, or such a module, themselves. */
function spawningSupportModules(): Map<string, string> {
  const SUPPORT = join(TEST, 'support');
  const imports = new Map<string, string[]>();
  for (const name of readdirSync(SUPPORT).filter((n) => n.endsWith('.ts'))) {
    const path = join(SUPPORT, name);
    imports.set(
      path,
      valueImportsOf(readFileSync(path, 'utf8')).map(({ specifier }) =>
        specifier.startsWith('.') ? resolve(dirname(path), specifier).replace(/\.js$/, '.ts') : specifier,
      ),
    );
  }
  const spawning = new Map<string, string>();
  for (let grew = true; grew;) {
    grew = false;
    for (const [path, specifiers] of imports) {
      if (spawning.has(path)) continue;
      const why = specifiers.find((s) => s === 'node:child_process' || spawning.has(s));
      if (why) {
        spawning.set(path, why === 'node:child_process' ? why : `test/${why.slice(TEST.length + 1)}`);
        grew = true;
      }
    }
  }
  return spawning;
}

describe('the quick suites (test/*.test.ts)', () => {
  it('start no Chromium, no broker process and no PostgreSQL cluster (those suites live in test/system/)', () => {
    const heavy: string[] = [];
    for (const name of quickSuites()) {
      const text = readFileSync(join(TEST, name), 'utf8');
      for (const { names, specifier } of importsOf(text)) {
        const why = HEAVY_IMPORTS[specifier];
        // A suite with a PostgreSQL half may stay quick when postgresSkipReason() (TEST_QUICK=1) skips it.
        if (why && !(specifier === './support/postgres.js' && /\bpostgresSkipReason\(\)/.test(text)))
          heavy.push(`test/${name} ${why} (imports ${specifier})`);
        if (/\bspawnBroker\b/.test(names)) heavy.push(`test/${name} spawns a broker process (imports spawnBroker)`);
      }
    }
    assert.deepEqual(heavy, []);
  });

  it('start no process at all: no node:child_process, no support module that spawns, no spawning call (those suites live in test/system/)', () => {
    const spawning = spawningSupportModules();
    assert.ok(spawning.has(join(TEST, 'support', 'node-process.ts')), 'the scan sees the support modules that spawn');
    const found: string[] = [];
    for (const name of quickSuites()) {
      const path = join(TEST, name);
      const text = readFileSync(path, 'utf8');
      for (const { specifier } of valueImportsOf(text)) {
        const target = specifier.startsWith('.') ? resolve(TEST, specifier).replace(/\.js$/, '.ts') : specifier;
        if (target === 'node:child_process') found.push(`test/${name} imports node:child_process`);
        const via = spawning.get(target);
        // A suite with a PostgreSQL half may stay quick when postgresSkipReason() (TEST_QUICK=1) skips it.
        if (via && !(specifier === './support/postgres.js' && /\bpostgresSkipReason\(\)/.test(text)))
          found.push(`test/${name} imports ${specifier}, which can start a process (through ${via})`);
      }
      if (/import\(\s*'node:child_process'\s*\)/.test(text)) found.push(`test/${name} imports node:child_process dynamically`);
      const call = SPAWNING_CALL.exec(text.replace(/\.exec\(/g, '.'));
      if (call) found.push(`test/${name} calls ${call[0]}`);
    }
    assert.deepEqual(found, []);
  });

  it('are exactly what npm run test:quick runs, with TEST_QUICK=1; npm test runs them and test/system/', () => {
    const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    assert.match(scripts['test:quick']!, /^TEST_QUICK=1 node --import tsx --test .*\btest\/quick\/\*\.ts$/);
    // The shards side by side as test:quick runs them, then the system suites one at a time (they
    // start processes and measure time, so they do not share the two cores with each other).
    assert.match(
      scripts.test!,
      /^npm run typecheck && node --import tsx --test --test-concurrency=4 .*\btest\/quick\/\*\.ts && node --import tsx --test --test-concurrency=1 .*\btest\/system\/\*\.test\.ts$/,
    );
    // Both commands start the shards in test/quick/ (support/quick-shard.ts): shard i of n each, every
    // one of 1..n there, and between them every quick suite exactly once.
    const shards = readdirSync(join(TEST, 'quick')).sort();
    const count = shards.length;
    assert.ok(count >= 1, 'test/quick/ holds the shards');
    shards.forEach((name, i) => {
      assert.equal(name, `${i + 1}.ts`, 'test/quick/ holds only the shards 1.ts … n.ts');
      const text = readFileSync(join(TEST, 'quick', name), 'utf8');
      assert.equal([...text.matchAll(/\brunShard\(/g)].length, 1, `test/quick/${name} runs one shard`);
      assert.match(
        text,
        new RegExp(`^await runShard\\(${i + 1}, ${count}\\);$`, 'm'),
        `test/quick/${name} runs shard ${i + 1} of ${count}`,
      );
    });
    const sharded = Array.from({ length: count }, (_, i) => shardOf(i + 1, count)).flat();
    assert.deepEqual([...sharded].sort(), quickSuites().sort(), 'every quick suite in exactly one shard');
    const nested = readdirSync(TEST, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith('.test.ts'))
      .map((e) => join(e.parentPath, e.name).slice(TEST.length + 1))
      .filter((path) => path.includes('/') && !/^system\/[^/]+$/.test(path));
    assert.deepEqual(nested, [], 'no suite outside test/ and test/system/ (neither command would run it)');
  });
});
