import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Browser } from './support/browser.js';
import { startStack, type Stack } from './support/stack.js';

describe('rate limits on the browser routes', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ env: { RATE_LIMIT_PER_MINUTE: '5' } });
  });
  after(() => stack.close());

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
          assert.equal(res.headers.get('retry-after'), '60');
          assert.match(await res.text(), /Too many requests/);
        } else await res.body?.cancel();
      }
      assert.equal(statuses.filter((s) => s !== 429).length, 5, `first five pass: ${statuses.join(',')}`);
      assert.equal(statuses[5], 429);
    });
  }

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
  let stack: Stack;
  let nextClient = 1;
  before(async () => {
    // One proxy hop, so each case gets its own client address (and so a fresh budget) through X-Forwarded-For.
    stack = await startStack({ env: { RATE_LIMIT_PER_MINUTE: String(LIMIT), TRUST_PROXY: '1' } });
  });
  after(() => stack.close());

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
      headers: { accept: 'text/html', 'x-forwarded-for': client, ...(method === 'POST' ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
      ...(method === 'POST' ? { body: 'csrf=x&handle=y&decision=allow' } : {}),
    });
    const text = await res.text();
    // Our catch-all: no route took the request, so nothing behind the limit ran.
    const routed = !(res.status === 404 && (method === 'HEAD' || /Page not found/.test(text)));
    return { status: res.status, routed };
  }

  it('serves each route under its one documented spelling: case and trailing-slash variants are 404', async () => {
    for (const [method, path] of [['GET', '/Connect/github/callback'], ['GET', '/connect/github/callback/'], ['GET', '/Connect/github'], ['GET', '/connect/github/'], ['GET', '/Auth/login'], ['GET', '/auth/login/'], ['GET', '/Connections'], ['POST', '/MCP'], ['POST', '/mcp/']] as const) {
      const res = await fetch(`${stack.publicUrl}${path}`, { method, redirect: 'manual', headers: { accept: 'text/html', 'x-forwarded-for': '203.0.113.1' } });
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
        assert.ok(answers.every((a) => a.routed && a.status !== 429), `the first ${LIMIT} are served: ${statuses}`);
        assert.equal(afterwards.status, 429, `the documented path is limited once the spelling used the budget: ${statuses}`);
        assert.equal((await send(method, path, client)).status, 429, 'and so is the spelling');
      });
    }
  }
});
