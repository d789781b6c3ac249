// Measures how long each quick suite takes alone and writes quick-seconds.json, which
// quick-shard.ts balances the shards of `npm run test:quick` with. Run it on a quiet machine after
// adding a suite or making one much slower or faster:
//   node --import tsx test/support/quick-seconds.ts
// (A suite not in the file yet is costed by its size meanwhile, so forgetting only unbalances.)
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { quickSuites } from './quick-shard.js';

const TEST = join(import.meta.dirname, '..');
const seconds: Record<string, number> = {};
for (const name of quickSuites()) {
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', join(TEST, name)], {
    env: { ...process.env, TEST_QUICK: '1' },
    encoding: 'utf8',
  });
  const ms = /^ℹ duration_ms ([\d.]+)$/m.exec(run.stdout)?.[1];
  if (run.status !== 0 || !ms) throw new Error(`test/${name} did not pass alone (exit ${run.status}): measure on a passing tree`);
  seconds[name] = Math.round(Number(ms) / 100) / 10;
  process.stdout.write(`${name} ${seconds[name]} s\n`);
}
writeFileSync(join(import.meta.dirname, 'quick-seconds.json'), `${JSON.stringify(seconds, null, 2)}\n`);
