// The proof of issue 19, point 8: real third-party MCP servers with their own OAuth servers, each
// behind the broker as an `auth: mcp` upstream, complete connect → tools/list → tools/call. The
// person's side is the broker's pages and the upstream's authorization server over plain HTTP (the
// dev IdP signs the person in to the broker); the assistant's side is the official SDK client.
//   - The TypeScript SDK's example server (`@modelcontextprotocol/sdk`, examples/server/
//     simpleStreamableHttp.js --oauth: the SDK's auth router over an in-memory demo provider).
//   - FastMCP with its InMemoryOAuthProvider (the Python `mcp` SDK's authorization server, which
//     refuses scopes the client did not register), installed by pip into a venv in the test's own
//     temporary directory; skipped with the reason where pip cannot install it.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { Browser, textOf } from '../support/browser.js';
import { LOOPBACK_ONLY } from '../support/everything.js';
import { providersFile } from '../support/gateway.js';
import { freePort } from '../support/idp.js';
import { startUpstreamConnect } from '../support/mcp-auth-connect.js';
import { legacyClient, modernClient, resultText } from '../support/mcp.js';
import { startStack, type Stack } from '../support/stack.js';
import { makeTempDir } from '../support/temp-dir.js';
import { pythonWith, startThirdPartyServer, type ThirdPartyServer } from '../support/third-party-server.js';

const SDK_EXAMPLE = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js', import.meta.url),
);
const FASTMCP_SERVER = fileURLToPath(new URL('../fixtures/fastmcp-oauth-server.py', import.meta.url));

/** The broker with `upstream` as an `auth: mcp` upstream (its discovered addresses are loopback: allowed). */
async function brokerFor(id: string, displayName: string, url: string): Promise<{ stack: Stack; close(): Promise<void> }> {
  const file = providersFile({ upstreams: [{ id, url, auth: 'mcp', displayName }] });
  try {
    const stack = await startStack({ env: { PROVIDERS_FILE: file.path, EGRESS_ALLOW: '127.0.0.1,::1,localhost' } });
    return {
      stack,
      close: async () => {
        await stack.close();
        file.remove();
      },
    };
  } catch (err) {
    file.remove();
    throw err;
  }
}

/**
 * The person connects the upstream from /connections: consent on the broker's page, then the
 * upstream's authorization server (which asks nobody to sign in) sends the browser back.
 */
async function connect(stack: Stack, server: ThirdPartyServer, user: string, provider: { id: string; displayName: string }) {
  const done = await startUpstreamConnect(new Browser(), stack, user, provider);
  assert.equal(done.status, 200, `${textOf(done.html)}\n${done.trail.join(' -> ')}\n${server.output()}`);
  assert.match(textOf(done.html), new RegExp(`Connected to ${provider.displayName}|Connected as`));
}

describe('third-party MCP servers with their own OAuth server, as auth: mcp upstreams', () => {
  it(
    'the TypeScript SDK example server (--oauth): connect, list and call through the gateway',
    { skip: existsSync(SDK_EXAMPLE) ? false : `the TypeScript SDK's example server is not shipped in node_modules (${SDK_EXAMPLE})` },
    async () => {
      const [mcpPort, authPort] = [await freePort(), await freePort()];
      // The example names itself http://localhost:<port> (its resource and issuer), so the operator configures that URL.
      const url = `http://localhost:${mcpPort}/mcp`;
      const server = await startThirdPartyServer({
        name: 'the SDK example server',
        command: process.execPath,
        args: [`--import=data:text/javascript,${encodeURIComponent(LOOPBACK_ONLY)}`, SDK_EXAMPLE, '--oauth'],
        env: { MCP_PORT: String(mcpPort), MCP_AUTH_PORT: String(authPort) },
        url,
      });
      const broker = await brokerFor('sdkdemo', 'SDK Demo', url).catch(async (err: unknown) => {
        await server.close();
        throw err;
      });
      try {
        await connect(broker.stack, server, 'tess', { id: 'sdkdemo', displayName: 'SDK Demo' });
        const client = await modernClient({ url: broker.stack.mcpUrl, token: await broker.stack.token('tess') });
        try {
          const names = (await client.listTools()).tools.map((t) => t.name);
          assert.ok(names.includes('sdkdemo_greet'), names.join(', '));
          const result = await client.callTool({ name: 'sdkdemo_greet', arguments: { name: 'the broker' } });
          assert.equal(result.isError, undefined, resultText(result));
          assert.match(resultText(result), /Hello, the broker!/);
        } finally {
          await client.close();
        }
      } finally {
        await broker.close();
        await server.close();
      }
    },
  );

  it('FastMCP with its in-memory OAuth server: registers its scopes, connects, lists and calls through the gateway', async (t) => {
    // Installing FastMCP takes a minute or two: the inner loop leaves it to npm test.
    if (process.env.TEST_QUICK === '1') return t.skip('TEST_QUICK=1 (npm run test:quick): FastMCP is installed and run in npm test');
    const dir = makeTempDir('fastmcp-');
    try {
      const py = pythonWith(dir.path, ['fastmcp==4.0.10', 'mcp==2.3.0']);
      if ('skip' in py) return t.skip(py.skip);
      const port = await freePort();
      const url = `http://127.0.0.1:${port}/mcp`;
      const server = await startThirdPartyServer({
        name: 'FastMCP',
        command: py.python,
        args: [FASTMCP_SERVER],
        env: { PORT: String(port), HOME: dir.path },
        url,
        startTimeoutMs: 60_000,
      });
      const broker = await brokerFor('notes', 'Notes', url).catch(async (err: unknown) => {
        await server.close();
        throw err;
      });
      try {
        await connect(broker.stack, server, 'uma', { id: 'notes', displayName: 'Notes' });
        // A 2025-11-25 client and a 2026-07-28 client alike.
        for (const client of [
          await legacyClient({ url: broker.stack.mcpUrl, token: await broker.stack.token('uma') }),
          await modernClient({ url: broker.stack.mcpUrl, token: await broker.stack.token('uma') }),
        ])
          try {
            const names = (await client.listTools()).tools.map((tool) => tool.name).filter((n) => n.startsWith('notes_'));
            assert.deepEqual(names.sort(), ['notes_add', 'notes_shout']);
            const sum = await client.callTool({ name: 'notes_add', arguments: { a: 2, b: 40 } });
            assert.notEqual(sum.isError, true, resultText(sum));
            assert.equal(resultText(sum), '42');
            const shout = await client.callTool({ name: 'notes_shout', arguments: { text: 'through the gateway' } });
            assert.equal(resultText(shout), 'THROUGH THE GATEWAY');
          } finally {
            await client.close();
          }
      } finally {
        await broker.close();
        await server.close();
      }
    } finally {
      dir.close();
    }
  });
});
