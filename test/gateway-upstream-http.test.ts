// The gateway's HTTP to an upstream (src/gateway/upstream-http.ts) against a plain node:http
// server: what global fetch gave and must still be given — a CLIENT span carrying traceparent, no
// redirect followed, a bounded read, a bounded pool — now that calls go through node:http agents.
// Tracing is started in this file's own process (as src/main.ts does), with an in-memory exporter.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ConfiguredUpstream } from '../src/config/upstreams.js';
import { UpstreamClient } from '../src/gateway/upstream-client.js';
import { discard, MAX_SOCKETS_PER_UPSTREAM, readAnswerBody, UpstreamHttp } from '../src/gateway/upstream-http.js';
import { createLogger } from '../src/log.js';
import { startTracing, withSpan, type Tracing } from '../src/observability/tracing.js';
import { tracingSettingsFor } from './support/tracing.js';

interface Seen {
  path: string;
  headers: IncomingMessage['headers'];
  port: number;
}

describe('the gateway’s HTTP to an upstream', () => {
  const exporter = new InMemorySpanExporter();
  let tracing: Tracing;
  let server: Server;
  let url: URL;
  const seen: Seen[] = [];
  let open = 0;
  let mostOpen = 0;
  /** When the server saw each stalled answer's connection close. */
  const stalledClosed: number[] = [];
  /** Answers held until released (for the pool bound). */
  const held: Array<() => void> = [];

  before(async () => {
    tracing = await startTracing(tracingSettingsFor({ OTEL_TRACES_EXPORTER: 'otlp' }), {
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        seen.push({ path: req.url ?? '', headers: req.headers, port: req.socket.remotePort ?? 0 });
        const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":{}}');
        if (req.url === '/redirect') return void res.writeHead(307, { location: 'http://127.0.0.1:9/elsewhere' }).end();
        if (req.url === '/big') return void res.writeHead(200, { 'content-type': 'application/json' }).end('x'.repeat(100_000));
        if (req.url === '/stall') {
          // Declares a small body, sends one byte of it, and never the rest.
          res.writeHead(401, { 'content-type': 'application/json', 'content-length': '100' }).write('{');
          return void req.socket.once('close', () => stalledClosed.push(Date.now()));
        }
        if (req.url === '/hold') {
          open++;
          mostOpen = Math.max(mostOpen, open);
          return void held.push(() => {
            open--;
            answer();
          });
        }
        answer();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await tracing.shutdown();
  });

  it('sends each call in a CLIENT span "upstream <id>" whose traceparent the upstream receives, without the path', async () => {
    const http = new UpstreamHttp(url, 'tracker');
    try {
      exporter.reset();
      await withSpan('tools/call', {}, async () => {
        const res = await http.post({ 'content-type': 'application/json' }, '{}', new AbortController().signal);
        await readAnswerBody(res, 1024);
      });
      const outer = exporter.getFinishedSpans().find((s) => s.name === 'tools/call')!;
      const client = exporter.getFinishedSpans().find((s) => s.name === 'upstream tracker')!;
      assert.equal(client.kind, SpanKind.CLIENT);
      assert.equal(client.parentSpanContext?.spanId, outer.spanContext().spanId);
      assert.equal(seen.at(-1)!.headers.traceparent, `00-${client.spanContext().traceId}-${client.spanContext().spanId}-01`);
      assert.deepEqual(
        [client.attributes['broker.upstream'], client.attributes['http.response.status_code'], client.attributes['server.port']],
        ['tracker', 200, Number(url.port)],
      );
      assert.ok(!JSON.stringify(client.attributes).includes('/mcp'), 'no path in the span');
    } finally {
      http.close();
    }
  });

  it('follows no redirect: a 3xx fails the call as unavailable, and nothing is sent where it points', async () => {
    const client = new UpstreamClient(upstreamAt(new URL('/redirect', url)), {
      maxResultBytes: 1024,
      clientInfo: { name: 'broker', version: '0' },
      log: createLogger('error'),
    });
    try {
      const before = seen.length;
      const outcome = await client.request('tools/call', { name: 'echo', arguments: {} }, { key: 'k', token: undefined });
      assert.deepEqual([outcome.kind, outcome.kind === 'failed' ? outcome.reason : undefined], ['failed', 'unavailable']);
      assert.match(outcome.kind === 'failed' ? outcome.detail : '', /307 redirect refused/);
      assert.deepEqual(
        seen.slice(before).map((s) => s.path),
        ['/redirect'],
      );
    } finally {
      client.close();
    }
  });

  it('cuts the connection of an unwanted answer whose small body stalls, instead of holding a pooled socket forever', async () => {
    const http = new UpstreamHttp(new URL('/stall', url), 'stall');
    try {
      const res = await http.post({}, '{}', new AbortController().signal);
      assert.equal(res.statusCode, 401);
      const discarded = Date.now();
      discard(res);
      for (const deadline = Date.now() + 5000; stalledClosed.length === 0 && Date.now() < deadline;)
        await new Promise((r) => setTimeout(r, 20));
      assert.equal(stalledClosed.length, 1, 'the stalled connection was closed');
      assert.ok(stalledClosed[0]! - discarded < 3000, `closed ${stalledClosed[0]! - discarded} ms after the discard`);
    } finally {
      http.close();
    }
  });

  it('reads an answer within its bound, and cuts one that passes it', async () => {
    const http = new UpstreamHttp(new URL('/big', url), 'big');
    try {
      const signal = new AbortController().signal;
      assert.equal((await readAnswerBody(await http.post({}, '{}', signal), 200_000))?.length, 100_000);
      assert.equal(await readAnswerBody(await http.post({}, '{}', signal), 10_000), undefined);
    } finally {
      http.close();
    }
  });

  it(`keeps at most ${MAX_SOCKETS_PER_UPSTREAM} connections to one upstream open, however many calls wait`, async () => {
    const http = new UpstreamHttp(new URL('/hold', url), 'pool');
    try {
      let settled = 0;
      // A signal per call, as the broker gives each (80 listeners on one would be a leak warning).
      const calls = Array.from({ length: MAX_SOCKETS_PER_UPSTREAM + 16 }, () =>
        http
          .post({}, '{}', new AbortController().signal)
          .then((res) => readAnswerBody(res, 1024))
          .finally(() => settled++),
      );
      while (held.length < MAX_SOCKETS_PER_UPSTREAM) await new Promise((resolve) => setTimeout(resolve, 10));
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(held.length, MAX_SOCKETS_PER_UPSTREAM, 'the rest wait for a free connection');
      while (settled < calls.length) {
        held.splice(0).forEach((release) => release());
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.equal((await Promise.all(calls)).length, MAX_SOCKETS_PER_UPSTREAM + 16);
      assert.equal(mostOpen, MAX_SOCKETS_PER_UPSTREAM);
    } finally {
      http.close();
    }
  });
});

function upstreamAt(url: URL): ConfiguredUpstream {
  return { id: 'redirecting', url, auth: { kind: 'none' }, scopes: [], toolPrefix: 'r_', tools: {}, timeoutMs: 2000, displayName: 'r' };
}
