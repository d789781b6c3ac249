import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Browser } from './support/browser.js';
import { startStack, type Stack } from './support/stack.js';

describe('rate limits on the browser routes', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ env: { RATE_LIMIT_PER_MINUTE: '5' } });
  });
  after(() => stack.close());

  for (const [route, path] of [
    ['sign-in', '/auth/login'],
    ['connect', '/connect/github?req=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
    ['callback', '/connect/github/callback?code=x&state=y'],
  ] as const) {
    it(`answers the ${route} route with 429 and Retry-After once a client exceeds the limit`, async () => {
      const browser = new Browser();
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        const res = await browser.request(`${stack.publicUrl}${path}`);
        statuses.push(res.status);
        if (res.status === 429) {
          assert.equal(res.headers.get('retry-after'), '60');
          assert.match(await res.text(), /Too many requests/);
        } else await res.body?.cancel();
      }
      assert.equal(statuses.filter((s) => s !== 429).length, 5, `first five pass: ${statuses.join(',')}`);
      assert.equal(statuses[5], 429);
    });
  }

  it('keeps separate budgets per route group, so exhausting one leaves the MCP endpoint and /connections alone', async () => {
    const res = await fetch(`${stack.publicUrl}/connections`, { redirect: 'manual' });
    assert.equal(res.status, 303);
    const mcp = await fetch(stack.mcpUrl, { method: 'POST' });
    assert.equal(mcp.status, 401);
  });
});
