import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { startEverything, type EverythingServer } from '../support/everything.js';
import { comparable, providersFile } from '../support/gateway.js';
import { legacyClient, modernClient, resultText } from '../support/mcp.js';
import { startStack, type Stack } from '../support/stack.js';

/** server-everything's tools that need no client feature (sampling, elicitation, roots), with arguments. */
const CALLS: Array<[string, Record<string, unknown>]> = [
  ['echo', { message: 'hello through the gateway' }],
  ['get-annotated-message', { messageType: 'success', includeImage: true }],
  ['get-annotated-message', { messageType: 'error' }],
  ['get-env', {}],
  ['get-resource-links', { count: 4 }],
  ['get-resource-reference', { resourceType: 'Text', resourceId: 2 }],
  ['get-resource-reference', { resourceType: 'Blob', resourceId: 3 }],
  ['get-structured-content', { location: 'Chicago' }],
  ['get-sum', { a: 2, b: 40 }],
  ['get-tiny-image', {}],
  ['toggle-simulated-logging', {}],
  ['toggle-subscriber-updates', {}],
  ['trigger-long-running-operation', { duration: 0.2, steps: 2 }],
];

describe('gateway: @modelcontextprotocol/server-everything (2025-11-25, Streamable HTTP) as an auth: none upstream', () => {
  let everything: EverythingServer;
  let url: string;
  let stack: Stack;
  let file: { path: string; remove(): void };
  let direct: Client;

  before(async () => {
    everything = await startEverything();
    url = everything.url;
    file = providersFile({ upstreams: [{ id: 'everything', url, auth: 'none' }] });
    stack = await startStack({ env: { PROVIDERS_FILE: file.path } });
    // Declaring what the broker declares to a 2025-11-25 upstream (elicitation, always declined):
    // server-everything lists its elicitation tools only to clients that declare it.
    direct = new Client({ name: 'direct-client', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } } });
    direct.setRequestHandler('elicitation/create', async () => ({ action: 'decline' as const }));
    await direct.connect(new StreamableHTTPClientTransport(new URL(url)));
  });
  after(async () => {
    await direct?.close();
    await stack?.close();
    file?.remove();
    await everything?.close();
  });

  it('lists its tools through the broker, prefixed, each definition as the server lists it', async () => {
    const { tools: upstream } = await direct.listTools();
    // The same client, the same era (2025-11-25) on both paths: the broker's listing is compared as that client reads it.
    const client = await legacyClient({ url: stack.mcpUrl, token: await stack.token('ev-list') });
    try {
      const { tools } = await client.listTools();
      const mine = tools.filter((t) => t.name.startsWith('everything_'));
      assert.deepEqual(
        mine.map((t) => ({ ...t, name: t.name.slice('everything_'.length) })),
        upstream,
      );
      assert.ok(mine.length >= CALLS.length);
    } finally {
      await client.close();
    }
    const modern = await modernClient({ url: stack.mcpUrl, token: await stack.token('ev-list') });
    try {
      const names = (await modern.listTools()).tools.map((t) => t.name).filter((n) => n.startsWith('everything_'));
      assert.deepEqual(
        names,
        upstream.map((t) => `everything_${t.name}`),
        'a 2026-07-28 client of the broker sees the same tools',
      );
    } finally {
      await modern.close();
    }
  });

  it('answers every tool that needs no client feature exactly as the server answers the same client directly', async () => {
    for (const client of [
      await legacyClient({ url: stack.mcpUrl, token: await stack.token('ev-call') }),
      await modernClient({ url: stack.mcpUrl, token: await stack.token('ev-call') }),
    ])
      try {
        for (const [name, args] of CALLS) {
          const expected = await direct.callTool({ name, arguments: args });
          // Its resources carry the time of day they were made: let the clock tick past a second, every time.
          if (name === 'get-resource-reference') await sleep(1100);
          const got = await client.callTool({ name: `everything_${name}`, arguments: args });
          assert.deepEqual(sessionless(got), sessionless(expected), `${name} (${client.getProtocolEra()} client)`);
        }
      } finally {
        await client.close();
      }
  });
});

describe('gateway: server-everything asking for input mid-call', () => {
  it('is answered by the broker with decline, and the client gets a clear tool error naming the upstream', async () => {
    const everything = await startEverything();
    const file = providersFile({ upstreams: [{ id: 'everything', url: everything.url, auth: 'none' }] });
    let stack: Stack | undefined;
    try {
      stack = await startStack({ env: { PROVIDERS_FILE: file.path } });
      const client = await modernClient({ url: stack.mcpUrl, token: await stack.token('ev-ask') });
      try {
        const result = await client.callTool({ name: 'everything_trigger-elicitation-request', arguments: {} });
        assert.equal(result.isError, true);
        assert.match(resultText(result), /"everything" asked for input mid-call, which this broker cannot relay to your client yet/);
      } finally {
        await client.close();
      }
    } finally {
      await stack?.close();
      file.remove();
      await everything.close();
    }
  });
});

/**
 * The result compared: protocol `_meta` aside, the upstream session id that the two toggles name
 * (each path has its own session), and the time of day server-everything writes into the resources
 * it makes on each call ("… created at 7:41:02 AM", in text and in base64 blobs): the direct call and
 * the one through the broker are made one after the other, so a second can tick between them.
 */
function sessionless(result: unknown): unknown {
  const text = JSON.stringify(comparable(result as Record<string, unknown>));
  return untimed(JSON.parse(text.replace(/session [0-9a-f-]{36}/g, 'session <id>')));
}

const CREATED_AT = / created at [^"]*$/;

function untimed(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(untimed);
  if (!value || typeof value !== 'object') return typeof value === 'string' ? value.replace(CREATED_AT, ' created at <time>') : value;
  const entries = Object.entries(value).map(([key, v]) => {
    if (key === 'blob' && typeof v === 'string') {
      const decoded = Buffer.from(v, 'base64').toString('utf8');
      if (CREATED_AT.test(decoded)) return [key, decoded.replace(CREATED_AT, ' created at <time>')];
    }
    return [key, untimed(v)];
  });
  return Object.fromEntries(entries);
}
