// An oversized body on /mcp is answered with the 413 JSON-RPC error that ordinary clients can read:
// fetch (undici) in another process, with the body declared or streamed, gets the answer, not a
// socket error. The client runs in its own process because in this one it shares the event loop
// with the broker, which hides the race the answer must survive. (What the broker reads of such a
// body after its answer is bounded: test/oversized-body.test.ts.)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runNode } from '../support/node-process.js';
import { useStack } from '../support/suite.js';

/** Posts a 6 MB JSON-RPC body to `url` `times` times declared and `times` times streamed, from a child process; prints what each got. */
const CLIENT = `
const [url, token, times] = process.argv.slice(1);
const headers = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  authorization: 'Bearer ' + token,
  'mcp-protocol-version': '2026-07-28',
  'mcp-method': 'tools/list',
};
const size = 6 * 1024 * 1024;
const outcomes = [];
for (let i = 0; i < Number(times); i++) {
  for (const mode of ['declared', 'streamed']) {
    const body =
      mode === 'declared'
        ? JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { pad: 'x'.repeat(size) } })
        : new ReadableStream({
            start(c) {
              for (let k = 0; k < size / 65536; k++) c.enqueue(new Uint8Array(65536).fill(0x20));
              c.close();
            },
          });
    try {
      const res = await fetch(url, { method: 'POST', headers, body, duplex: 'half' });
      outcomes.push({ mode, status: res.status, text: await res.text() });
    } catch (err) {
      outcomes.push({ mode, error: String(err.cause?.code ?? err.message) });
    }
  }
}
console.log(JSON.stringify(outcomes));
`;

describe('an oversized body on /mcp', () => {
  const stack = useStack();

  it('answers a 6 MB body from fetch in another process with the 413 JSON-RPC error, declared or streamed, never a socket error', async () => {
    const run = await runNode(
      ['--input-type=module', '-e', CLIENT, stack.mcpUrl, await stack.token('alice'), '4'],
      { PATH: process.env.PATH ?? '' },
      { timeoutMs: 120_000 },
    );
    assert.equal(run.code, 0, run.stderr);
    const outcomes = JSON.parse(run.stdout) as Array<{ mode: string; status?: number; text?: string; error?: string }>;
    assert.equal(outcomes.length, 8);
    for (const o of outcomes) {
      assert.equal(o.status, 413, JSON.stringify(o));
      const json = JSON.parse(o.text!) as { jsonrpc: string; error: { code: number; message: string } };
      assert.equal(json.jsonrpc, '2.0');
      assert.equal(json.error.code, -32600);
      assert.match(json.error.message, /too large/);
    }
  });
});
