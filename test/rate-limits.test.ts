import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import { BrokerError } from '../src/http/errors.js';
import { failedAuthenticationLimit, mcpRateLimit, pageRateLimit, serviceRateLimit } from '../src/http/rate-limits.js';
import { openSqliteStore, sqliteHandle, type Store } from '../src/store/index.js';
import { listenLoopback, type Listening } from './support/listen.js';
import { Browser } from './support/browser.js';
import { envelope, rawCall } from './support/mcp.js';
import { useStack } from './support/suite.js';
import { eventually } from './support/eventually.js';

describe('rate limits on the browser routes', () => {
  const stack = useStack({ env: { RATE_LIMIT_PER_MINUTE: '5' } });

  for (const [route, path] of [
    ['sign-in', '/auth/login'],
    ['connect', '/connect/github?req=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
    ['callback', '/connect/github/callback?code=x&state=y'],
  ] as const) {
    it(`answers the ${route} route with 429 and Retry-After once a client exceeds the limit`, async () => {
      const browser = new Browser();
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        const res = await browser.request(`${stack.publicUrl}${path}`);
        statuses.push(res.status);
        if (res.status === 429) {
          assert.match(res.headers.get('retry-after') ?? '', /^([1-9]|[1-5]\d|60)$/, 'the seconds left in the window');
          assert.match(await res.text(), /Too many requests/);
        } else await res.body?.cancel();
      }
      assert.equal(statuses.filter((s) => s !== 429).length, 5, `first five pass: ${statuses.join(',')}`);
      assert.equal(statuses[5], 429);
    });
  }

  it('limits POST /connections/:provider/connect (each one mints a pending connection) with 429 and Retry-After, before anything else runs', async () => {
    const browser = new Browser();
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await browser.request(`${stack.publicUrl}/connections/github/connect`, { method: 'POST', body: new URLSearchParams() });
      statuses.push(res.status);
      if (res.status === 429) assert.match(res.headers.get('retry-after') ?? '', /^([1-9]|[1-5]\d|60)$/);
      await res.body?.cancel();
    }
    assert.deepEqual(statuses, [403, 403, 403, 403, 403, 429], 'five refused for their missing CSRF token, then limited');
  });

  it('keeps separate budgets per route group, so exhausting one leaves the MCP endpoint and /connections alone', async () => {
    const res = await fetch(`${stack.publicUrl}/connections`, { redirect: 'manual' });
    assert.equal(res.status, 303);
    const mcp = await fetch(stack.mcpUrl, { method: 'POST' });
    assert.equal(mcp.status, 401);
  });
});

describe('rate limits on every spelling of a route', () => {
  const LIMIT = 5;
  const REQ = 'req=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
  // One proxy hop, so each case gets its own client address (and so a fresh budget) through X-Forwarded-For.
  const stack = useStack({ env: { RATE_LIMIT_PER_MINUTE: String(LIMIT), TRUST_PROXY: '1' } });
  let nextClient = 1;

  const groups: Array<{ group: string; canonical: [string, string]; spellings: Array<[string, string]> }> = [
    {
      group: 'callback',
      canonical: ['GET', '/connect/github/callback?code=x&state=y'],
      spellings: [
        ['GET', '/Connect/github/callback?code=x&state=y'],
        ['GET', '/CONNECT/GITHUB/CALLBACK?code=x&state=y'],
        ['GET', '/connect/github/Callback?code=x&state=y'],
        ['GET', '/connect/github/callback/?code=x&state=y'],
        ['GET', '/connect/github/callback//?code=x&state=y'],
        ['GET', '//connect/github/callback?code=x&state=y'],
        ['GET', '/connect//github/callback?code=x&state=y'],
        ['GET', '/connect/github//callback?code=x&state=y'],
        ['GET', '/connect/%67ithub/callback?code=x&state=y'],
        ['GET', '/%63onnect/github/callback?code=x&state=y'],
        ['GET', '/connect/github/%63allback?code=x&state=y'],
        ['HEAD', '/Connect/github/callback?code=x&state=y'],
      ],
    },
    {
      group: 'connect',
      canonical: ['GET', `/connect/github?${REQ}`],
      spellings: [
        ['GET', `/Connect/github?${REQ}`],
        ['GET', `/CONNECT/github?${REQ}`],
        ['GET', `/connect/GitHub?${REQ}`],
        ['GET', `/connect/github/?${REQ}`],
        ['GET', `//connect/github?${REQ}`],
        ['GET', `/connect//github?${REQ}`],
        ['GET', `/connect/%67ithub?${REQ}`],
        ['GET', `/%63onnect/github?${REQ}`],
        ['GET', '/connect/github%2Fcallback?code=x&state=y'],
        ['POST', '/connect/github'],
        ['POST', '/Connect/github'],
        ['POST', '/connect/github/'],
      ],
    },
    {
      group: 'sign-in',
      canonical: ['GET', '/auth/login'],
      spellings: [
        ['GET', '/Auth/login'],
        ['GET', '/AUTH/LOGIN'],
        ['GET', '/auth/Login'],
        ['GET', '/auth/login/'],
        ['GET', '//auth/login'],
        ['GET', '/auth//login'],
        ['GET', '/%61uth/login'],
        ['GET', '/auth/%6Cogin'],
        ['GET', '/auth/callback/?code=x&state=y'],
        ['GET', '/Auth/callback?code=x&state=y'],
        ['POST', '/Auth/logout'],
        ['POST', '/auth/switch/'],
      ],
    },
  ];

  async function send(method: string, path: string, client: string): Promise<{ status: number; routed: boolean }> {
    const res = await fetch(`${stack.publicUrl}${path}`, {
      method,
      redirect: 'manual',
      headers: {
        accept: 'text/html',
        'x-forwarded-for': client,
        ...(method === 'POST' ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      ...(method === 'POST' ? { body: 'csrf=x&handle=y&decision=allow' } : {}),
    });
    const text = await res.text();
    // Our catch-all: no route took the request, so nothing behind the limit ran.
    const routed = !(res.status === 404 && (method === 'HEAD' || /Page not found/.test(text)));
    return { status: res.status, routed };
  }

  it('serves each route under its one documented spelling: case and trailing-slash variants are 404', async () => {
    for (const [method, path] of [
      ['GET', '/Connect/github/callback'],
      ['GET', '/connect/github/callback/'],
      ['GET', '/Connect/github'],
      ['GET', '/connect/github/'],
      ['GET', '/Auth/login'],
      ['GET', '/auth/login/'],
      ['GET', '/Connections'],
      ['POST', '/MCP'],
      ['POST', '/mcp/'],
    ] as const) {
      const res = await fetch(`${stack.publicUrl}${path}`, {
        method,
        redirect: 'manual',
        headers: { accept: 'text/html', 'x-forwarded-for': '203.0.113.1' },
      });
      assert.equal(res.status, 404, `${method} ${path}`);
      await res.body?.cancel();
    }
  });

  for (const { group, canonical, spellings } of groups) {
    for (const [method, path] of spellings) {
      it(`answers ${method} ${path} with 404, or counts it against the ${group} budget`, async () => {
        const client = `198.51.100.${nextClient++}`;
        const answers = [];
        for (let i = 0; i < LIMIT; i++) answers.push(await send(method, path, client));
        const afterwards = await send(canonical[0], canonical[1], client);
        const statuses = `${answers.map((a) => a.status).join(',')} then ${afterwards.status}`;
        if (answers.every((a) => !a.routed)) return;
        assert.ok(
          answers.every((a) => a.routed && a.status !== 429),
          `the first ${LIMIT} are served: ${statuses}`,
        );
        assert.equal(afterwards.status, 429, `the documented path is limited once the spelling used the budget: ${statuses}`);
        assert.equal((await send(method, path, client)).status, 429, 'and so is the spelling');
      });
    }
  }
});

describe('rate limit on /mcp, per principal (default MCP_RATE_LIMIT_PER_MINUTE 600)', () => {
  // '' = unset: the default applies.
  const stack = useStack({ env: { MCP_RATE_LIMIT_PER_MINUTE: '' } });

  const list = (token: string | undefined) => rawCall(stack.mcpUrl, token, { method: 'tools/list', params: { _meta: envelope() } });

  it('answers the 601st request of a minute with 429, Retry-After and a JSON-RPC error; unauthenticated requests get 401 and count for no one; other users keep their budget', async (t) => {
    // The clock stands still (timers still run): all 700 requests fall in one window, however long a
    // busy machine takes to send them, so the count is the budget's, never a window that ran out.
    t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
    for (let i = 0; i < 5; i++) assert.equal((await list(undefined)).status, 401);
    const token = await stack.token('limited-user');
    const statuses: number[] = [];
    const started = performance.now(); // the real time it took (Date stands still)
    let firstLimited: Awaited<ReturnType<typeof list>> | undefined;
    // Ten at a time up to just below the budget, then one by one, so the order of arrival is known.
    while (statuses.length < 590) for (const r of await Promise.all(Array.from({ length: 10 }, () => list(token)))) statuses.push(r.status);
    while (!firstLimited && statuses.length < 700) {
      const r = await list(token);
      statuses.push(r.status);
      if (r.status === 429) firstLimited = r;
    }
    const elapsed = Math.round(performance.now() - started);
    const passed = statuses.filter((s) => s === 200).length;
    console.log(
      `# /mcp: ${passed} requests passed in ${elapsed} ms (${Math.round((statuses.length / elapsed) * 60_000)}/min sent) before the first 429; Retry-After ${firstLimited?.headers.get('retry-after')}`,
    );
    assert.equal(passed, 600, `exactly the budget passes: ${statuses.length} sent`);
    assert.equal(statuses.length, 601, 'and the very next request is limited');
    assert.ok(firstLimited);
    assert.equal(firstLimited.headers.get('cache-control'), 'no-store', 'a 429 is never cached, like the other limiters’');
    assert.equal((await list(token)).status, 429, 'and so is the one after');
    const retryAfter = Number(firstLimited.headers.get('retry-after'));
    assert.ok(
      Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60,
      `Retry-After is the seconds left in the window: ${retryAfter}`,
    );
    assert.match(firstLimited.headers.get('content-type') ?? '', /application\/json/);
    assert.equal(firstLimited.json.jsonrpc, '2.0');
    assert.equal(firstLimited.json.id, null);
    assert.equal(firstLimited.json.error.code, -32000);
    assert.match(firstLimited.json.error.message, /Too many requests: at most 600 MCP requests a minute/);

    assert.equal((await list(undefined)).status, 401, 'authentication still comes first');
    assert.equal((await list(await stack.token('other-user'))).status, 200, 'another user has a budget of their own');
  });

  it('counts in the shared store under a keyed hash, never the principal itself, within a flush period (250 ms)', async () => {
    const rows = () =>
      sqliteHandle(stack.broker.broker.store).prepare('SELECT key_hash, hits FROM rate_limit_windows').all() as Array<{
        key_hash: string;
        hits: number;
      }>;
    await eventually('the flush of the limited user’s hits', () => rows().some((k) => k.hits >= 600));
    const keys = rows();
    assert.ok(
      keys.some((k) => k.hits >= 600),
      'the limited user is counted in the database, where every instance sees it',
    );
    for (const k of keys) assert.ok(!k.key_hash.includes('limited-user') && !k.key_hash.includes(stack.idp.issuer), k.key_hash);
  });
});

describe('rate limit on /mcp: a 2025-11-25 batch counts as many requests as it holds calls', () => {
  const LIMIT = 10;
  const stack = useStack({ env: { MCP_RATE_LIMIT_PER_MINUTE: String(LIMIT) } });

  const batch = (token: string, calls: number) =>
    fetch(stack.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
        authorization: `Bearer ${token}`,
      },
      body: JSON.stringify(Array.from({ length: calls }, (_, i) => ({ jsonrpc: '2.0', id: i + 1, method: 'tools/list', params: {} }))),
    });

  it('answers a batch that crosses the budget with 429, Retry-After and a JSON-RPC error, and leaves nothing of the budget', async () => {
    const token = await stack.token('batching-user');
    const within = await batch(token, LIMIT);
    assert.equal(within.status, 200, 'a batch of exactly the budget passes');
    await within.body?.cancel();
    const over = await batch(token, 2);
    assert.equal(over.status, 429, 'the budget is spent by the first batch’s calls, not by one request');
    const retryAfter = Number(over.headers.get('retry-after'));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, String(retryAfter));
    assert.equal(over.headers.get('cache-control'), 'no-store');
    const body = (await over.json()) as { jsonrpc: string; error: { code: number } };
    assert.deepEqual([body.jsonrpc, body.error.code], ['2.0', -32000]);

    const other = await batch(await stack.token('another-batching-user'), LIMIT + 1);
    assert.equal(other.status, 429, 'one batch larger than the budget is refused whole');
    await other.body?.cancel();
  });
});

describe('every limiter, built by one builder: the same window, headers and Retry-After', () => {
  const LIMIT = 2;
  let dir: string;
  let store: Store;
  let server: Listening;
  let base = '';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rate-limits-'));
    store = openSqliteStore(join(dir, 'broker.db'));
    const hashKey = randomBytes(32);
    const body = (retryAfter: number) => ({ error: 'rate_limited', error_description: `Retry after ${retryAfter} s.` });
    const ok: RequestHandler = (_req, res) => void res.status(200).json({ ok: true });
    const app = express();
    app.get('/page', pageRateLimit('page-test', LIMIT, store, hashKey), ok);
    app.get(
      '/mcp',
      mcpRateLimit(LIMIT, store, hashKey, () => 'alice'),
      ok,
    );
    app.get(
      '/service',
      serviceRateLimit(LIMIT, store, hashKey, () => 'issue-bot', body),
      ok,
    );
    // Every request here is a failed client authentication (401), the one kind that counts.
    app.get(
      '/client-auth',
      failedAuthenticationLimit('client-auth-test', LIMIT, store, hashKey, body),
      (_req, res) => void res.status(401).json({ error: 'invalid_client' }),
    );
    const errors: ErrorRequestHandler = (err, _req, res, _next) => void res.status(err instanceof BrokerError ? err.status : 500).end();
    app.use(errors);
    server = await listenLoopback(app);
    base = `http://127.0.0.1:${server.port}`;
  });
  after(async () => {
    await server?.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers each 429 with draft-7 RateLimit headers and no X-RateLimit ones, and a Retry-After that counts down the window like the RateLimit reset', async () => {
    const routes = ['/page', '/mcp', '/service', '/client-auth'];
    for (const route of routes) await (await fetch(`${base}${route}`)).body?.cancel();
    // Past the first second of every window: a Retry-After that is the whole window no longer matches its reset.
    await sleep(1_100);
    for (const route of routes) {
      for (let i = 1; i < LIMIT; i++) await (await fetch(`${base}${route}`)).body?.cancel();
      const res = await fetch(`${base}${route}`);
      await res.body?.cancel();
      assert.equal(res.status, 429, route);
      assert.equal(res.headers.get('x-ratelimit-limit'), null, `${route}: no legacy headers`);
      assert.match(res.headers.get('ratelimit-policy') ?? '', new RegExp(`^${LIMIT};w=60$`), route);
      const reset = Number(/reset=(\d+)/.exec(res.headers.get('ratelimit') ?? '')?.[1]);
      const retryAfter = Number(res.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter < 60, `${route}: Retry-After ${retryAfter} is the seconds left, not the whole window`);
      assert.ok(Math.abs(retryAfter - reset) <= 1, `${route}: Retry-After ${retryAfter} says what RateLimit's reset=${reset} says`);
    }
  });
});

describe('the failed-client-authentication limit under concurrency', () => {
  const LIMIT = 3;
  let dir = '';
  let store: Store;
  let server: Listening;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rate-limits-parallel-'));
    store = openSqliteStore(join(dir, 'broker.db'));
    const app = express();
    // Each wrong secret takes a moment to check, so the guesses below are all in flight together.
    app.post(
      '/guess',
      failedAuthenticationLimit('client-auth-parallel', LIMIT, store, randomBytes(32), (retryAfter) => ({
        error: 'rate_limited',
        retryAfter,
      })),
      async (_req, res) => {
        await sleep(50);
        res.status(401).json({ error: 'invalid_client' });
      },
    );
    server = await listenLoopback(app);
  });
  after(async () => {
    await server?.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('tries at most the limit of guesses sent all at once; the others are refused before they are checked', async () => {
    const statuses = await Promise.all(
      Array.from({ length: LIMIT * 4 }, async () => {
        const res = await fetch(`http://127.0.0.1:${server.port}/guess`, { method: 'POST' });
        await res.body?.cancel();
        return res.status;
      }),
    );
    assert.equal(statuses.filter((s) => s === 401).length, LIMIT, `statuses: ${statuses}`);
    assert.equal(statuses.filter((s) => s === 429).length, LIMIT * 3);
  });
});
