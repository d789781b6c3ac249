// The requests the bench sends: raw 2026-07-28 tools/call POSTs with the headers and `_meta`
// envelope of `rawCall` / `envelope` in test/support/mcp.ts, and the checks on their answers.
import { envelope, rawCall } from '../../test/support/mcp.js';

/** Headers of a 2026-07-28 tools/call, as `rawCall` in test/support/mcp.ts sends them. */
export function callHeaders(tool: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/call',
    'mcp-name': tool,
  };
}

/** A tools/call without arguments from a client that declares URL and form elicitation. */
export function callBody(tool: string): string {
  return JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: {}, _meta: envelope() } });
}

export type Reply = Awaited<ReturnType<typeof rawCall>>;

/** What the bench reads of a complete result: the logins of `github_whoami` and `list_connections`. */
export interface CompleteResult {
  structuredContent: { login?: string; connections?: { login?: string }[] };
}

export function firstCall(url: string, token: string, tool = 'github_whoami'): Promise<Reply> {
  return rawCall(`${url}/mcp`, token, { method: 'tools/call', params: { name: tool, arguments: {}, _meta: envelope() } });
}

export function repeatCall(url: string, token: string, requestState: string, tool = 'github_whoami'): Promise<Reply> {
  return rawCall(`${url}/mcp`, token, {
    id: 2,
    method: 'tools/call',
    params: { name: tool, arguments: {}, inputResponses: { connect_account: { action: 'accept' } }, requestState, _meta: envelope() },
  });
}

export function connectRequest(reply: Reply): { link: string; requestState: string } {
  const result = reply.json?.result;
  if (reply.status !== 200 || result?.resultType !== 'input_required')
    throw new Error(`expected input_required, got ${reply.status} ${reply.text.slice(0, 300)}`);
  return { link: result.inputRequests.connect_account.params.url as string, requestState: result.requestState as string };
}

export function expectComplete(reply: Reply, what: string): CompleteResult {
  const result = reply.json?.result;
  if (reply.status !== 200 || result?.resultType !== 'complete' || result.isError)
    throw new Error(`${what}: expected a complete result, got ${reply.status} ${reply.text.slice(0, 300)}`);
  return result as CompleteResult;
}

/** Runs `fn` over `items` with at most `limit` in flight. */
export async function pool<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}
