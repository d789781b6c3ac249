// The baseline for `npm run bench`: a bare @modelcontextprotocol/server stateless handler with one
// trivial tool and no auth, served the way the broker serves its own (Express 5 and the broker's
// web adapter, src/http/web-adapter.ts, without the bearer check and the call scope). Whatever the
// broker costs beyond this is its own: token verification, the store, decryption, its tools.
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import express from 'express';
import { readBody, sendWebResponse, toWebRequest } from '../../src/http/web-adapter.js';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';

const MAX_BODY_BYTES = 1024 * 1024;

const handler = createMcpHandler(
  () => {
    const server = new McpServer({ name: 'bench-baseline', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.registerTool('ping', { description: 'Answers pong.', inputSchema: z.object({}) }, () => ({
      content: [{ type: 'text', text: 'pong' }],
    }));
    return server;
  },
  { onerror: (err) => process.stderr.write(`${JSON.stringify({ event: 'mcp_handler_error', message: err.message })}\n`) },
);

const app = express();
app.disable('x-powered-by');
let base = 'http://127.0.0.1';
app.all('/mcp', async (req, res) => {
  let body: string | undefined;
  let parsed: unknown;
  if (req.method === 'POST') {
    if (!/^application\/json\b/i.test(req.headers['content-type'] ?? ''))
      return void res.status(415).json({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Unsupported Media Type' } });
    try {
      body = (await readBody(req, MAX_BODY_BYTES)).toString('utf8');
    } catch {
      return void res.status(413).json({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Request body too large' } });
    }
    try {
      parsed = JSON.parse(body);
    } catch {
      return void res.status(400).json({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
    }
  }
  const response = await handler.fetch(toWebRequest(req, res, base, body), parsed !== undefined ? { parsedBody: parsed } : {});
  await sendWebResponse(res, response);
});

const server = app.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  base = `http://127.0.0.1:${port}`;
  server.keepAliveTimeout = 65_000;
  process.stderr.write(`${JSON.stringify({ event: 'listening', url: base })}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close(() => void handler.close().finally(() => process.exit(0)));
    server.closeAllConnections();
  });
}
