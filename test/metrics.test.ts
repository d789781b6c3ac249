// The Prometheus metrics (issue 14): /metrics scraped and parsed after real flows, its access rules,
// and labels that never name a user, a login or a token.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { networkInterfaces } from 'node:os';
import { before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import express from 'express';
import type { CounterStore } from '../src/http/rate-limits.js';
import { metricsFailureLimit, metricsHandler } from '../src/observability/endpoint.js';
import { StoreUnavailableError } from '../src/store/index.js';
import { Browser } from './support/browser.js';
import { GITHUB_APP, seedExpired } from './support/expiring-tokens.js';
import { freePort } from './support/idp.js';
import { listenLoopback } from './support/listen.js';
import { envelope, modernClient, rawCall } from './support/mcp.js';
import { completeConnect, heldCalls, startStack } from './support/stack.js';
import { startUpstreamServer } from './support/upstream-server.js';
import { secretBasicServiceLines, writeYamlLines } from './support/config-file.js';
import { useStack, useSuite } from './support/suite.js';
import { useTempDir } from './support/temp-dir.js';
import { postTokenExchange } from './support/token-exchange.js';

const METRICS_TOKEN = 'metrics-token-for-tests-0123456789';
const BOT = { id: 'metrics-bot', secret: 'metrics-bot-secret-for-tests-0123', audience: 'https://metrics-bot.example.com/mcp' };

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * The Prometheus text exposition format (version 0.0.4), parsed strictly: every sample belongs to
 * a family announced by `# TYPE` (histograms by their `_bucket`, `_sum`, `_count`), label values
 * are quoted with the format's three escapes, and every value is a number.
 */
function parseExposition(text: string): Sample[] {
  assert.ok(text.endsWith('\n'), 'the exposition ends with a newline');
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.slice(0, -1).split('\n')) {
    if (line.startsWith('# HELP ')) {
      assert.match(line, /^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*$/, line);
      continue;
    }
    if (line.startsWith('# TYPE ')) {
      const m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
      assert.ok(m, `a TYPE line: ${line}`);
      assert.ok(!types.has(m[1]!), `one TYPE for ${m[1]}`);
      types.set(m[1]!, m[2]!);
      continue;
    }
    if (line === '') continue; // the format ignores empty lines (prom-client puts one between families)
    assert.ok(!line.startsWith('#'), `no other comments: ${line}`);
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: (-?\d+))?$/.exec(line);
    assert.ok(m, `a sample line: ${line}`);
    const [, name, labelText, valueText] = m;
    const labels: Record<string, string> = {};
    if (labelText) {
      const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"(,|$)/y;
      let at = 0;
      while (at < labelText.length) {
        label.lastIndex = at;
        const l = label.exec(labelText);
        assert.ok(l, `labels of ${line}`);
        assert.ok(!(l[1]! in labels), `label ${l[1]} once in ${line}`);
        labels[l[1]!] = l[2]!.replace(/\\(["\\n])/g, (_s, c: string) => (c === 'n' ? '\n' : c));
        at = label.lastIndex;
      }
    }
    // Go's ParseFloat, which Prometheus uses, takes NaN in any case (prom-client writes `Nan`).
    const isNaN = /^nan$/i.test(valueText!);
    const value = valueText === '+Inf' ? Infinity : valueText === '-Inf' ? -Infinity : isNaN ? NaN : Number(valueText);
    assert.ok(isNaN || (valueText !== '' && !Number.isNaN(value)), `a numeric value in ${line}`);
    const family = types.has(name!) ? name! : name!.replace(/_(bucket|sum|count)$/, '');
    assert.ok(types.has(family), `${name} belongs to a family with a TYPE`);
    if (family !== name) assert.ok(['histogram', 'summary'].includes(types.get(family)!), `${name} is part of a histogram`);
    samples.push({ name: name!, labels, value });
  }
  return samples;
}

/** The value of the series `name{labels}` (exactly those labels), 0 when absent. */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const want = JSON.stringify(Object.entries(labels).sort());
  const found = samples.filter((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === want);
  assert.ok(found.length <= 1, `one series ${name} ${want}`);
  return found[0]?.value ?? 0;
}

async function scrape(url: string, token: string | undefined = METRICS_TOKEN): Promise<Sample[]> {
  const res = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

/** What moved between two scrapes, for the broker's own families (process metrics left out). */
function moved(before: Sample[], after: Sample[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of after) {
    if (!s.name.startsWith('broker_') || s.name.endsWith('_bucket') || s.name.endsWith('_sum')) continue;
    const d = s.value - value(before, s.name, s.labels);
    if (d !== 0) out.set(`${s.name}${JSON.stringify(s.labels)}`, d);
  }
  return out;
}

describe('/metrics', () => {
  const upstream = useSuite('the anonymous upstream', () => startUpstreamServer({ era: 'modern', anonymous: true }));
  const dir = useTempDir('metrics-test-');
  const stack = useStack(() => ({
    standIn: GITHUB_APP.standIn,
    holdSeconds: 10,
    env: {
      ...GITHUB_APP.env,
      METRICS_TOKEN,
      PROVIDERS_FILE: writeYamlLines(dir.file('services.yaml'), [
        'services:',
        ...secretBasicServiceLines({ ...BOT, allow: { github: ['public_repo', 'repo'] } }),
        'upstreams:',
        '  - id: open',
        `    url: ${upstream.url}`,
        '    auth: none',
        // Nothing here times out on purpose: room for a first call on a loaded machine (2 s was met by one).
        '    timeoutMs: 10000',
      ]),
      SERVICE_METRICS_BOT_SECRET: BOT.secret,
    },
  }));
  let metricsUrl: string;
  before(() => {
    metricsUrl = `${stack.publicUrl}/metrics`;
  });

  it('asks for the METRICS_TOKEN bearer: 401 with a Bearer challenge without it or with another, the exposition with it', async () => {
    for (const authorization of [undefined, 'Bearer wrong-token-of-some-length', `Basic ${METRICS_TOKEN}`, `Bearer ${METRICS_TOKEN}x`]) {
      const res = await fetch(metricsUrl, authorization ? { headers: { authorization } } : {});
      assert.equal(res.status, 401, String(authorization));
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer realm="metrics"/);
      const body = await res.text();
      assert.ok(!body.includes('broker_'), 'nothing of the metrics in a refusal');
    }
    const samples = await scrape(metricsUrl);
    for (const name of [
      'broker_http_requests_total',
      'broker_held_repeats',
      'broker_hold_duration_seconds_count',
      'broker_pending_connections_open',
      'broker_store_errors_total',
      'process_cpu_user_seconds_total',
      'nodejs_eventloop_lag_seconds',
    ])
      assert.ok(
        samples.some((s) => s.name === name),
        `${name} is exposed`,
      );
  });

  it('counts a connect flow, a tool call in each outcome, a refresh and token exchanges by exactly what happened', async () => {
    const before = await scrape(metricsUrl);

    // A connect flow with a held repeat: input_required, then complete once the browser connected.
    const browser = new Browser();
    let connecting: Promise<{ html: string }> | undefined;
    const alice = await modernClient({
      url: stack.mcpUrl,
      token: await stack.token('metrics-alice'),
      onUrl: async (url) => {
        connecting = heldCalls(stack).then(() => completeConnect(browser, url, 'metrics-alice'));
        return { action: 'accept' };
      },
    });
    const whoami = await alice.callTool({ name: 'github_whoami', arguments: {} });
    await alice.close();
    assert.match((await connecting!).html, /Connected as @octocat/);
    assert.equal((whoami.structuredContent as { status: string }).status, 'connected');

    // Declined in the client: input_required, then declined.
    const bob = await modernClient({
      url: stack.mcpUrl,
      token: await stack.token('metrics-bob'),
      onUrl: async () => ({ action: 'decline' }),
    });
    const declined = await bob.callTool({ name: 'github_whoami', arguments: {} });
    await bob.close();
    assert.equal((declined.structuredContent as { status: string }).status, 'not_connected');

    // A client that cannot open links: asked through the link in the result.
    const carol = await modernClient({ url: stack.mcpUrl, token: await stack.token('metrics-carol'), capabilities: { form: true } });
    const linked = await carol.callTool({ name: 'github_whoami', arguments: {} });
    await carol.close();
    assert.equal(typeof (linked.structuredContent as { connect_url?: unknown }).connect_url, 'string');

    // An expired GitHub App token: refreshed on use.
    await seedExpired(stack.env, stack.github, 'metrics-dave', 'octocat');
    const refreshesBefore = stack.github.refreshCount;
    const dave = await rawCall(stack.mcpUrl, await stack.token('metrics-dave'), {
      method: 'tools/call',
      params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
    });
    assert.equal(dave.status, 200);
    assert.equal(dave.json.result?.structuredContent?.status, 'connected');
    assert.equal(stack.github.refreshCount, refreshesBefore + 1, 'one refresh at GitHub');

    // Token exchanges: granted (alice is connected), interaction required (erin is not), a wrong secret.
    const exchange = async (sub: string, secret = BOT.secret) => {
      const { status, json } = await postTokenExchange(
        stack.publicUrl,
        { id: BOT.id, secret },
        { subject_token: await stack.token(sub, { aud: BOT.audience }) },
      );
      return { status, error: json.error };
    };
    assert.deepEqual(await exchange('metrics-alice'), { status: 200, error: undefined });
    assert.deepEqual(await exchange('metrics-erin'), { status: 400, error: 'interaction_required' });
    assert.deepEqual(await exchange('metrics-alice', 'not-the-secret-at-all'), { status: 401, error: 'invalid_client' });

    const after = await scrape(metricsUrl);
    const d = moved(before, after);
    const take = (name: string, labels: Record<string, string> = {}): number => {
      const key = `${name}${JSON.stringify(labels)}`;
      const n = d.get(key) ?? 0;
      d.delete(key);
      return n;
    };
    assert.equal(
      take('broker_mcp_tool_calls_total', { tool: 'github_whoami', outcome: 'input_required' }),
      3,
      'alice, bob and carol were asked',
    );
    assert.equal(take('broker_mcp_tool_calls_total', { tool: 'github_whoami', outcome: 'complete' }), 2, "alice's repeat and dave");
    assert.equal(take('broker_mcp_tool_calls_total', { tool: 'github_whoami', outcome: 'declined' }), 1, "bob's repeat");
    assert.equal(take('broker_mcp_tool_calls_total', { tool: 'github_whoami', outcome: 'error' }), 0, 'no error');
    assert.equal(take('broker_connect_flows_total', { provider: 'github', outcome: 'started' }), 1);
    assert.equal(take('broker_connect_flows_total', { provider: 'github', outcome: 'completed' }), 1);
    assert.equal(take('broker_token_refreshes_total', { provider: 'github', outcome: 'refreshed' }), 1);
    assert.equal(take('broker_hold_duration_seconds_count'), 1, "alice's repeat was held once");
    assert.equal(take('broker_token_exchanges_total', { service: BOT.id, outcome: 'granted' }), 1);
    assert.equal(take('broker_token_exchanges_total', { service: BOT.id, outcome: 'interaction_required' }), 1);
    assert.equal(take('broker_token_exchanges_total', { service: 'unknown', outcome: 'invalid_client' }), 1);
    assert.equal(take('broker_pending_connections_open'), 2, "carol's and erin's links are open (bob's was cancelled in his client)");
    assert.equal(value(after, 'broker_held_repeats'), 0, 'no call is held any more');
    // The browser's part of the flow, by route pattern and status.
    assert.equal(take('broker_http_requests_total', { route: '/connect/:provider', status: '200' }), 1, 'the consent page');
    assert.equal(
      take('broker_http_requests_total', { route: '/connect/:provider', status: '303' }),
      2,
      'the link opened before sign-in, and the consent form',
    );
    assert.equal(take('broker_http_requests_total', { route: '/connect/:provider/callback', status: '200' }), 1);
    assert.equal(take('broker_http_requests_total', { route: '/oauth/token', status: '200' }), 1);
    assert.equal(take('broker_http_requests_total', { route: '/oauth/token', status: '400' }), 1);
    assert.equal(take('broker_http_requests_total', { route: '/oauth/token', status: '401' }), 1);
    assert.ok(take('broker_http_requests_total', { route: '/mcp', status: '200' }) >= 6, 'the MCP requests');
    take('broker_http_requests_total', { route: '/metrics', status: '200' });
    for (const key of [...d.keys()]) if (key.startsWith('broker_http_requests_total')) d.delete(key); // sign-in pages
    assert.deepEqual(Object.fromEntries(d), {}, 'nothing else moved');

    // No label value names a user, a login or a token.
    const values = after.filter((s) => s.name.startsWith('broker_')).flatMap((s) => Object.values(s.labels));
    for (const v of values) {
      assert.doesNotMatch(v, /metrics-(alice|bob|carol|dave|erin)|octocat|gh[opsur]_|eyJ|Bearer|\?/, `label value ${v}`);
      assert.match(v, /^[A-Za-z0-9_.:/+-]+$/, `label value ${v}`);
    }
  });

  it('counts each call forwarded to an upstream by its id and outcome, and observes its duration', async () => {
    const before = await scrape(metricsUrl);
    const call = async (name: string) =>
      rawCall(stack.mcpUrl, await stack.token('metrics-gw'), { method: 'tools/call', params: { name, arguments: {}, _meta: envelope() } });
    assert.equal((await call('open_echo')).json.result?.isError, undefined);
    assert.equal((await call('open_failing')).json.result?.isError, true, "the upstream's own isError is still a result");
    upstream.faults.status500 = true;
    try {
      assert.equal((await call('open_echo')).json.result?.isError, true);
    } finally {
      delete upstream.faults.status500;
    }
    const after = await scrape(metricsUrl);
    const d = (name: string, labels: Record<string, string> = {}) => value(after, name, labels) - value(before, name, labels);
    assert.equal(d('broker_upstream_calls_total', { upstream: 'open', outcome: 'result' }), 2);
    assert.equal(d('broker_upstream_calls_total', { upstream: 'open', outcome: 'failed/http_error' }), 1);
    assert.equal(d('broker_upstream_call_duration_seconds_count', { upstream: 'open' }), 3);
    assert.ok(d('broker_upstream_call_duration_seconds_sum', { upstream: 'open' }) > 0);
  });

  it('labels a route by its pattern, never by the raw path, and an unknown path as "unmatched"', async () => {
    const before = await scrape(metricsUrl);
    for (const path of ['/connect/github?req=abc', '/connect/made-up-provider', '/no/such/page/1', '/no/such/page/2'])
      await (await fetch(`${stack.publicUrl}${path}`, { redirect: 'manual' })).arrayBuffer();
    const after = await scrape(metricsUrl);
    const d = moved(before, after);
    d.delete(`broker_http_requests_total${JSON.stringify({ route: '/metrics', status: '200' })}`);
    assert.deepEqual(Object.fromEntries(d), {
      [`broker_http_requests_total${JSON.stringify({ route: '/connect/:provider', status: '404' })}`]: 2,
      [`broker_http_requests_total${JSON.stringify({ route: 'unmatched', status: '404' })}`]: 2,
    });
  });

  it('counts a store operation that failed because the database was locked', async () => {
    const before = await scrape(metricsUrl);
    const db = new Database(stack.env.DATABASE_PATH!);
    try {
      db.exec('BEGIN EXCLUSIVE');
      const res = await rawCall(stack.mcpUrl, await stack.token('metrics-frank'), {
        method: 'tools/call',
        params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
      });
      assert.equal(res.status, 200);
      assert.equal(res.json.result?.isError, true, 'a tool error saying the database is away');
    } finally {
      db.exec('ROLLBACK');
      db.close();
    }
    const after = await scrape(metricsUrl);
    assert.ok(value(after, 'broker_store_errors_total') - value(before, 'broker_store_errors_total') >= 1);
    assert.equal(
      value(after, 'broker_mcp_tool_calls_total', { tool: 'github_whoami', outcome: 'error' }) -
        value(before, 'broker_mcp_tool_calls_total', { tool: 'github_whoami', outcome: 'error' }),
      1,
    );
  });
});

describe('/metrics off, or on its own port', () => {
  it('answers 404 at /metrics when neither METRICS_TOKEN nor METRICS_PORT is set', async () => {
    const stack = await startStack();
    try {
      const res = await fetch(`${stack.publicUrl}/metrics`, { headers: { accept: 'application/json' } });
      assert.equal(res.status, 404);
      assert.ok(!(await res.text()).includes('broker_'));
      assert.equal(stack.broker.metricsUrl, undefined);
    } finally {
      await stack.close();
    }
  });

  it('serves /metrics on METRICS_PORT bound to 127.0.0.1 only, and not on the main port', async () => {
    const port = await freePort();
    const stack = await startStack({ env: { METRICS_PORT: String(port) } });
    try {
      assert.equal(stack.broker.metricsUrl, `http://127.0.0.1:${port}/metrics`);
      const samples = await scrape(stack.broker.metricsUrl!, undefined);
      assert.ok(samples.some((s) => s.name === 'broker_http_requests_total'));
      const main = await fetch(`${stack.publicUrl}/metrics`, { headers: { accept: 'application/json' } });
      assert.equal(main.status, 404, 'not on the main listener');
      const other = await fetch(`http://127.0.0.1:${port}/`);
      assert.equal(other.status, 404, 'nothing else on the metrics port');
      // Any address of this machine but loopback: nothing listens there.
      const external = Object.values(networkInterfaces())
        .flat()
        .find((a) => a && !a.internal && a.family === 'IPv4');
      if (external) {
        await assert.rejects(fetch(`http://${external.address}:${port}/metrics`), 'not reachable on a non-loopback address');
      }
    } finally {
      await stack.close();
    }
  });
});

describe('wrong METRICS_TOKEN bearers, counted like the other failure limits', () => {
  const LIMIT = 3;

  /** GET `url` with `authorization`, sent from the loopback address `from`. */
  const scrapeFrom = (from: string, url: string, authorization: string) =>
    new Promise<{ status: number; retryAfter: string | undefined; body: string }>((resolve, reject) => {
      const req = httpRequest(url, { localAddress: from, headers: { authorization } }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString('utf8')));
        res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'], body }));
      });
      req.once('error', reject);
      req.end();
    });

  /** LIMIT + 1 wrong bearers from 127.0.0.2, then the right one from there and from 127.0.0.1. */
  async function guess(url: string): Promise<void> {
    const statuses: number[] = [];
    for (let i = 0; i <= LIMIT; i++) statuses.push((await scrapeFrom('127.0.0.2', url, `Bearer wrong-token-${i}-0123456789`)).status);
    assert.deepEqual(statuses, [401, 401, 401, 429], 'the guesses past the limit are refused before the token is compared');
    const refused = await scrapeFrom('127.0.0.2', url, `Bearer ${METRICS_TOKEN}`);
    assert.equal(refused.status, 429, 'the right token from the guessing address too: it cannot be told from a guess');
    assert.ok(Number(refused.retryAfter) >= 1);
    assert.equal((JSON.parse(refused.body) as { error: string }).error, 'rate_limited');
    assert.ok(!refused.body.includes('broker_'), 'nothing of the metrics in a refusal');
    const scraper = await scrapeFrom('127.0.0.1', url, `Bearer ${METRICS_TOKEN}`);
    assert.equal(scraper.status, 200, 'a scraper on another address is not locked out');
    assert.match(scraper.body, /broker_http_requests_total/);
    for (let i = 0; i < LIMIT + 2; i++) assert.equal((await scrapeFrom('127.0.0.1', url, `Bearer ${METRICS_TOKEN}`)).status, 200);
  }

  it('still serves the right bearer, uncounted, while the database holding the counters is away', async () => {
    const away = () => Promise.reject(new StoreUnavailableError('the database is away'));
    const store: CounterStore = { rateLimits: { hit: away, undo: away, reset: away } };
    const app = express();
    app.get('/metrics', metricsFailureLimit(LIMIT, store, randomBytes(32)), metricsHandler(METRICS_TOKEN));
    const server = await listenLoopback(app);
    try {
      const url = `http://127.0.0.1:${server.port}/metrics`;
      const scrape = await scrapeFrom('127.0.0.1', url, `Bearer ${METRICS_TOKEN}`);
      assert.equal(scrape.status, 200, 'the scrape that would show the outage works');
      assert.match(scrape.body, /broker_store_errors_total/);
      assert.equal((await scrapeFrom('127.0.0.1', url, 'Bearer wrong-token-0123456789')).status, 401);
    } finally {
      await server.close();
    }
  });

  it('refuses guesses past RATE_LIMIT_PER_MINUTE per address with 429 at /metrics on the main port', async () => {
    const stack = await startStack({ env: { METRICS_TOKEN, RATE_LIMIT_PER_MINUTE: String(LIMIT) } });
    try {
      await guess(`${stack.publicUrl}/metrics`);
    } finally {
      await stack.close();
    }
  });

  it('refuses guesses past RATE_LIMIT_PER_MINUTE per address with 429 on METRICS_PORT too', async () => {
    const stack = await startStack({
      env: { METRICS_TOKEN, METRICS_PORT: String(await freePort()), RATE_LIMIT_PER_MINUTE: String(LIMIT) },
    });
    try {
      await guess(stack.broker.metricsUrl!);
    } finally {
      await stack.close();
    }
  });
});
