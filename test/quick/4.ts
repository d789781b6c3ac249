// Shard 4 of 4 of the quick suites (test/support/quick-shard.ts says why they share a process).
import { runShard } from '../support/quick-shard.js';

await runShard(4, 4);
