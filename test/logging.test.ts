// The logs (issue 14): pino JSON lines on stdout, one access line per request without its query,
// a request id on every line of its request and in X-Request-Id, and no secret in any line.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createLogger, REDACTED_FIELDS, REDACTED_HEADERS } from '../src/log.js';
import { Browser, type BrowserRequestInit } from './support/browser.js';
import { modernClient } from './support/mcp.js';
import { eventually } from './support/eventually.js';
import { completeConnect, heldCalls, startStack, type Stack } from './support/stack.js';

type Line = Record<string, unknown> & { level: string; time: string; event: string; reqId?: string };

/** Every line parsed as JSON (a line that is not JSON fails the test). */
function parsed(lines: readonly string[]): Line[] {
  return lines.map((l, i) => {
    assert.doesNotThrow(() => JSON.parse(l), `line ${i} is not JSON: ${l}`);
    const line = JSON.parse(l) as Line;
    assert.equal(typeof line.event, 'string', `line ${i} names its event`);
    assert.ok(['debug', 'info', 'warn', 'error'].includes(line.level), `line ${i} has a level word`);
    assert.ok(!Number.isNaN(Date.parse(line.time)), `line ${i} has an ISO time`);
    return line;
  });
}

/** A Browser noting every URL it requested and the X-Request-Id each answer carried. */
class RecordingBrowser extends Browser {
  readonly seen: Array<{ method: string; url: string; reqId: string | null }> = [];
  override async request(url: string, init: BrowserRequestInit = {}): Promise<Response> {
    const res = await super.request(url, init);
    this.seen.push({ method: init.method ?? 'GET', url, reqId: res.headers.get('x-request-id') });
    return res;
  }
}

describe('logs', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(() => stack.close());

  it('logs a whole connect flow as JSON lines: one access line per request without its query, reqId on every line of it and in X-Request-Id, and no secret anywhere', async () => {
    const from = stack.logs.length;
    const browser = new RecordingBrowser();
    const token = await stack.token('log-alice');
    const client = await modernClient({
      url: stack.mcpUrl,
      token,
      // Accept at once: the repeat is held while the browser connects, concurrently.
      onUrl: async (url) => {
        connecting = heldCalls(stack).then(() => completeConnect(browser, url, 'log-alice'));
        return { action: 'accept' };
      },
    });
    let connecting: Promise<{ html: string }> | undefined;
    const result = await client.callTool({ name: 'github_whoami', arguments: {} });
    await client.close();
    assert.match((await connecting!).html, /Connected as @octocat/);
    assert.equal((result.structuredContent as { status?: string }).status, 'connected');
    const lines = parsed(stack.logs.slice(from));

    // One access line per browser request to the broker, matching its X-Request-Id, path without query.
    const access = lines.filter((l) => l.event === 'http_request');
    const ours = browser.seen.filter((s) => new URL(s.url).origin === stack.publicUrl);
    assert.ok(ours.length >= 5, `the browser made the flow's requests to the broker (${ours.length})`);
    for (const { method, url, reqId } of ours) {
      assert.ok(reqId, `X-Request-Id on the answer to ${url}`);
      const matching = access.filter((l) => l.reqId === reqId);
      assert.equal(matching.length, 1, `one access line for ${url}`);
      const line = matching[0]!;
      const u = new URL(url);
      assert.equal(line.path, u.pathname, 'the logged path is the path, never the query');
      assert.equal(line.method, method);
      assert.equal(typeof line.status, 'number');
      assert.equal(typeof line.durationMs, 'number');
      assert.ok((line.durationMs as number) >= 0);
      assert.equal(line.level, 'info');
    }
    const callback = access.find((l) => l.route === '/connect/:provider/callback');
    assert.ok(callback, 'the callback is logged under its route pattern');
    assert.equal(callback.path, '/connect/github/callback');
    assert.equal(callback.status, 200);
    assert.ok(
      access.some((l) => l.route === '/mcp' && l.method === 'POST' && l.status === 200),
      'the MCP requests are logged too',
    );
    for (const l of access) assert.ok(!String(l.path).includes('?'), `no query in ${l.path}`);

    // Lines logged while a request ran carry that request's id.
    const byEvent = (event: string) => lines.find((l) => l.event === event);
    for (const [event, route] of [
      ['signed_in', '/auth/callback'],
      ['connect_authorizing', '/connect/:provider'],
      ['connection_created', '/connect/:provider/callback'],
    ] as const) {
      const line = byEvent(event);
      assert.ok(line, `${event} was logged`);
      assert.ok(line.reqId, `${event} carries a reqId`);
      const request = access.find((l) => l.reqId === line.reqId);
      assert.equal(request?.route, route, `${event} carries the reqId of its ${route} request`);
    }
    // Every line with a reqId belongs to a request that was logged; the only lines without one are
    // those no request caused (none in this flow but the IdP health check's).
    for (const l of lines)
      if (l.reqId)
        assert.ok(
          access.some((a) => a.reqId === l.reqId),
          `${l.event} belongs to a logged request`,
        );
    assert.deepEqual(
      lines.filter((l) => !l.reqId).map((l) => l.event),
      [],
      'every line of the flow was logged inside a request',
    );
    const held = byEvent('repeat_held');
    assert.ok(held?.reqId, 'the held repeat was logged with a reqId');
    const heldRequest = access.find((l) => l.reqId === held.reqId);
    assert.equal(heldRequest?.route, '/mcp', 'the held repeat carries its own /mcp request id, not the concurrent callback’s');

    // No secret: the link handle, sign-in and provider codes and states, nonces, the MCP token, the
    // provider token, the configured secrets.
    const secrets = new Set<string>([token, stack.env.BROKER_SECRET!, stack.env.TOKEN_ENCRYPTION_KEY!]);
    for (const name of ['OIDC_CLIENT_SECRET', 'GITHUB_CLIENT_SECRET']) secrets.add(stack.env[name]!);
    for (const { url } of browser.seen) for (const [, value] of new URL(url).searchParams) if (value.length >= 16) secrets.add(value);
    const queried = [...browser.seen].map((s) => new URL(s.url));
    for (const name of ['code', 'state', 'req'])
      assert.ok(
        queried.some((u) => u.searchParams.has(name)),
        `saw a ${name} parameter`,
      );
    const all = stack.logs.slice(from).join('\n');
    for (const secret of secrets) assert.ok(!all.includes(secret), `a secret was logged: ${secret.slice(0, 6)}…`);
    assert.doesNotMatch(all, /gh[opsu]_[A-Za-z0-9]/, 'no GitHub token');
  });

  it('keeps a sane incoming X-Request-Id, replaces any other, and answers with it', async () => {
    const from = stack.logs.length;
    const sane = 'trace-4bf92f3577b34da6a3ce929d0e0e4736';
    const ok = await fetch(`${stack.publicUrl}/healthz`, { headers: { 'X-Request-Id': sane } });
    assert.equal(ok.headers.get('x-request-id'), sane);
    const generated: string[] = [];
    for (const bad of ['has space', 'x'.repeat(129), '"quoted"', 'new\u00e9line', '-leading-dash']) {
      const res = await fetch(`${stack.publicUrl}/healthz?probe=secret-query-value`, { headers: { 'X-Request-Id': bad } });
      const id = res.headers.get('x-request-id');
      assert.ok(id && id !== bad && /^[A-Za-z0-9._:-]{8,128}$/.test(id), `replaced ${JSON.stringify(bad)} with ${id}`);
      generated.push(id);
    }
    assert.equal(new Set(generated).size, generated.length, 'a fresh id each time');
    const access = parsed(stack.logs.slice(from)).filter((l) => l.event === 'http_request');
    assert.deepEqual(
      access.map((l) => [l.reqId, l.path, l.route, l.status]),
      [sane, ...generated].map((id) => [id, '/healthz', '/healthz', 200]),
    );
    assert.ok(!stack.logs.slice(from).join('\n').includes('secret-query-value'), 'the query is never logged');
  });

  it('logs a request whose client went away before the answer once, marked aborted', async () => {
    const from = stack.logs.length;
    const { port } = new URL(stack.publicUrl);
    const socket = connect(Number(port), '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    // A form promised 1000 bytes long, of which 10 arrive: the body parser waits, the client leaves.
    socket.write(
      `POST /oauth/token HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Request-Id: gone-early-1\r\n` +
        'Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\ngrant_type',
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.destroy();
    await eventually('the access line', () => stack.logs.slice(from).some((l) => l.includes('"gone-early-1"')));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const lines = parsed(stack.logs.slice(from)).filter((l) => l.reqId === 'gone-early-1');
    assert.deepEqual(
      lines.map((l) => [l.event, l.path, l.aborted]),
      [['http_request', '/oauth/token', true]],
    );
  });

  it('labels a request no route matched "unmatched" and keeps its path', async () => {
    const from = stack.logs.length;
    const res = await fetch(`${stack.publicUrl}/no/such/page?code=abc`, { headers: { accept: 'application/json' } });
    assert.equal(res.status, 404);
    const access = parsed(stack.logs.slice(from)).filter((l) => l.event === 'http_request');
    assert.deepEqual(
      access.map((l) => [l.path, l.route, l.status]),
      [['/no/such/page', 'unmatched', 404]],
    );
  });
});

describe('the logger', () => {
  it('censors every field that could hold a secret, and credentials in a headers field', () => {
    const lines: string[] = [];
    const log = createLogger('debug', (l) => lines.push(l));
    for (const name of REDACTED_FIELDS) log.warn('probe', { [name]: `secret-${name}-value`, kept: 'visible' });
    assert.equal(lines.length, REDACTED_FIELDS.length);
    for (const [i, name] of REDACTED_FIELDS.entries()) {
      const line = JSON.parse(lines[i]!) as Record<string, unknown>;
      assert.equal(line[name], '[redacted]', `${name} is censored`);
      assert.equal(line.kept, 'visible', 'other fields stay');
      assert.ok(!lines[i]!.includes('-value'), `no ${name} value`);
    }
    for (const name of [
      'requestState',
      'client_secret',
      'refresh_token',
      'subject_token',
      'assertion',
      'authorization',
      'cookie',
      'code',
      'state',
    ])
      assert.ok(REDACTED_FIELDS.includes(name), `${name} is among the censored fields`);
    log.info('probe', {
      headers: Object.fromEntries(REDACTED_HEADERS.map((h) => [h, `secret-${h}-value`]).concat([['accept', 'text/html']])),
    });
    const headers = (JSON.parse(lines.at(-1)!) as { headers: Record<string, string> }).headers;
    for (const h of REDACTED_HEADERS) assert.equal(headers[h], '[redacted]', `headers.${h} is censored`);
    assert.equal(headers.accept, 'text/html');
  });
});
