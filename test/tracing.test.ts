// OpenTelemetry traces (issue 14): spans collected in memory through the same start-up path the
// OTEL_* variables drive (startTracing with a test-only span processor), against the real stack:
// the test IdP, the GitHub stand-in, the official MCP clients of both eras.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { parentFrom, startTracing, traceContextMeta, tracedFetch, withSpan, type Tracing } from '../src/observability/tracing.js';
import { sqliteHandle } from '../src/store/index.js';
import { acmeProvider } from './support/acme-provider.js';
import { modernClient, resultText } from './support/mcp.js';
import { providersFile } from './support/gateway.js';
import { listenLoopback } from './support/listen.js';
import { seedConnection } from './support/seed.js';
import { startStack, type Stack } from './support/stack.js';
import { tracingSettingsFor } from './support/tracing.js';
import { startUpstreamServer, type UpstreamServer } from './support/upstream-server.js';

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/** A client's W3C traceparent: a fresh trace id and the id of the client's own (sampled) span. */
function clientTrace(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = hex(16);
  const spanId = hex(8);
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

/** A context whose remote parent is the span `traceparent` names, as an incoming request's would be. */
function parentWith(traceparent: string) {
  return parentFrom(undefined, { traceparent });
}

/** The spans of one trace, by span id. */
function byId(spans: ReadableSpan[]): Map<string, ReadableSpan> {
  return new Map(spans.map((s) => [s.spanContext().spanId, s]));
}

/** Whether `span` descends from `ancestor` through spans that were all collected. */
function descendsFrom(span: ReadableSpan, ancestor: ReadableSpan, all: Map<string, ReadableSpan>): boolean {
  for (let parent = span.parentSpanContext?.spanId; parent; parent = all.get(parent)?.parentSpanContext?.spanId)
    if (parent === ancestor.spanContext().spanId) return true;
  return false;
}

/** A client of either era whose every HTTP request also carries `headers`. */
async function clientWithHeaders(url: string, token: string, headers: Record<string, string>, era: 'modern' | 'legacy'): Promise<Client> {
  const client = new Client(
    { name: 'traced-assistant', version: '1.0.0' },
    era === 'modern'
      ? { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } }
      : { capabilities: { elicitation: { url: {} } } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { authProvider: { token: async () => token }, requestInit: { headers } }),
  );
  return client;
}

describe('traces', () => {
  const exporter = new InMemorySpanExporter();
  /** Every span of the suite (never reset), for the last test's search for secrets. */
  const everything = new InMemorySpanExporter();
  let tracing: Tracing;
  let stack: Stack;
  /** An `auth: none` upstream the operator declared: the one kind of server the trace is carried to. */
  let upstream: UpstreamServer;
  let upstreamsFile: { path: string; remove(): void };
  const subject = `tracing-subject-${hex(6)}`;
  const secrets: string[] = [subject];
  let githubToken: string;

  before(async () => {
    // The same path OTEL_TRACES_EXPORTER=otlp takes in src/main.ts, with an in-memory processor instead of the OTLP one.
    tracing = await startTracing(tracingSettingsFor({ OTEL_TRACES_EXPORTER: 'otlp' }), {
      spanProcessors: [new SimpleSpanProcessor(exporter), new SimpleSpanProcessor(everything)],
    });
    assert.equal(tracing.enabled, true);
    upstream = await startUpstreamServer({ era: 'modern', anonymous: true });
    upstreamsFile = providersFile({ upstreams: [{ id: 'open', url: upstream.url, auth: 'none', toolPrefix: 'open.' }] });
    stack = await startStack({ env: { PROVIDERS_FILE: upstreamsFile.path } });
    const t = stack.github.issueTokenFor('octocat');
    githubToken = t.accessToken;
    secrets.push(githubToken);
    await seedConnection(
      stack.env,
      subject,
      'github',
      { id: String(stack.github.users.get('octocat')!.id), login: 'octocat' },
      { accessToken: t.accessToken, tokenType: 'bearer', scopes: ['repo'] },
    );
  });
  after(async () => {
    await stack?.close();
    await upstream?.close();
    upstreamsFile?.remove();
    await tracing?.shutdown();
  });

  it('continues the traceparent a 2026-07-28 client sends in _meta (over its HTTP header), with store and provider spans as children and no traceparent to GitHub', async () => {
    const meta = clientTrace();
    const header = clientTrace();
    const token = await stack.token(subject);
    secrets.push(token);
    const client = await clientWithHeaders(stack.mcpUrl, token, { traceparent: header.traceparent }, 'modern');
    exporter.reset();
    stack.github.traceHeaders.length = 0;
    try {
      const result = await client.callTool({ name: 'github_whoami', arguments: {}, _meta: { traceparent: meta.traceparent } });
      assert.match(resultText(result), /octocat/);
    } finally {
      await client.close();
    }

    const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === meta.traceId);
    const all = byId(spans);
    const mcp = spans.find((s) => s.name === 'mcp tools/call');
    assert.ok(mcp, `an MCP span in the client's trace; got ${exporter.getFinishedSpans().map((s) => s.name)}`);
    assert.equal(mcp.parentSpanContext?.spanId, meta.spanId, "the client's span is the MCP span's parent");
    assert.equal(mcp.kind, SpanKind.SERVER);
    assert.deepEqual(
      {
        method: mcp.attributes['mcp.method.name'],
        tool: mcp.attributes['gen_ai.tool.name'],
        era: mcp.attributes['mcp.era'],
        version: mcp.attributes['mcp.protocol.version'],
        outcome: mcp.attributes['broker.tool.outcome'],
        status: mcp.attributes['http.response.status_code'],
      },
      { method: 'tools/call', tool: 'github_whoami', era: 'modern', version: '2026-07-28', outcome: 'complete', status: 200 },
    );
    assert.ok(
      !exporter.getFinishedSpans().some((s) => s.spanContext().traceId === header.traceId),
      '_meta wins over the HTTP traceparent header',
    );

    const store = spans.filter((s) => s.name.startsWith('store '));
    assert.ok(
      store.some((s) => s.name === 'store connections.find'),
      `store spans: ${store.map((s) => s.name)}`,
    );
    for (const s of store) assert.ok(descendsFrom(s, mcp, all), `${s.name} is under the MCP span`);

    const provider = spans.find((s) => s.name === 'provider github user');
    assert.ok(provider, `a span for GitHub's /user; got ${spans.map((s) => s.name)}`);
    assert.equal(provider.kind, SpanKind.CLIENT);
    assert.ok(descendsFrom(provider, mcp, all));
    assert.equal(provider.attributes['http.response.status_code'], 200);

    const toGitHub = stack.github.traceHeaders.filter((h) => h.path.endsWith('/user'));
    assert.equal(toGitHub.length, 1);
    assert.equal(toGitHub[0]!.traceparent, undefined, 'GitHub, a third party, learns none of our trace ids');
  });

  it("sends an OAuth provider's token, identity and revocation endpoints no traceparent, while each call has its span", async () => {
    const seen: Array<{ path: string; traceparent: string | undefined; tracestate: string | undefined }> = [];
    const server = await listenLoopback((req, res) => {
      seen.push({
        path: req.url ?? '',
        traceparent: req.headers.traceparent as string | undefined,
        tracestate: req.headers.tracestate as string | undefined,
      });
      req.resume();
      req.on('end', () => {
        const body =
          req.url === '/token'
            ? { access_token: `at-${hex(8)}`, refresh_token: `rt-${hex(8)}`, token_type: 'bearer', expires_in: 3600 }
            : req.url === '/me'
              ? { id: 7, username: 'acme-user' }
              : {};
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      });
    });
    const base = `http://127.0.0.1:${server.port}`;
    try {
      const acme = acmeProvider(base, { source: 'api', url: `${base}/me`, idField: 'id', loginField: 'username' });
      exporter.reset();
      const client = clientTrace();
      await withSpan(
        'connect callback',
        {},
        async () => {
          const state = hex(8);
          const { tokens } = await acme.completeAuthorization({
            callbackUrl: new URL(`${stack.publicUrl}/connect/acme/callback?code=${hex(8)}&state=${state}`),
            expectedState: state,
            codeVerifier: hex(32),
            requestedScopes: [],
          });
          const renewed = await acme.refresh(tokens);
          assert.deepEqual(await acme.revoke(renewed, 'grant'), { revoked: true });
        },
        { parent: parentWith(client.traceparent) },
      );
      assert.deepEqual(
        seen.map((s) => s.path),
        ['/token', '/me', '/token', '/revoke'],
      );
      assert.deepEqual(
        seen.filter((s) => s.traceparent !== undefined || s.tracestate !== undefined),
        [],
        'no trace context reaches the provider',
      );
      const names = exporter
        .getFinishedSpans()
        .filter((s) => s.spanContext().traceId === client.traceId)
        .map((s) => s.name);
      for (const name of ['provider acme token', 'provider acme identity', 'provider acme refresh', 'provider acme revoke'])
        assert.ok(names.includes(name), `${name} in ${names}`);
    } finally {
      await server.close();
    }
  });

  it('carries the trace to an upstream the operator declared, in the traceparent header and in _meta', async () => {
    const client = clientTrace();
    const token = await stack.token(subject);
    const mcp = await modernClient({ url: stack.mcpUrl, token });
    exporter.reset();
    const before = upstream.requests.length;
    try {
      const result = await mcp.callTool({ name: 'open.echo', arguments: { text: 'traced' }, _meta: { traceparent: client.traceparent } });
      assert.match(resultText(result), /traced/);
    } finally {
      await mcp.close();
    }
    const call = upstream.requests.slice(before).find((r) => r.method === 'tools/call');
    assert.ok(call, `the call reached the upstream: ${upstream.requests.slice(before).map((r) => r.method)}`);
    const upstreamSpans = exporter
      .getFinishedSpans()
      .filter((s) => s.name === 'upstream open' && s.spanContext().traceId === client.traceId)
      .map((s) => `00-${client.traceId}-${s.spanContext().spanId}-01`);
    assert.ok(upstreamSpans.length > 0, `upstream spans in the client's trace; got ${exporter.getFinishedSpans().map((s) => s.name)}`);
    assert.ok(upstreamSpans.includes(call.headers.traceparent ?? ''), `the upstream span is its parent: ${call.headers.traceparent}`);
    assert.match(String(call.meta?.traceparent), new RegExp(`^00-${client.traceId}-`), 'and the same trace in _meta (SEP-414)');
  });

  it('continues the HTTP traceparent header of a 2025-11-25 client, and a connect link it is answered with stays out of every span', async () => {
    const header = clientTrace();
    const other = `tracing-other-${hex(6)}`;
    secrets.push(other);
    const token = await stack.token(other);
    secrets.push(token);
    const client = await clientWithHeaders(stack.mcpUrl, token, { traceparent: header.traceparent }, 'legacy');
    exporter.reset();
    let link = '';
    try {
      await assert.rejects(
        () => client.callTool({ name: 'github_whoami', arguments: {} }),
        (err: Error & { data?: { elicitations?: Array<{ url?: string }> } }) => {
          link = err.data?.elicitations?.[0]?.url ?? '';
          return /\/connect\/github\?req=/.test(link);
        },
      );
    } finally {
      await client.close();
    }
    secrets.push(new URL(link).searchParams.get('req')!);

    const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === header.traceId);
    const mcp = spans.find((s) => s.name === 'mcp tools/call');
    assert.ok(mcp, `got ${exporter.getFinishedSpans().map((s) => s.name)}`);
    assert.equal(mcp.parentSpanContext?.spanId, header.spanId);
    assert.equal(mcp.attributes['mcp.era'], 'legacy');
    assert.equal(mcp.attributes['broker.tool.outcome'], 'input_required');
    const all = byId(spans);
    const pending = spans.find((s) => s.name === 'store pending.openOrCreate');
    assert.ok(pending && descendsFrom(pending, mcp, all), `store spans: ${spans.map((s) => s.name)}`);
  });

  it('gives a page request its own span, named by the route template, with the store calls under it, never the query', async () => {
    // A well-formed handle of no link: looked up in the store, then refused.
    const handle = randomBytes(32).toString('base64url');
    secrets.push(handle);
    exporter.reset();
    const res = await fetch(`${stack.publicUrl}/connect/github?req=${handle}`, { redirect: 'manual' });
    await res.text();
    const spans = exporter.getFinishedSpans();
    const http = spans.find((s) => s.name.startsWith('http '));
    assert.ok(http, `got ${spans.map((s) => s.name)}`);
    assert.equal(http.name, 'http GET /connect/:provider');
    assert.equal(http.kind, SpanKind.SERVER);
    assert.equal(http.attributes['http.response.status_code'], res.status);

    const store = spans.filter((s) => s.name.startsWith('store '));
    assert.ok(store.length > 0, `store spans: ${spans.map((s) => s.name)}`);
    for (const s of store) assert.ok(descendsFrom(s, http, byId(spans)), `${s.name} is under the page's span`);
  });

  it('opens no trace for a store call outside a request (pruning, a watcher polling)', async () => {
    exporter.reset();
    await stack.broker.broker.store.pending.prune();
    await stack.broker.broker.store.pending.settledSince(Date.now() - 1000);
    assert.deepEqual(
      exporter.getFinishedSpans().map((s) => s.name),
      [],
    );
  });

  it('hands a traced transaction every repository the store has: a webhook event written inside one commits', async () => {
    exporter.reset();
    const store = stack.broker.broker.store;
    const id = `evt-${hex(8)}`;
    const endpoint = `traced-${hex(4)}`;
    await withSpan('request', {}, () =>
      store.transaction(async (tx) => {
        for (const name of ['admin', 'upstreamClients', 'upstreamTools', 'webhooks'] as const) assert.ok(tx[name], `tx.${name}`);
        await tx.webhooks.enqueue([{ id, endpoint, event_type: 'connection.created', payload: '{}' }]);
      }),
    );
    const claimed = await store.webhooks.claim('traced-test', [endpoint], 10, 60_000);
    assert.deepEqual(
      claimed.map((r) => r.id),
      [id],
    );
    assert.ok(exporter.getFinishedSpans().some((s) => s.name === 'store webhooks.enqueue'));
  });

  it('traces a transaction with its calls as children, and the traced store still commits and reads like the store', async () => {
    exporter.reset();
    const store = stack.broker.broker.store;
    const owner = { issuer: stack.idp.issuer, subject: `tx-${hex(4)}` };
    await withSpan('request', {}, () => store.transaction((tx) => tx.audit.record('keys_rotated', owner, 'github', 'n=1')));
    const rows = await store.audit.list({ subject: owner.subject });
    assert.deepEqual(
      rows.map((r) => [r.event, r.provider, r.detail]),
      [['keys_rotated', 'github', 'n=1']],
    );
    const spans = exporter.getFinishedSpans();
    const tx = spans.find((s) => s.name === 'store transaction');
    const record = spans.find((s) => s.name === 'store audit.record');
    assert.ok(tx && record, `got ${spans.map((s) => s.name)}`);
    assert.equal(record.parentSpanContext?.spanId, tx.spanContext().spanId);
    assert.equal(store.kind, 'sqlite');
    assert.equal((sqliteHandle(store).prepare('SELECT 1 AS one').get() as { one: number }).one, 1, 'the SQLite handle passes through');
  });

  it('a provider call runs in a CLIENT span that never carries the trace; a 2026-07-28 upstream gets it as _meta entries', async () => {
    exporter.reset();
    stack.github.traceHeaders.length = 0;
    let meta: Record<string, string> = {};
    const rateLimit = new URL('/rate_limit', stack.github.apiUrl);
    await withSpan('provider call', {}, async () => {
      meta = traceContextMeta();
      await (await tracedFetch('github rate_limit', { 'broker.provider': 'github' }, rateLimit, { method: 'GET' })).text();
    });
    assert.equal(stack.github.traceHeaders.at(-1)?.traceparent, undefined, 'no traceparent to a provider');
    const outer = exporter.getFinishedSpans().find((s) => s.name === 'provider call')!;
    const client = exporter.getFinishedSpans().find((s) => s.name === 'github rate_limit')!;
    assert.equal(client.kind, SpanKind.CLIENT);
    assert.equal(client.parentSpanContext?.spanId, outer.spanContext().spanId);
    assert.equal(meta.traceparent, `00-${outer.spanContext().traceId}-${outer.spanContext().spanId}-01`);
    assert.equal(client.attributes['url.full'], undefined, 'no URL, only the host');
  });

  it('names a method it does not know "other", and starts a new trace for a traceparent that is not W3C', async () => {
    const token = await stack.token(subject);
    exporter.reset();
    const res = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${token}`,
        traceparent: 'not-a-traceparent',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: `made/up-${subject}`, params: {} }),
    });
    await res.text();
    const mcp = exporter.getFinishedSpans().find((s) => s.name.startsWith('mcp '));
    assert.ok(mcp);
    assert.equal(mcp.name, 'mcp other');
    assert.equal(mcp.parentSpanContext, undefined, 'a root span');
  });

  it('puts no token, link handle or subject in any span name or attribute', async () => {
    // Every span of the suite, plus a fresh whoami with its store and provider spans.
    const token = await stack.token(subject);
    secrets.push(token);
    const client = await modernClient({ url: stack.mcpUrl, token });
    try {
      await client.callTool({ name: 'github_whoami', arguments: {} });
    } finally {
      await client.close();
    }
    const spans = everything.getFinishedSpans();
    assert.ok(spans.some((s) => s.name.startsWith('provider ')) && spans.some((s) => s.name.startsWith('store ')));
    for (const span of spans) {
      const text = JSON.stringify([span.name, span.attributes, span.events, span.resource.attributes]);
      for (const secret of secrets) assert.ok(!text.includes(secret), `${span.name} carries ${secret.slice(0, 12)}…`);
    }
  });
});
