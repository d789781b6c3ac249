// The refresh lease across broker processes (test/token-refresh.test.ts has the in-process cases).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createIssues, GITHUB_APP, seedExpired } from '../support/expiring-tokens.js';
import { freePort } from '../support/idp.js';
import { readConnection } from '../support/seed.js';
import { useMultiStack } from '../support/multi.js';

describe('expiring GitHub App tokens across two processes on one database', () => {
  const multi = useMultiStack({ standIn: GITHUB_APP.standIn, env: GITHUB_APP.env });

  it('refreshes exactly once for 50 concurrent calls split over two processes, and all 50 succeed', async () => {
    const a = await multi.spawn();
    const b = await multi.spawn(await freePort());
    await seedExpired(multi.envFor(), multi.github, 'dave', 'octocat');
    const token = await multi.token('dave');
    const [ra, rb] = await Promise.all([createIssues(`${a.url}/mcp`, token, 25, 'A'), createIssues(`${b.url}/mcp`, token, 25, 'B')]);
    const all = [...ra, ...rb];
    assert.equal(all.filter((r) => r.json?.result?.structuredContent?.status === 'created').length, 50, all.map((r) => r.status).join(','));
    assert.equal(multi.github.refreshCount, 1);
    assert.equal((await readConnection(multi.envFor(), 'dave', 'github'))?.status, 'active');
  });
});
