// What the broker reads of an oversized /mcp body after its 413 answer is bounded in bytes and in
// time, so a client cannot keep it reading. (That fetch in another process gets the answer, not a
// socket error: test/system/oversized-body-fetch.test.ts.)
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { describe, it, before, after } from 'node:test';
import express from 'express';
import { readJsonRpcBody } from '../src/mcp/endpoint.js';
import { listenLoopback, type Listening } from './support/listen.js';

describe('what is read of a refused body after its answer', () => {
  const LIMIT = 1024;
  const DISCARD = { bytes: 256 * 1024, ms: 500 };
  let server: Listening;
  before(async () => {
    const app = express();
    app.post('/mcp', async (req, res) => {
      const read = await readJsonRpcBody(req, res, LIMIT, DISCARD);
      if (read) res.json({ ok: true });
    });
    server = await listenLoopback(app);
  });
  after(() => server?.close());

  /** Opens a raw connection and sends a POST head declaring `length` bytes of JSON. */
  const open = async (length: number): Promise<{ socket: Socket; answer: Promise<string>; closed: Promise<void> }> => {
    const socket = connect(server.port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.on('error', () => {}); // a reset is what some of these expect
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`);
    return { socket, answer: closed.then(() => answer), closed };
  };

  it('answers at once, reads the rest of a body within the bound and then closes the connection cleanly', async () => {
    const rest = LIMIT * 8;
    const { socket, answer } = await open(LIMIT + rest);
    socket.write(Buffer.alloc(LIMIT + rest, 0x20));
    const text = await answer;
    assert.match(text, /^HTTP\/1\.1 413 /);
    assert.match(text, /connection: close/i);
    assert.match(text, /"code":-32600/);
  });

  it('cuts a client that goes on sending past the bound in bytes', async () => {
    const { socket, closed } = await open(1024 * 1024 * 1024);
    let isClosed = false;
    void closed.then(() => (isClosed = true));
    // Far more than the bound plus what socket buffers hold: a broker that read on would take it all.
    const most = 256 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    while (!isClosed && sent < most) {
      sent += chunk.length;
      if (!socket.write(chunk)) await Promise.race([closed, new Promise((resolve) => socket.once('drain', resolve))]);
    }
    socket.destroy();
    assert.ok(isClosed && sent < most, `the broker took ${sent} bytes and did not cut the connection`);
  });

  it('cuts a client that stalls mid-body once the bound in time has passed', async () => {
    const { socket, closed, answer } = await open(LIMIT * 4);
    socket.write(Buffer.alloc(LIMIT + 10, 0x20)); // over the limit, then nothing more
    // Loose: the bound is half a second, the test waits up to 20 s for the close.
    const timeout = new Promise<'still open'>((resolve) => setTimeout(() => resolve('still open'), 20_000).unref());
    const outcome = await Promise.race([closed, timeout]);
    socket.destroy();
    assert.notEqual(outcome, 'still open', 'the broker kept waiting for the rest of the body');
    assert.match(await answer, /^HTTP\/1\.1 413 /);
  });
});
