// An MCP client that keeps every URL it was asked to open, for suites that count elicitations
// (none after a restart, exactly one to connect), and the answer that walks the connect flow.
import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/client';
import { textOf, type Browser } from './browser.js';
import { modernClient, type ElicitAnswer } from './mcp.js';
import { completeConnect } from './stack.js';

type UrlAnswer = (url: string) => Promise<ElicitAnswer>;

/**
 * The 2026-07-28 SDK client (`modernClient`) on `<brokerUrl>/mcp` as `token`. Each URL elicitation
 * is added to `elicited`, in order, then answered by `answer` (a decline by default).
 */
export async function recordingClient(
  brokerUrl: string,
  token: string,
  answer: UrlAnswer = async () => ({ action: 'decline' }),
): Promise<{ client: Client; elicited: string[] }> {
  const elicited: string[] = [];
  const client = await modernClient({
    url: `${brokerUrl}/mcp`,
    token,
    onUrl: async (url) => {
      elicited.push(url);
      return answer(url);
    },
  });
  return { client, elicited };
}

/** The answer of a user who connects: the flow walked in `browser` as `sub` (GitHub login `githubLogin`), its page checked, then accept. */
export function connectsIn(browser: Browser, sub: string, githubLogin = 'octocat'): UrlAnswer {
  return async (url) => {
    const page = await completeConnect(browser, url, sub, { githubLogin });
    assert.match(textOf(page.html), new RegExp(`Connected as @${githubLogin}`), `${sub} completes the connect flow`);
    return { action: 'accept' };
  };
}
