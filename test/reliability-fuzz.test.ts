// Hostile and malformed input, generated with fast-check from a fixed seed (printed in the suite
// name; fast-check also prints it with the shrunk counterexample on failure). Every request goes
// over a raw socket (test/support/reliability-net.ts) so that duplicate header lines, non-ASCII
// header bytes and odd methods reach the server as sent. The broker runs in this process, so its
// RSS is this process's RSS.
//
// Properties: never a 5xx; no stack trace in any body; /mcp answers JSON (JSON-RPC for its own
// 4xx: 400, 405, 413, 415), never HTML; the server stays up (/healthz after each batch); memory
// stays bounded; nothing is logged at error level.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { Browser, parseForms } from './support/browser.js';
import { envelope } from './support/mcp.js';
import { STACK_TRACE, connectRequest, firstCall } from './support/reliability-flow.js';
import { rawHttp, type RawResponse } from './support/reliability-net.js';
import { startStack, type Stack } from './support/stack.js';

const SEED = 20260728;
const RUNS = 150;
/** The quick loop (TEST_QUICK=1) takes the first 25 of the large-body property's seeded runs (npm test all 100): a failure it finds, npm test finds too. */
const QUICK = process.env.TEST_QUICK === '1';
const MIB = 1024 * 1024;
const FC = { seed: SEED, numRuns: RUNS } as const;

const TOOLS = ['github_create_issue', 'github_whoami', 'list_connections', 'disconnect_account'] as const;
const METHODS = [
  'tools/call',
  'tools/list',
  'initialize',
  'server/discover',
  'ping',
  'notifications/initialized',
  'notifications/cancelled',
  'resources/list',
  'prompts/get',
  'completion/complete',
  'logging/setLevel',
] as const;

/** Printable text without control characters (which would end a header line), ASCII or not. */
const headerText = fc
  .oneof(fc.string({ maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 12 }))
  .map((s) => s.replace(/[\u0000-\u001f\u007f]/g, '').trim());

/** One JSON-RPC request our clients would legitimately send, as the base for header mutations. */
const validBody = fc.constantFrom(
  { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: envelope() } },
  { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_connections', arguments: {}, _meta: envelope() } },
  { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'github_whoami', arguments: {}, _meta: envelope() } },
  { jsonrpc: '2.0', id: 4, method: 'ping', params: { _meta: envelope() } },
  { jsonrpc: '2.0', method: 'notifications/initialized', params: { _meta: envelope() } },
);

type Body = Record<string, unknown>;

describe(`hostile input never breaks the broker (fast-check seed ${SEED}, ${RUNS} runs per property)`, { timeout: 120_000 }, () => {
  let stack: Stack;
  let port: number;
  let token: string;
  let rssBefore: number;
  /** A signed-in browser session, the CSRF token of its consent page and a live link handle. */
  let session: { cookie: string; csrf: string; handle: string };

  const request = (method: string, path: string, headers: string[], body: string | Buffer = ''): Promise<RawResponse> =>
    rawHttp(port, [`${method} ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, ...headers].join('\r\n'), body);

  const mcpHeaders = (body: unknown): string[] => {
    const b = (body && typeof body === 'object' && !Array.isArray(body) ? body : {}) as Body;
    const name = (b.params as Body | undefined)?.name;
    return [
      'Content-Type: application/json',
      'Accept: application/json, text/event-stream',
      'MCP-Protocol-Version: 2026-07-28',
      `Mcp-Method: ${typeof b.method === 'string' ? b.method.replace(/[\u0000-\u001f\u007f]/g, '') : 'tools/call'}`,
      ...(typeof name === 'string' ? [`Mcp-Name: ${name.replace(/[\u0000-\u001f\u007f]/g, '')}`] : []),
      `Authorization: Bearer ${token}`,
    ];
  };

  /** Never a 5xx, never a stack trace, never our access token echoed back. */
  function assertSafe(res: RawResponse, label: string): void {
    assert.ok(res.status >= 100 && res.status < 500, `${label}: HTTP ${res.status} ${res.body.slice(0, 300)}`);
    assert.doesNotMatch(res.body, STACK_TRACE, `${label}: a stack trace in the body`);
    assert.ok(!res.body.includes(token), `${label}: the access token is echoed`);
  }

  /** /mcp answers JSON (or an SSE stream of JSON-RPC), never HTML; its own errors are JSON-RPC. */
  function assertMcpAnswer(res: RawResponse, label: string): void {
    assertSafe(res, label);
    if (res.status === 202 || res.status === 204) return;
    const type = res.headers.get('content-type')?.[0] ?? '';
    assert.doesNotMatch(type, /html/i, `${label}: HTML from /mcp`);
    if (res.status === 200 && /^text\/event-stream/.test(type)) return;
    assert.match(type, /^application\/json/, `${label}: content-type ${type} for HTTP ${res.status}`);
    const json = JSON.parse(res.body) as { jsonrpc?: unknown; error?: { code?: unknown; message?: unknown } };
    if (res.status === 401) return; // the bearer challenge: OAuth error JSON + WWW-Authenticate
    if (res.status >= 400 || json.error) {
      assert.equal(json.jsonrpc, '2.0', `${label}: a JSON-RPC error object: ${res.body.slice(0, 200)}`);
      assert.equal(typeof json.error?.code, 'number', label);
      assert.equal(typeof json.error?.message, 'string', label);
      assert.doesNotMatch(String(json.error?.message), STACK_TRACE, `${label}: a stack trace in the error message`);
    }
  }

  async function assertHealthy(): Promise<void> {
    const res = await request('GET', '/healthz', []);
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body), { status: 'ok' });
  }

  /** The HTTP statuses a property saw, to show it reached past the first check. */
  const statuses = () => {
    const counts = new Map<number, number>();
    return {
      add: (status: number) => void counts.set(status, (counts.get(status) ?? 0) + 1),
      assertVaried(min: number, mustInclude: number[] = []) {
        const summary = JSON.stringify(Object.fromEntries(counts));
        assert.ok(counts.size >= min, `at least ${min} different statuses, saw ${summary}`);
        for (const s of mustInclude) assert.ok(counts.has(s), `HTTP ${s} among ${summary}`);
      },
    };
  };

  /**
   * Runs `check` on every input fast-check generates (`options`, FC by default), counting the status
   * each one `count`s; then asserts that at least `statuses` different ones came back, `including`
   * these (the property reached past the first refusal), and that the broker is still healthy.
   */
  async function holdsFor<T>(
    inputs: fc.Arbitrary<T>,
    expect: { statuses: number; including: number[] },
    check: (input: NoInfer<T>, count: (status: number) => void) => Promise<void>,
    options: fc.Parameters<[NoInfer<T>]> = FC,
  ): Promise<void> {
    const seen = statuses();
    await fc.assert(
      fc.asyncProperty(inputs, (input) => check(input, seen.add)),
      options,
    );
    seen.assertVaried(expect.statuses, expect.including);
    await assertHealthy();
  }

  before(async () => {
    stack = await startStack({ holdSeconds: 1 });
    port = Number(new URL(stack.publicUrl).port);
    token = await stack.token('fuzzer');
    const { link } = connectRequest(await firstCall(stack.mcpUrl, token, 'github_whoami', {}));
    const browser = new Browser();
    let page = await browser.open(link);
    if (/Development sign-in/.test(page.html)) page = await browser.submit(page, { fields: { login: 'fuzzer' } });
    const csrf = parseForms(page.html).find((f) => f.fields.csrf)?.fields.csrf;
    assert.ok(csrf, 'the consent page carries a CSRF token');
    session = { cookie: browser.cookieHeader(stack.publicUrl), csrf, handle: new URL(link).searchParams.get('req')! };
    await assertHealthy();
    rssBefore = process.memoryUsage().rss;
  });
  after(() => stack.close());

  it('answers any JSON value or non-JSON text POSTed to /mcp with JSON-RPC (400 -32700 for unparsable bodies), never a 5xx', async () => {
    const text = fc.oneof(
      { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 6 }).map((v) => ({ value: v as unknown, body: JSON.stringify(v) })) },
      { weight: 1, arbitrary: fc.string({ maxLength: 200 }).map((t) => ({ value: undefined as unknown, body: t })) },
      {
        weight: 1,
        arbitrary: fc.tuple(fc.jsonValue({ maxDepth: 3 }), fc.nat()).map(([v, cut]) => {
          const full = JSON.stringify(v);
          return { value: undefined as unknown, body: full.slice(0, cut % (full.length + 1)) };
        }),
      },
    );
    await holdsFor(text, { statuses: 1, including: [400] }, async ({ value, body }, count) => {
      const res = await request('POST', '/mcp', mcpHeaders(value), body);
      count(res.status);
      assertMcpAnswer(res, `POST ${body.slice(0, 120)}`);
      let parses = true;
      try {
        JSON.parse(body);
      } catch {
        parses = false;
      }
      if (!parses) {
        assert.equal(res.status, 400, `unparsable body ${JSON.stringify(body.slice(0, 80))}`);
        assert.equal(JSON.parse(res.body).error.code, -32700);
      }
    });
  });

  it('answers malformed JSON-RPC (missing jsonrpc, wrong types for id/method/params, bad tool calls) with JSON-RPC, never a 5xx', async () => {
    const anyJson = fc.jsonValue({ maxDepth: 3 });
    /** Mostly the right thing, sometimes anything: so that runs get past the first check often enough. */
    const mostly = <T, U>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<U>) =>
      fc.oneof({ weight: 3, arbitrary: good }, { weight: 1, arbitrary: bad });
    const message = fc.record(
      {
        jsonrpc: mostly(fc.constant('2.0'), fc.oneof(fc.constant('1.0'), fc.constant(2), fc.constant(null), anyJson)),
        id: mostly(
          fc.oneof(fc.integer(), fc.string({ maxLength: 20 })),
          fc.oneof(fc.constant(null), fc.double(), fc.boolean(), fc.object({ maxDepth: 1 }), fc.array(fc.integer(), { maxLength: 3 })),
        ),
        method: mostly(fc.constantFrom(...METHODS), fc.oneof(fc.string({ maxLength: 30 }), fc.integer(), fc.constant(null), anyJson)),
        params: mostly(
          fc.record(
            {
              name: mostly(fc.constantFrom(...TOOLS), fc.oneof(fc.string({ maxLength: 30 }), fc.integer(), anyJson)),
              arguments: mostly(
                fc.oneof(
                  fc.constant({}),
                  fc.record(
                    {
                      owner: mostly(fc.constantFrom('octo-org', 'a'), anyJson),
                      repo: mostly(fc.constantFrom('hello', 'r.x'), anyJson),
                      title: mostly(fc.string({ minLength: 1, maxLength: 40 }), anyJson),
                      body: anyJson,
                      labels: mostly(fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 }), anyJson),
                      provider: mostly(fc.constant('github'), anyJson),
                    },
                    { requiredKeys: [] },
                  ),
                ),
                anyJson,
              ),
              _meta: mostly(
                fc.constantFrom(envelope(), envelope({}), envelope({ elicitation: {} })),
                fc.oneof(fc.constant({ ...envelope(), 'io.modelcontextprotocol/clientCapabilities': 'x' }), anyJson),
              ),
              inputResponses: fc.oneof(
                anyJson,
                fc.constant({ connect_account: { action: 'accept' } }),
                fc.constant({ connect_account: { action: 'decline' } }),
                fc.constant({ confirm_disconnect: { action: 'accept', content: { confirm: true } } }),
              ),
              requestState: fc.oneof(fc.string({ maxLength: 60 }), anyJson, fc.constant('v1.e30.AAAA')),
            },
            { requiredKeys: ['_meta'] },
          ),
          anyJson,
        ),
      },
      { requiredKeys: [] },
    );
    await holdsFor(message, { statuses: 3, including: [200, 400] }, async (body, count) => {
      const res = await request('POST', '/mcp', mcpHeaders(body), JSON.stringify(body));
      count(res.status);
      assertMcpAnswer(res, `POST ${JSON.stringify(body).slice(0, 160)}`);
    });
  });

  it('refuses deeply nested (e.g. 10k-deep arrays) and huge arguments with JSON-RPC, 413 over 1 MiB, never a 5xx', async () => {
    type Shape = {
      kind: 'deep-array' | 'deep-object' | 'deep-mixed' | 'wide-object' | 'long-string' | 'long-array' | 'over-limit';
      size: number;
      where: 'arguments' | 'argument' | 'meta' | 'params' | 'id';
    };
    const shape: fc.Arbitrary<Shape> = fc.record({
      kind: fc.constantFrom('deep-array', 'deep-object', 'deep-mixed', 'wide-object', 'long-string', 'long-array', 'over-limit'),
      size: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 100, max: 20_000 }), fc.integer({ min: 20_000, max: 500_000 })),
      where: fc.constantFrom('arguments', 'argument', 'meta', 'params', 'id'),
    });
    /** The JSON text of the hostile value, written by hand: JSON.stringify itself overflows on deep values. */
    const valueText = ({ kind, size }: Shape, budget: number): string => {
      switch (kind) {
        case 'deep-array': {
          const d = Math.min(size, Math.floor(budget / 2));
          return '['.repeat(d) + ']'.repeat(d);
        }
        case 'deep-object': {
          const d = Math.min(size, Math.floor(budget / 6));
          return '{"a":'.repeat(d) + '0' + '}'.repeat(d);
        }
        case 'deep-mixed': {
          const d = Math.min(size, Math.floor(budget / 8));
          return '[{"a":'.repeat(d) + '0' + '}]'.repeat(d);
        }
        case 'wide-object': {
          const members: string[] = [];
          for (let i = 0, length = 2; i < size; i++) {
            const member = `"k${i}":${i}`;
            if ((length += member.length + 1) > budget) break;
            members.push(member);
          }
          return `{${members.join(',')}}`;
        }
        case 'long-string':
          return JSON.stringify('x'.repeat(Math.min(size * 2, budget - 2)));
        case 'long-array': {
          const n = Math.min(size, Math.floor(budget / 8));
          return `[${Array.from({ length: n }, (_, i) => i % 1000).join(',')}]`;
        }
        case 'over-limit':
          return JSON.stringify('x'.repeat(MIB + (size % 4096)));
      }
    };
    const bodyOf = (s: Shape): string => {
      const meta = JSON.stringify(envelope());
      const budget = MIB - 600;
      const v = valueText(s, budget);
      switch (s.where) {
        case 'arguments':
          return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github_create_issue","arguments":${v},"_meta":${meta}}}`;
        case 'argument':
          return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github_create_issue","arguments":{"owner":"octo-org","repo":"hello","title":${v}},"_meta":${meta}}}`;
        case 'meta':
          return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_connections","arguments":{},"_meta":{"x":${v},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"f","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`;
        case 'params':
          return `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"extra":${v},"_meta":${meta}}}`;
        case 'id':
          return `{"jsonrpc":"2.0","id":${v},"method":"tools/list","params":{"_meta":${meta}}}`;
      }
    };
    const headersFor = (s: Shape) =>
      mcpHeaders(
        s.where === 'params' || s.where === 'id'
          ? { method: 'tools/list' }
          : { method: 'tools/call', params: { name: s.where === 'meta' ? 'list_connections' : 'github_create_issue' } },
      );
    await holdsFor(
      shape,
      { statuses: 3, including: [200, 400, 413] },
      async (s, count) => {
        const body = bodyOf(s);
        const label = `${s.kind}(${s.size}) in ${s.where}, ${body.length} bytes`;
        if (s.kind !== 'over-limit') assert.ok(Buffer.byteLength(body) <= MIB, `${label}: the body stays within 1 MiB`);
        const res = await request('POST', '/mcp', headersFor(s), body);
        count(res.status);
        assertMcpAnswer(res, label);
        if (s.kind === 'over-limit') {
          assert.equal(res.status, 413, label);
          assert.equal(JSON.parse(res.body).error.code, -32600);
        }
      },
      {
        ...FC,
        numRuns: QUICK ? 25 : 100,
        endOnFailure: true, // shrinking 1 MiB bodies is slow; the counterexample is printed as found
        examples: [
          [{ kind: 'deep-array', size: 10_000, where: 'arguments' }],
          [{ kind: 'deep-array', size: 10_000, where: 'argument' }],
          [{ kind: 'deep-object', size: 10_000, where: 'meta' }],
          [{ kind: 'deep-array', size: 500_000, where: 'id' }],
          [{ kind: 'over-limit', size: 1, where: 'arguments' }],
        ],
      },
    );
  });

  it('answers odd headers (Content-Type variants, duplicate or garbage MCP-Protocol-Version / Mcp-Method / Mcp-Name / Authorization, non-ASCII) with JSON, never a 5xx', async () => {
    const contentType = fc.oneof(
      fc.constantFrom(
        'application/json',
        'application/json; charset=utf-8',
        'APPLICATION/JSON',
        'application/json;charset=UTF-16',
        'application/json; charset="☃"',
        'application/json-patch+json',
        'application/jsonx',
        'text/plain',
        'text/html',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=xyz',
        '',
        ';;;',
        '*/*',
      ),
      headerText,
    );
    const several = <T>(arb: fc.Arbitrary<T>) => fc.array(arb, { minLength: 0, maxLength: 3 });
    const headerName = fc
      .stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,20}$/)
      .filter((n) => !/^(content-length|transfer-encoding|host|connection|expect|upgrade|te|trailer)$/i.test(n));
    const odd = fc.record({
      body: validBody,
      contentTypes: fc.oneof(
        { weight: 2, arbitrary: fc.constant<string[]>(['application/json']) },
        { weight: 3, arbitrary: fc.array(contentType, { minLength: 0, maxLength: 2 }) },
      ),
      versions: fc.oneof(
        { weight: 2, arbitrary: fc.constant<string[]>(['2026-07-28']) },
        {
          weight: 3,
          arbitrary: several(
            fc.oneof(
              fc.constantFrom('2026-07-28', '2025-11-25', '2025-06-18', '2024-11-05', '', '9999-99-99', '2026-07-28, 2025-11-25'),
              headerText,
            ),
          ),
        },
      ),
      methods: fc.option(several(fc.oneof(fc.constantFrom(...METHODS), headerText)), { nil: undefined, freq: 2 }),
      names: fc.option(several(fc.oneof(fc.constantFrom(...TOOLS), headerText)), { nil: undefined, freq: 2 }),
      accepts: several(
        fc.constantFrom('application/json, text/event-stream', 'application/json', 'text/event-stream', '*/*', 'text/html', ''),
      ),
      auth: fc.oneof(
        { weight: 6, arbitrary: fc.constant('valid' as const) },
        { weight: 4, arbitrary: fc.constantFrom('none', 'garbage', 'twice', 'basic', 'bearer-empty', 'non-ascii') },
      ),
      extra: fc.array(fc.tuple(headerName, headerText), { maxLength: 4 }),
      origin: fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom(undefined, 'same') },
        { weight: 1, arbitrary: fc.constantFrom('foreign', 'null') },
      ),
    });
    await holdsFor(odd, { statuses: 4, including: [200, 400, 401, 403, 415] }, async (o, count) => {
      const b = o.body as Body;
      const headers = [
        ...o.contentTypes.map((t) => `Content-Type: ${t}`),
        ...o.versions.map((v) => `MCP-Protocol-Version: ${v}`),
        ...(o.methods ?? [String(b.method)]).map((m) => `Mcp-Method: ${m}`),
        ...(o.names ?? (typeof (b.params as Body).name === 'string' ? [String((b.params as Body).name)] : [])).map((n) => `Mcp-Name: ${n}`),
        ...o.accepts.map((a) => `Accept: ${a}`),
        ...{
          valid: [`Authorization: Bearer ${token}`],
          none: [],
          garbage: ['Authorization: Bearer not.a.jwt'],
          twice: [`Authorization: Bearer ${token}`, 'Authorization: Bearer other'],
          basic: ['Authorization: Basic Zm9vOmJhcg=='],
          'bearer-empty': ['Authorization: Bearer '],
          'non-ascii': ['Authorization: Bearer ☃☃☃'],
        }[o.auth],
        ...o.extra.map(([n, v]) => `${n}: ${v}`),
        ...(o.origin === undefined
          ? []
          : [`Origin: ${{ same: stack.publicUrl, foreign: 'https://evil.example', null: 'null' }[o.origin]}`]),
      ];
      const res = await request('POST', '/mcp', headers, JSON.stringify(o.body));
      count(res.status);
      assertMcpAnswer(
        res,
        headers
          .filter((h) => !h.startsWith('Authorization'))
          .join(' | ')
          .slice(0, 300),
      );
      if (res.status === 401)
        assert.match(res.headers.get('www-authenticate')?.[0] ?? '', /^Bearer /, 'a 401 carries the bearer challenge');
    });
  });

  it('answers the connect page, the callbacks and sign-in with missing, duplicated, oversized or undecodable query parameters, never a 5xx or stack trace', async () => {
    const key = fc.oneof(
      fc.constantFrom(
        'req',
        'state',
        'code',
        'error',
        'error_description',
        'returnTo',
        'iss',
        '',
        'req[]',
        'req[a]',
        '__proto__',
        'constructor',
      ),
      fc.string({ maxLength: 12 }),
    );
    const value = fc.oneof(
      fc.constantFrom(
        'HANDLE',
        '',
        'access_denied',
        'RAW:%ZZ',
        'RAW:%',
        'RAW:%00',
        'RAW:%E0%A4%A',
        'OVERSIZED',
        '//evil.example',
        '/\\evil',
        'javascript:alert(1)',
      ),
      fc.string({ maxLength: 80 }),
      fc.string({ unit: 'grapheme', maxLength: 20 }),
    );
    const page = fc.record({
      path: fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom('/connect/github', '/connect/github/callback') },
        fc.constantFrom(
          '/connect/github',
          '/connect/github/callback',
          '/connect/gitlab',
          '/connect/gitlab/callback',
          '/connect/%ZZ',
          '/connect/%ZZ/callback',
          '/connect/',
          '/connect/github/',
          '/connect/github%2Fcallback',
          '/auth/login',
          '/auth/callback',
          '/connections',
          '/',
          '/nope',
        ),
        fc.string({ minLength: 1, maxLength: 20 }).map((s) => `/connect/${encodeURIComponent(s)}`),
      ),
      query: fc.oneof(
        {
          weight: 2,
          arbitrary: fc
            .tuple(fc.constantFrom('req', 'state'), fc.array(fc.tuple(key, value), { maxLength: 3 }))
            .map(([k, rest]) => [[k, 'HANDLE'] as [string, string], ...rest]),
        },
        { weight: 3, arbitrary: fc.array(fc.tuple(key, value), { maxLength: 10 }) },
      ),
      cookie: fc.oneof(
        { weight: 3, arbitrary: fc.constant('session' as const) },
        { weight: 2, arbitrary: fc.constantFrom('none', 'garbage', 'twice') },
      ),
      accept: fc.constantFrom('text/html', 'application/json', '*/*', ''),
    });
    const encodeValue = (v: string): string => {
      if (v === 'HANDLE') return session.handle;
      if (v === 'OVERSIZED') return 'a'.repeat(5000);
      if (v.startsWith('RAW:')) return v.slice(4);
      return encodeURIComponent(v);
    };
    await holdsFor(page, { statuses: 4, including: [200, 303, 400, 404] }, async (p, count) => {
      const qs = p.query.map(([k, v]) => `${encodeURIComponent(k)}=${encodeValue(v)}`).join('&');
      const target = qs ? `${p.path}?${qs}` : p.path;
      const cookie = {
        none: [],
        session: [`Cookie: ${session.cookie}`],
        garbage: ['Cookie: sid=%%%; broker_session=../../etc'],
        twice: [`Cookie: ${session.cookie}; ${session.cookie}`],
      }[p.cookie];
      const res = await request('GET', target, [...cookie, ...(p.accept ? [`Accept: ${p.accept}`] : [])]);
      count(res.status);
      assertSafe(res, `GET ${target.slice(0, 200)} (${p.cookie})`);
    });
  });

  it('answers form posts with missing, duplicated, oversized, too many or wrongly typed fields, never a 5xx or stack trace', async () => {
    const key = fc.oneof(
      fc.constantFrom('handle', 'csrf', 'decision', 'returnTo', 'login', '', 'handle[]', '__proto__'),
      fc.string({ maxLength: 10 }),
    );
    const value = fc.oneof(
      fc.constantFrom('HANDLE', 'CSRF', 'allow', 'cancel', '', 'OVERSIZED', 'RAW:%ZZ', '/connections', '//evil.example'),
      fc.string({ maxLength: 60 }),
      fc.string({ unit: 'grapheme', maxLength: 10 }),
    );
    const post = fc.record({
      path: fc.constantFrom(
        '/connect/github',
        '/connect/gitlab',
        '/connect/%ZZ',
        '/connect/github/callback',
        '/connections/github/connect',
        '/connections/github/disconnect',
        '/connections/gitlab/disconnect',
        '/auth/switch',
        '/auth/callback',
        '/mcp-not',
        '/healthz',
      ),
      fields: fc.array(fc.tuple(key, value), { maxLength: 26 }),
      contentType: fc.constantFrom(
        'application/x-www-form-urlencoded',
        'application/x-www-form-urlencoded; charset=utf-8',
        'application/x-www-form-urlencoded; charset=latin1',
        'application/x-www-form-urlencoded; charset=utf-7',
        'application/json',
        'text/plain',
        'multipart/form-data; boundary=x',
        undefined,
      ),
      cookie: fc.constantFrom('none', 'session'),
      origin: fc.constantFrom(undefined, 'same', 'foreign', 'null'),
    });
    const encodeValue = (v: string): string => {
      if (v === 'HANDLE') return session.handle;
      if (v === 'CSRF') return encodeURIComponent(session.csrf);
      if (v === 'OVERSIZED') return 'b'.repeat(20_000);
      if (v.startsWith('RAW:')) return v.slice(4);
      return encodeURIComponent(v);
    };
    await holdsFor(post, { statuses: 3, including: [403, 404, 413] }, async (p, count) => {
      const body = p.fields.map(([k, v]) => `${encodeURIComponent(k)}=${encodeValue(v)}`).join('&');
      const headers = [
        'Accept: text/html',
        ...(p.contentType ? [`Content-Type: ${p.contentType}`] : []),
        ...(p.cookie === 'session' ? [`Cookie: ${session.cookie}`] : []),
        ...(p.origin === undefined
          ? []
          : [`Origin: ${{ same: stack.publicUrl, foreign: 'https://evil.example', null: 'null' }[p.origin]}`]),
      ];
      const res = await request('POST', p.path, headers, body);
      count(res.status);
      assertSafe(res, `POST ${p.path} [${p.contentType}] ${body.slice(0, 160)}`);
    });
  });

  it('answers PUT, DELETE, PATCH (and OPTIONS, HEAD) on every route with a 4xx — JSON-RPC on /mcp — never a 5xx', async () => {
    const wrong = fc.record({
      method: fc.constantFrom('PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'),
      path: fc.constantFrom(
        '/mcp',
        '/connect/github',
        '/connect/github/callback',
        '/connections',
        '/connections/github/connect',
        '/connections/github/disconnect',
        '/auth/login',
        '/auth/callback',
        '/auth/logout',
        '/auth/switch',
        '/healthz',
        '/.well-known/oauth-protected-resource/mcp',
        '/static/none.css',
        '/',
      ),
      authed: fc.boolean(),
      body: fc.oneof(
        fc.constant(''),
        fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
      ),
    });
    await holdsFor(wrong, { statuses: 3, including: [404, 405] }, async (w, count) => {
      const headers = [
        'Content-Type: application/json',
        'Accept: application/json, text/event-stream',
        ...(w.authed ? [`Authorization: Bearer ${token}`, 'MCP-Protocol-Version: 2026-07-28'] : []),
        ...(w.authed ? [`Cookie: ${session.cookie}`] : []),
      ];
      const res = await request(w.method, w.path, headers, w.method === 'HEAD' ? '' : w.body);
      count(res.status);
      const label = `${w.method} ${w.path}${w.authed ? ' (authenticated)' : ''}`;
      if (w.path === '/mcp' && w.method !== 'HEAD') assertMcpAnswer(res, label);
      else assertSafe(res, label);
      if (['PUT', 'DELETE', 'PATCH'].includes(w.method)) assert.ok(res.status >= 400 && res.status < 500, `${label}: HTTP ${res.status}`);
      if (w.path === '/mcp' && w.authed && ['PUT', 'DELETE', 'PATCH'].includes(w.method)) assert.equal(res.status, 405, label);
    });
  });

  it('is still up, logged nothing at error level, and its RSS grew by less than 200 MB over all of the above', async () => {
    await assertHealthy();
    const errors = stack.logs.filter((l) => /"level":"error"/.test(l));
    assert.deepEqual(errors.slice(0, 5), [], `${errors.length} error-level log lines`);
    const grown = (process.memoryUsage().rss - rssBefore) / MIB;
    assert.ok(grown < 200, `RSS grew by ${grown.toFixed(1)} MB`);
  });
});
