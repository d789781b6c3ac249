// The split between the inner loop and the whole run: `npm run test:quick` runs test/*.test.ts,
// in-process only; suites that start Chromium, PostgreSQL clusters, broker processes or `npm ci`
// live in test/system/ and run only in `npm test`.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

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

  it('are exactly what npm run test:quick runs, with TEST_QUICK=1; npm test runs them and test/system/', () => {
    const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    assert.match(scripts['test:quick']!, /^TEST_QUICK=1 node --import tsx --test .*\btest\/\*\.test\.ts$/);
    assert.match(scripts.test!, /^npm run typecheck && node --import tsx --test .*\btest\/\*\.test\.ts test\/system\/\*\.test\.ts$/);
    const nested = readdirSync(TEST, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith('.test.ts'))
      .map((e) => join(e.parentPath, e.name).slice(TEST.length + 1))
      .filter((path) => path.includes('/') && !/^system\/[^/]+$/.test(path));
    assert.deepEqual(nested, [], 'no suite outside test/ and test/system/ (neither command would run it)');
  });
});
