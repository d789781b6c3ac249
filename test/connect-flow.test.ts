import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Browser, textOf } from './support/browser.js';
import { resultText } from './support/mcp.js';
import { completeConnect } from './support/stack.js';
import { assertFirstIssueCreated } from './support/github-checks.js';
import { clientAs, useStack } from './support/suite.js';

describe('the connect flow, end to end with a 2026-07-28 client', () => {
  const stack = useStack();

  it('elicits our /connect page, connects GitHub in the browser, and the repeated call creates the issue', async () => {
    const browser = new Browser();
    const seen: Array<{ url: string; message: string }> = [];
    let finalPage = '';
    const client = await clientAs(stack, 'alice', {
      onUrl: async (url, message) => {
        seen.push({ url, message });
        const page = await completeConnect(browser, url, 'alice');
        finalPage = textOf(page.html);
        return { action: 'accept' };
      },
    });
    const result = await client.callTool({
      name: 'github_create_issue',
      arguments: { owner: 'octo-org', repo: 'hello', title: 'It works', body: 'Filed through the broker' },
    });
    await client.close();

    assert.equal(seen.length, 1, 'exactly one elicitation');
    const link = new URL(seen[0]!.url);
    assert.equal(link.origin, stack.publicUrl, 'the link is on our own origin');
    assert.equal(link.pathname, '/connect/github');
    assert.deepEqual([...link.searchParams.keys()], ['req']);
    assert.match(finalPage, /Connected as @octocat/);

    assert.equal(result.isError, undefined);
    assert.match(resultText(result), /Created issue #1 in octo-org\/hello/);
    assertFirstIssueCreated(stack.github, result.structuredContent);
  });
});
