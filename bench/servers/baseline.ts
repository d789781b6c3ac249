// The baseline for `npm run bench`: a bare @modelcontextprotocol/server stateless handler with one
// trivial tool and no auth, served the way the broker serves its own (Express 5 and the broker's
// web adapter, src/http/web-adapter.ts, without the bearer check and the call scope). Whatever the
// broker costs beyond this is its own: token verification, the store, decryption, its tools.
//
// With GITHUB_API_URL and BASELINE_GITHUB_TOKEN set it also has `github_whoami`, which makes the
// call the broker's tool makes (GET /user at the GitHub stand-in, the same headers, Node's global
// fetch with the same timeout and redirect handling, the same JSON checks and result shape) with
// one fixed token: the fair baseline for the broker's `github_whoami`, whose extra cost is then
// the token, the store, decryption and the gate, not the upstream call.
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import express from 'express';
import { readBody, sendWebResponse, toWebRequest } from '../../src/http/web-adapter.js';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';

const MAX_BODY_BYTES = 1024 * 1024;
const GITHUB_API = process.env.GITHUB_API_URL ? new URL(`${process.env.GITHUB_API_URL.replace(/\/$/, '')}/user`) : undefined;
const GITHUB_TOKEN = process.env.BASELINE_GITHUB_TOKEN;

const whoamiOutput = z.object({
  status: z.enum(['connected', 'not_connected']),
  login: z.string().optional(),
  id: z.string().optional(),
  reason: z.string().optional(),
});

/** GET /user as `GitHubApi.user` (src/providers/github/api.ts) sends it, with the fixed token. */
async function whoami(url: URL, token: string): Promise<{ login: string; id: string }> {
  const response = await fetch(url, {
    method: 'GET',
    headers: {
      accept: 'application/vnd.github+json',
      'x-github-api-version': '2022-11-28',
      'user-agent': 'bench-baseline',
      authorization: `Bearer ${token}`,
    },
    signal: AbortSignal.timeout(10_000),
    redirect: 'manual',
  });
  const body = JSON.parse(await response.text()) as { login?: unknown; id?: unknown };
  if (!response.ok || typeof body.login !== 'string' || (typeof body.id !== 'number' && typeof body.id !== 'string'))
    throw new Error(`GitHub stand-in answered ${response.status}`);
  return { login: body.login, id: String(body.id) };
}

const handler = createMcpHandler(
  () => {
    const server = new McpServer({ name: 'bench-baseline', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.registerTool('ping', { description: 'Answers pong.', inputSchema: z.object({}) }, () => ({
      content: [{ type: 'text', text: 'pong' }],
    }));
    if (GITHUB_API && GITHUB_TOKEN)
      server.registerTool(
        'github_whoami',
        { description: 'Which GitHub account the fixed token is.', inputSchema: z.object({}), outputSchema: whoamiOutput },
        async () => {
          const account = await whoami(GITHUB_API, GITHUB_TOKEN);
          return {
            content: [{ type: 'text', text: `The GitHub account is @${account.login} (id ${account.id}).` }],
            structuredContent: { status: 'connected' as const, login: account.login, id: account.id },
          };
        },
      );
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
