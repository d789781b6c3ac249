// Nested MRTR (issue 13, "the upstream asks too"): a 2026-07-28 upstream answers a tools/call with
// input_required; the broker relays its inputRequests unchanged and carries its requestState sealed
// inside our own (src/gateway/relay/). Real parts: the test IdP and the broker's own /mcp endpoint
// code (token verification, call scope), a real McpServer + createMcpHandler with a test tool that
// forwards through the relay functions to a real upstream McpServer (its own HMAC requestState),
// and the official 2026-07-28 client driving each round by hand.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { Client, ProtocolError, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import {
  createMcpHandler,
  createRequestStateCodec,
  inputRequired,
  isInputRequiredResult,
  McpServer,
  type InputRequests,
  type InputRequiredResult,
  type McpHttpHandler,
  type ServerContext,
} from '@modelcontextprotocol/server';
import express from 'express';
import * as z from 'zod/v4';
import { AccessTokenVerifier } from '../src/auth/bearer.js';
import { OidcClient } from '../src/auth/oidc-client.js';
import { readRelayedRepeat, relayInputRequired, type RelayDeps } from '../src/gateway/relay/relay.js';
import { MAX_UPSTREAM_STATE_BYTES, UpstreamStateRefused, UpstreamStates, verifyToolState } from '../src/gateway/relay/upstream-state.js';
import { readBody, sendWebResponse, toWebRequest } from '../src/http/web-adapter.js';
import { createLogger } from '../src/log.js';
import { mcpEndpoint } from '../src/mcp/endpoint.js';
import { createToolStateCodec } from '../src/mcp/request-state.js';
import { startIdp, type StartedIdp } from './support/idp.js';
import { bindLoopback, portOf } from './support/listen.js';

/** What the upstream asks before deleting: a form with unusual but valid parts, to compare byte for byte. */
const CONFIRM_REQUESTS = {
  confirm: inputRequired.elicit({
    message: 'Delete acme/widgets for good? Type the repository name — «widgets» — to confirm.',
    requestedSchema: {
      type: 'object',
      properties: {
        name: { type: 'string', title: 'Repository name', description: 'exactly as shown', minLength: 1, maxLength: 100 },
        reason: { type: 'string', enum: ['cleanup', 'mistake', 'other'], default: 'cleanup' },
      },
      required: ['name'],
    },
  }),
} satisfies InputRequests;

/** The second round's request: a form with a vendor `_meta` key, relayed like everything else. */
const OTP_REQUESTS = {
  otp: {
    method: 'elicitation/create',
    params: {
      mode: 'form',
      message: 'Enter the one-time code from your authenticator.',
      requestedSchema: { type: 'object', properties: { code: { type: 'string', minLength: 6, maxLength: 6 } }, required: ['code'] },
      _meta: { 'example.com/step': 2 },
    },
  },
} satisfies InputRequests;

interface UpstreamRecord {
  /** requestState strings the upstream minted, in order. */
  minted: string[];
  /** requestState strings it received back, byte-exact. */
  received: string[];
  /** inputResponses it received on repeats. */
  responses: unknown[];
  /** Bearer headers it saw (none: auth is the forwarder's business, not the relay's). */
  calls: number;
}

/** A small real 2026-07-28 MCP server that confirms delete_repository with its own input_required. */
async function startUpstream(): Promise<{ url: string; record: UpstreamRecord; close(): Promise<void> }> {
  const record: UpstreamRecord = { minted: [], received: [], responses: [], calls: 0 };
  const codec = createRequestStateCodec<{ nonce: string; repo: string }>({ key: randomBytes(32) });
  const twoRounds = createRequestStateCodec<{ round: number }>({ key: randomBytes(32) });
  const handler = createMcpHandler(() => {
    const server = new McpServer(
      { name: 'upstream', version: '1.0.0' },
      {
        requestState: {
          verify: async (state, ctx) => {
            record.received.push(state);
            return codec.verify(state, ctx).catch(() => twoRounds.verify(state, ctx));
          },
        },
      },
    );
    server.registerTool(
      'delete_repository',
      { description: 'Deletes a repository after confirming', inputSchema: z.object({ owner: z.string(), repo: z.string() }) },
      async ({ owner, repo }, ctx): Promise<CallToolResult | InputRequiredResult> => {
        record.calls += 1;
        const state = ctx.mcpReq.requestState<{ nonce: string; repo: string }>();
        if (!state) {
          // A state whose plaintext says something recognisable, to look for it in ours.
          const minted = await codec.mint({ nonce: `upstream-secret-${randomBytes(8).toString('hex')}`, repo: `${owner}/${repo}` });
          record.minted.push(minted);
          return inputRequired({ inputRequests: CONFIRM_REQUESTS, requestState: minted });
        }
        record.responses.push(ctx.mcpReq.inputResponses);
        const answer = ctx.mcpReq.inputResponses?.confirm as { action?: string; content?: { name?: string } } | undefined;
        if (answer?.action === 'accept' && answer.content?.name === repo)
          return { content: [{ type: 'text', text: `deleted ${state.repo}` }], structuredContent: { deleted: true } };
        return { content: [{ type: 'text', text: `kept ${state.repo} (${answer?.action ?? 'no answer'})` }] };
      },
    );
    server.registerTool(
      'huge_state',
      { description: 'Asks with a state over the bound', inputSchema: z.object({ bytes: z.number().int() }) },
      async ({ bytes }) => inputRequired({ inputRequests: CONFIRM_REQUESTS, requestState: 'x'.repeat(bytes) }),
    );
    // Two rounds (a confirmation, then a one-time code), each with a state of its own; the second
    // request carries a vendor `_meta` key, which must reach the client as well.
    server.registerTool('two_rounds', { description: 'Asks twice', inputSchema: z.object({}) }, async (_args, ctx) => {
      const state = ctx.mcpReq.requestState<{ round?: number; nonce?: string }>();
      const round = state?.round ?? (state?.nonce === 'r1' ? 1 : 0);
      if (round > 0) record.responses.push(ctx.mcpReq.inputResponses);
      if (round === 0)
        return inputRequired({ inputRequests: CONFIRM_REQUESTS, requestState: await codec.mint({ nonce: 'r1', repo: 'r' }) });
      if (round === 1) return inputRequired({ inputRequests: OTP_REQUESTS, requestState: await twoRounds.mint({ round: 2 }) });
      return { content: [{ type: 'text', text: `done after ${round} rounds` }] };
    });
    return server;
  });
  const { url, server } = await serveHandler(handler);
  return { url, record, close: () => closeServer(server, handler) };
}

/** Serves an SDK handler at /mcp on a free loopback port. */
async function serveHandler(handler: McpHttpHandler): Promise<{ url: string; server: Server }> {
  const app = express();
  app.all('/mcp', async (req, res) => {
    const body = req.method === 'POST' ? (await readBody(req, 1 << 20)).toString('utf8') : undefined;
    await sendWebResponse(res, await handler.fetch(toWebRequest(req, res, `http://${req.headers.host}`, body)));
  });
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}/mcp`, server };
}

async function closeServer(server: Server, handler?: McpHttpHandler): Promise<void> {
  await handler?.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** The broker-side client of the upstream (2026-07-28, declaring what the end client may answer). */
async function upstreamClient(url: string): Promise<Client> {
  const client = new Client(
    { name: 'broker-gateway', version: '1.0.0' },
    { capabilities: { elicitation: { form: {}, url: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

type Params = { name: string; arguments: Record<string, unknown>; inputResponses?: Record<string, unknown>; requestState?: string };

describe('relaying an upstream input_required', () => {
  let idp: StartedIdp;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let upstreamClientInstance: Client;
  let brokerServer: Server;
  let brokerHandler: McpHttpHandler;
  let mcpUrl: string;
  const brokerSecret = randomBytes(32);
  /** Swappable, to show each layer on its own: the HMAC codec and the AEAD sealing have separate keys. */
  const deps: RelayDeps = { codec: createToolStateCodec(brokerSecret, 600), upstreamStates: new UpstreamStates(brokerSecret) };
  /** Which upstream id the test tool belongs to (a configuration that changed between two rounds). */
  let upstreamIdOfTool = 'vcs';
  const clients: Client[] = [];

  /** What a forwarder does with these seams: repeat → unwrap; upstream asks → relay; else pass the result on. */
  async function forward(ctx: ServerContext, tool: string, upstreamTool: string, args: Record<string, unknown>) {
    const repeat = readRelayedRepeat(ctx, deps, { upstream: upstreamIdOfTool, tool });
    const params: Params = {
      name: upstreamTool,
      arguments: args,
      ...(repeat
        ? { inputResponses: repeat.inputResponses, ...(repeat.requestState !== undefined ? { requestState: repeat.requestState } : {}) }
        : {}),
    };
    const result = await upstreamClientInstance.callTool(params as { name: string; arguments: Record<string, unknown> }, {
      allowInputRequired: true,
    });
    if (isInputRequiredResult(result)) {
      const asked = result as unknown as InputRequiredResult;
      return relayInputRequired(ctx, deps, {
        upstream: upstreamIdOfTool,
        tool,
        inputRequests: asked.inputRequests,
        requestState: asked.requestState,
      });
    }
    return result as CallToolResult;
  }

  before(async () => {
    upstream = await startUpstream();
    upstreamClientInstance = await upstreamClient(upstream.url);
    brokerServer = await bindLoopback();
    const publicUrl = `http://127.0.0.1:${portOf(brokerServer)}`;
    mcpUrl = `${publicUrl}/mcp`;
    idp = await startIdp({ clients: [], resource: mcpUrl });
    const verifier = new AccessTokenVerifier(
      new OidcClient({ issuer: new URL(idp.issuer), clientId: 'broker', clientSecret: 'unused-secret', authMethod: 'client_secret_basic' }),
      mcpUrl,
    );
    brokerHandler = createMcpHandler(() => {
      const server = new McpServer(
        { name: 'broker-under-test', version: '1.0.0' },
        { capabilities: { tools: {} }, requestState: { verify: verifyToolState(deps) } },
      );
      // A forwarder's tools/call, registered below McpServer's tool layer, which would turn a thrown -32602 into a tool error.
      const tools = new Map([
        ['vcs_delete_repository', 'delete_repository'],
        ['vcs_delete_repository_too', 'delete_repository'],
        ['vcs_huge_state', 'huge_state'],
        ['vcs_two_rounds', 'two_rounds'],
      ]);
      server.server.setRequestHandler('tools/list', () => ({
        tools: [...tools.keys()].map((name) => ({ name, inputSchema: { type: 'object' as const } })),
      }));
      server.server.setRequestHandler('tools/call', async (request, ctx) => {
        const upstreamTool = tools.get(request.params.name);
        if (!upstreamTool) throw new ProtocolError(-32602, `Tool ${request.params.name} not found`);
        return forward(ctx as ServerContext, request.params.name, upstreamTool, request.params.arguments ?? {});
      });
      return server;
    });
    const endpoint = mcpEndpoint(
      {
        handler: brokerHandler,
        verifier,
        audience: mcpUrl,
        requiredScopes: [],
        resourceMetadataUrl: `${publicUrl}/.well-known/oauth-protected-resource/mcp`,
        maxBodyBytes: 1 << 20,
        log: createLogger('error'),
      },
      new URL(publicUrl),
    );
    const app = express();
    app.all('/mcp', ...endpoint);
    brokerServer.on('request', app);
  });

  after(async () => {
    for (const c of clients) await c.close();
    await upstreamClientInstance.close();
    await closeServer(brokerServer, brokerHandler);
    await upstream.close();
    await idp.close();
  });

  /** The official client, 2026-07-28, with every round driven by hand. */
  async function clientAs(sub: string): Promise<Client> {
    const token = await idp.mintAccessToken({ sub });
    const client = new Client(
      { name: 'assistant', version: '1.0.0' },
      { capabilities: { elicitation: { form: {}, url: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: { token: async () => token } }));
    clients.push(client);
    return client;
  }

  async function call(client: Client, params: Params): Promise<CallToolResult & Partial<InputRequiredResult>> {
    return (await client.callTool(params as { name: string; arguments: Record<string, unknown> }, {
      allowInputRequired: true,
    })) as CallToolResult & Partial<InputRequiredResult>;
  }

  async function firstRound(client: Client, args = { owner: 'acme', repo: 'widgets' }, name = 'vcs_delete_repository') {
    const asked = await call(client, { name, arguments: args });
    assert.equal(asked.resultType, 'input_required');
    assert.equal(typeof asked.requestState, 'string');
    return asked as CallToolResult & InputRequiredResult & { requestState: string };
  }

  it('relays the inputRequests byte for byte, and hands the upstream its own state byte-exact with an accepted answer', async () => {
    const alice = await clientAs('alice');
    const asked = await firstRound(alice);
    assert.equal(JSON.stringify(asked.inputRequests), JSON.stringify(CONFIRM_REQUESTS), 'inputRequests unchanged, key order included');
    const theirs = upstream.record.minted.at(-1)!;
    assert.notEqual(asked.requestState, theirs, 'the client holds our state, not the upstream’s');

    const before = upstream.record.received.length;
    const answer = { action: 'accept', content: { name: 'widgets', reason: 'mistake' } };
    const done = await call(alice, {
      name: 'vcs_delete_repository',
      arguments: { owner: 'acme', repo: 'widgets' },
      inputResponses: { confirm: answer },
      requestState: asked.requestState,
    });
    assert.equal(done.resultType ?? 'complete', 'complete');
    assert.deepEqual(done.content, [{ type: 'text', text: 'deleted acme/widgets' }]);
    assert.deepEqual(done.structuredContent, { deleted: true });
    assert.deepEqual(upstream.record.received.slice(before), [theirs], 'the upstream got its own state back, byte-exact');
    assert.deepEqual(upstream.record.responses.at(-1), { confirm: answer });
  });

  for (const action of ['decline', 'cancel'] as const) {
    it(`forwards a ${action} as it came: the upstream decides what it means`, async () => {
      const alice = await clientAs('alice');
      const asked = await firstRound(alice);
      const done = await call(alice, {
        name: 'vcs_delete_repository',
        arguments: { owner: 'acme', repo: 'widgets' },
        inputResponses: { confirm: { action } },
        requestState: asked.requestState,
      });
      assert.deepEqual(done.content, [{ type: 'text', text: `kept acme/widgets (${action})` }]);
      assert.deepEqual(upstream.record.responses.at(-1), { confirm: { action } });
      assert.equal(upstream.record.received.at(-1), upstream.record.minted.at(-1));
    });
  }

  it('relays a second round with the upstream’s new state, its own _meta keys included, and finishes', async () => {
    const alice = await clientAs('alice');
    const first = await call(alice, { name: 'vcs_two_rounds', arguments: {} });
    assert.equal(first.resultType, 'input_required');
    const second = await call(alice, {
      name: 'vcs_two_rounds',
      arguments: {},
      inputResponses: { confirm: { action: 'accept', content: { name: 'r' } } },
      requestState: first.requestState!,
    });
    assert.equal(second.resultType, 'input_required');
    assert.equal(JSON.stringify(second.inputRequests), JSON.stringify(OTP_REQUESTS), 'the second round’s requests, _meta included');
    assert.notEqual(second.requestState, first.requestState);
    const done = await call(alice, {
      name: 'vcs_two_rounds',
      arguments: {},
      inputResponses: { otp: { action: 'accept', content: { code: '123456' } } },
      requestState: second.requestState!,
    });
    assert.deepEqual(done.content, [{ type: 'text', text: 'done after 2 rounds' }]);
    assert.deepEqual(upstream.record.responses.slice(-2), [
      { confirm: { action: 'accept', content: { name: 'r' } } },
      { otp: { action: 'accept', content: { code: '123456' } } },
    ]);
  });

  it('gives the client nothing of the upstream’s state to read: not in our state, nor in its decoded payload', async () => {
    const alice = await clientAs('alice');
    const asked = await firstRound(alice);
    const theirs = upstream.record.minted.at(-1)!;
    const theirPayload = Buffer.from(theirs.split('.')[1]!, 'base64url').toString('utf8');
    const secret = /upstream-secret-[0-9a-f]+/.exec(theirPayload)![0];
    const ours = asked.requestState;
    const ourPayload = Buffer.from(ours.split('.')[1]!, 'base64url').toString('utf8');
    for (const haystack of [ours, ourPayload]) {
      assert.ok(!haystack.includes(theirs), 'the upstream state is not carried as it is');
      assert.ok(!haystack.includes(theirs.split('.')[1]!), 'nor its base64 payload');
      assert.ok(!haystack.includes(secret), 'nor its plaintext');
    }
    const sealed = (JSON.parse(ourPayload) as { p: { kind: string; upstream: string; sealed: string } }).p;
    assert.equal(sealed.kind, 'upstream');
    assert.equal(sealed.upstream, 'vcs');
    for (const part of sealed.sealed.split('.').slice(1)) {
      assert.ok(!Buffer.from(part, 'base64url').toString('latin1').includes(secret), 'the sealed part is ciphertext');
    }
  });

  /** Sends `state` in a repeat and expects the SDK's frozen -32602, with nothing reaching the upstream. */
  async function refused(client: Client, params: Params): Promise<void> {
    const calls = upstream.record.calls;
    const received = upstream.record.received.length;
    await assert.rejects(call(client, params), (err: unknown) => {
      assert.ok(err instanceof ProtocolError, `a JSON-RPC error, got ${String(err)}`);
      assert.equal(err.code, -32602);
      assert.match(err.message, /Invalid or expired requestState/);
      return true;
    });
    assert.equal(upstream.record.calls, calls, 'the upstream was not called');
    assert.equal(upstream.record.received.length, received);
  }

  const accept = { confirm: { action: 'accept', content: { name: 'widgets' } } };

  it('refuses a tampered state, a state replayed by another principal, on another tool or with other arguments with -32602', async () => {
    const alice = await clientAs('alice');
    const bob = await clientAs('bob');
    const asked = await firstRound(alice);
    const args = { owner: 'acme', repo: 'widgets' };
    const s = asked.requestState;
    const mid = Math.floor(s.length / 2);
    const tampered = s.slice(0, mid) + (s[mid] === 'A' ? 'B' : 'A') + s.slice(mid + 1);
    await refused(alice, { name: 'vcs_delete_repository', arguments: args, inputResponses: accept, requestState: tampered });
    await refused(bob, { name: 'vcs_delete_repository', arguments: args, inputResponses: accept, requestState: s });
    await refused(alice, { name: 'vcs_delete_repository_too', arguments: args, inputResponses: accept, requestState: s });
    await refused(alice, {
      name: 'vcs_delete_repository',
      arguments: { owner: 'acme', repo: 'gadgets' },
      inputResponses: { confirm: { action: 'accept', content: { name: 'gadgets' } } },
      requestState: s,
    });
    // And the state still works for its own principal, tool and arguments.
    const done = await call(alice, { name: 'vcs_delete_repository', arguments: args, inputResponses: accept, requestState: s });
    assert.deepEqual(done.content, [{ type: 'text', text: 'deleted acme/widgets' }]);
  });

  // Between the two rounds something the state is bound to changes; `change` makes it and returns its undoing.
  const changedBetweenRounds: Array<[string, () => () => void]> = [
    [
      'a state our HMAC accepts but whose sealed part does not open (another sealing key)',
      () => {
        const kept = deps.upstreamStates;
        deps.upstreamStates = new UpstreamStates(randomBytes(32));
        return () => (deps.upstreamStates = kept);
      },
    ],
    [
      'a state for another upstream than the tool’s (the configuration changed between rounds)',
      () => {
        upstreamIdOfTool = 'vcs-new';
        return () => (upstreamIdOfTool = 'vcs');
      },
    ],
  ];
  for (const [what, change] of changedBetweenRounds)
    it(`refuses with -32602 ${what}`, async () => {
      const alice = await clientAs('alice');
      const asked = await firstRound(alice);
      const undo = change();
      try {
        await refused(alice, {
          name: 'vcs_delete_repository',
          arguments: { owner: 'acme', repo: 'widgets' },
          inputResponses: accept,
          requestState: asked.requestState,
        });
      } finally {
        undo();
      }
    });

  it('answers an upstream state over the bound with a tool error naming the upstream, and carries one at the bound', async () => {
    const alice = await clientAs('alice');
    const over = await call(alice, { name: 'vcs_huge_state', arguments: { bytes: MAX_UPSTREAM_STATE_BYTES + 1 } });
    assert.equal(over.isError, true);
    assert.equal(over.resultType ?? 'complete', 'complete');
    assert.match(
      (over.content[0] as { text: string }).text,
      /^vcs asked for input with a request state of 16385 bytes, more than the 16384/,
    );
    const at = await call(alice, { name: 'vcs_huge_state', arguments: { bytes: MAX_UPSTREAM_STATE_BYTES } });
    assert.equal(at.resultType, 'input_required');
    assert.ok(at.requestState!.length < 3 * MAX_UPSTREAM_STATE_BYTES, 'our state stays bounded too');
  });
});

describe('UpstreamStates (the AEAD layer on its own)', () => {
  const binding = {
    issuer: 'https://idp.example',
    subject: 'alice',
    upstream: 'vcs',
    method: 'tools/call',
    tool: 'vcs_x',
    argsDigest: 'd1',
  };
  const states = new UpstreamStates(randomBytes(32));

  it('opens under the same binding on another instance with the same secret, and under no other binding', () => {
    const secret = randomBytes(32);
    const sealed = new UpstreamStates(secret).seal('their-state', binding);
    assert.deepEqual(new UpstreamStates(secret).open(sealed, binding), { state: 'their-state' });
    assert.deepEqual(states.open(states.seal(undefined, binding), binding), {}, 'no upstream state is kept as none');
    for (const key of Object.keys(binding) as Array<keyof typeof binding>) {
      assert.throws(() => new UpstreamStates(secret).open(sealed, { ...binding, [key]: `${binding[key]}x` }), UpstreamStateRefused, key);
    }
    assert.throws(() => new UpstreamStates(randomBytes(32)).open(sealed, binding), UpstreamStateRefused);
    assert.throws(() => states.open('v1.garbage', binding), UpstreamStateRefused);
  });
});
