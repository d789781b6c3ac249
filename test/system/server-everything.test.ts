// The server-everything fixture (test/support/everything.ts): the real third-party server runs,
// answers the official client in 2025-11-25 mode, listens on loopback only, says why when it cannot
// start, and is gone after close().
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { startEverything, type EverythingServer } from '../support/everything.js';
import { resultText } from '../support/mcp.js';

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('the server-everything fixture', () => {
  let server: EverythingServer;
  const clients: Client[] = [];
  before(async () => {
    server = await startEverything();
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await server.close();
  });

  it('lists its tools and answers a call through the official client in 2025-11-25 mode', async () => {
    const client = new Client({ name: 'fixture-check', version: '1.0.0' });
    clients.push(client);
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
    assert.equal(client.getProtocolEra(), 'legacy');
    assert.equal(client.getNegotiatedProtocolVersion(), '2025-11-25');
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const expected of ['echo', 'get-sum', 'get-tiny-image']) assert.ok(names.includes(expected), `${expected} in ${names.join(', ')}`);
    assert.equal(resultText(await client.callTool({ name: 'echo', arguments: { message: 'hello' } })), 'Echo: hello');
    assert.match(server.stdout(), /Received MCP POST request/, 'its output is captured');
  });

  it('listens on 127.0.0.1 only', async () => {
    const elsewhere = [
      '[::1]',
      ...Object.values(networkInterfaces())
        .flat()
        .filter((a) => a && !a.internal && a.family === 'IPv4')
        .map((a) => a!.address),
    ];
    for (const host of elsewhere) {
      await assert.rejects(fetch(`http://${host}:${server.port}/mcp`, { signal: AbortSignal.timeout(2000) }), `not reachable at ${host}`);
    }
    assert.equal((await fetch(server.url)).status, 400, 'a GET without a session, on loopback');
  });

  it('says why, with its stderr, when it cannot start', async () => {
    await assert.rejects(
      startEverything({ env: { NODE_OPTIONS: '--require=/nonexistent/preload.cjs' }, startTimeoutMs: 10_000 }),
      (err: Error) => /exited \(\d+\) before answering/.test(err.message) && /Cannot find module/.test(err.message),
    );
  });

  it('ends its process on close', async () => {
    const own = await startEverything();
    assert.ok(alive(own.pid));
    await own.close();
    assert.equal(alive(own.pid), false);
    await assert.rejects(fetch(own.url, { signal: AbortSignal.timeout(2000) }));
  });
});
