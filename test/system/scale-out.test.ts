// Scale-out on PostgreSQL: three broker processes share one database behind a plain round-robin
// load balancer on PUBLIC_URL (no sticky sessions). This proves that
//   1. every step of the connect story can land on a different instance than the step before;
//   2. a repeat held on one instance is released by a callback on another within a second
//      (LISTEN/NOTIFY, not polling);
//   3. 50 concurrent calls over the three instances on an expired GitHub App token make exactly one
//      refresh at GitHub;
//   4. SIGKILLing the instance that answered the first call loses nothing;
//   5. a PostgreSQL restart mid-flow is survived: /readyz goes 503 and comes back by itself, a call
//      during the outage gets a clean answer, LISTEN reconnects and the flow finishes;
//   6. the official SDK client does the whole story in both protocol eras through the proxy;
//   7. a callback that cannot save (database gone after the code exchange) says so and revokes;
//   8. a rate limit holds across the instances (pages per client at once, /mcp per user once the
//      instances have reconciled their counts), and one user's concurrent calls spread over them
//      make one pending connection.
// No GitHub token ever shows up in a reply, a page, a URL or a broker's output.
import { UrlElicitationRequiredError } from '@modelcontextprotocol/client';
import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import pg from 'pg';
import { Browser, InterceptingBrowser, textOf, type BrowserRequestInit, type Page } from '../support/browser.js';
import { eventually, logged } from '../support/eventually.js';
import { seedExpired } from '../support/expiring-tokens.js';
import type { StandInOptions } from '../support/github-standin.js';
import { freePort } from '../support/idp.js';
import { envelope, legacyClient, modernClient, rawCall, resultText } from '../support/mcp.js';
import { startMultiStack, type MultiStack, type SpawnedBroker } from '../support/multi.js';
import { startPostgres, type PgServer } from '../support/postgres.js';
import {
  authorizeAtGitHub,
  connectRequest,
  firstCall,
  GITHUB_TOKEN_SHAPE,
  repeatCall,
  STACK_TRACE,
  upToGitHub,
  type RawReply,
} from '../support/reliability-flow.js';
import { startRoundRobinProxy, type RoundRobinProxy } from '../support/round-robin-proxy.js';
import { readConnection } from '../support/seed.js';
import { completeConnect } from '../support/stack.js';

const INSTANCES = 3;
const GITHUB_APP = {
  standIn: { kind: 'github-app', accessTokenTtlSeconds: 3600 } satisfies StandInOptions,
  env: { GITHUB_APP_TYPE: 'github-app' },
};

let server: PgServer;
before(async () => {
  server = await startPostgres();
});
after(async () => {
  await server?.destroy();
});

/** Three brokers on one fresh database, the round-robin proxy on PUBLIC_URL in front of them. */
interface ScaleOut {
  stack: MultiStack;
  brokers: SpawnedBroker[];
  proxy: RoundRobinProxy;
  databaseUrl: string;
  mcpUrl: string;
  close(): Promise<void>;
}

async function startScaleOut(
  options: { holdSeconds?: number; standIn?: StandInOptions; env?: Record<string, string> } = {},
): Promise<ScaleOut> {
  const databaseUrl = await server.createDatabase();
  const stack = await startMultiStack({
    holdSeconds: options.holdSeconds ?? 10,
    ...(options.standIn ? { standIn: options.standIn } : {}),
    env: { ...options.env, DATABASE_URL: databaseUrl },
  });
  let proxy: RoundRobinProxy | undefined;
  try {
    const ports = new Set<number>();
    while (ports.size < INSTANCES) {
      const port = await freePort();
      if (port !== stack.portA) ports.add(port);
    }
    // All three start (and migrate the empty database) at once, as a fresh deployment's would.
    // allSettled: a failed start must not leave the others running unnoticed by `stack.close()`.
    const spawned = await Promise.allSettled([...ports].map((port) => stack.spawn(port)));
    const failed = spawned.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const brokers = spawned.map((r) => (r as PromiseFulfilledResult<SpawnedBroker>).value);
    proxy = await startRoundRobinProxy(
      stack.portA,
      brokers.map((b) => b.url),
    );
    assert.equal(proxy.url, stack.publicUrl);
    const started = proxy;
    const close = async () => {
      await Promise.allSettled([started.close(), stack.close()]);
    };
    return { stack, brokers, proxy, databaseUrl, mcpUrl: `${proxy.url}/mcp`, close };
  } catch (err) {
    await proxy?.close();
    await stack.close();
    throw err;
  }
}

/**
 * Gives a describe block its own three instances (fresh database, proxy): started before its
 * tests, stopped after them; returns how its tests are declared. The database is started again first, in case a test failed while it
 * had stopped it.
 */
function scaleOutPerSuite(options: Parameters<typeof startScaleOut>[0] = {}): ScaleOutTest {
  let out: ScaleOut | undefined;
  before(async () => {
    out = await startScaleOut(options);
  });
  after(async () => {
    await server?.start();
    await out?.close();
  });
  return (name, body) => it(name, { timeout: 30_000 }, (t) => body(out!, t));
}

/** Registers a test of the suite's instances: `body` gets them and the test context, within 30 s. */
type ScaleOutTest = (name: string, body: (out: ScaleOut, t: TestContext) => Promise<void>) => void;

/** Runs one statement on a connection of its own, to look at the database from outside. */
async function sql<R extends pg.QueryResultRow>(url: string, text: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end();
  }
}

/** Sessions on `url`'s database whose last statement was a LISTEN: one per instance whose push channel is up. */
async function listeners(url: string): Promise<number> {
  const rows = await sql<{ n: number }>(
    url,
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN %'",
  );
  return rows[0]!.n;
}

/** Code exchanges (POST /login/oauth/access_token) the GitHub stand-in has received so far. */
function exchanges(github: MultiStack['github']): number {
  return github.requests.filter((r) => r.method === 'POST' && r.path === '/login/oauth/access_token').length;
}

async function getJson(url: string): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  return { status: res.status, body: await res.json() };
}

/**
 * Makes the round-robin proxy's next request land on instance `target`: it sends every request to
 * the instance after the one that answered last, so a cheap GET /healthz or two moves it along.
 * Only for sequential traffic (nothing else in flight through the proxy).
 */
async function steerTo(proxy: RoundRobinProxy, target: number): Promise<void> {
  for (let probes = 0; probes < INSTANCES; probes++) {
    const last = proxy.hits.at(-1)?.backend ?? -1;
    if ((last + 1) % INSTANCES === target) return;
    await (await fetch(`${proxy.url}/healthz`)).text();
  }
  assert.fail(`could not steer the proxy to instance ${target}`);
}

/**
 * A browser that goes through the proxy (PUBLIC_URL) and, before a request whose `METHOD /path` is
 * in `route`, steers the proxy so that request lands on the instance named there. Records when
 * each routed request was answered.
 */
class SteeredBrowser extends InterceptingBrowser {
  readonly answeredAt = new Map<string, number>();
  constructor(
    private readonly proxy: RoundRobinProxy,
    readonly route: Map<string, number> = new Map(),
  ) {
    super();
  }

  protected override async intercept(u: URL, init: BrowserRequestInit, send: () => Promise<Response>): Promise<Response> {
    const step = `${init.method ?? 'GET'} ${u.pathname}`;
    const target = u.origin === this.proxy.url ? this.route.get(step) : undefined;
    if (target !== undefined) await steerTo(this.proxy, target);
    const res = await send();
    this.answeredAt.set(step, Date.now());
    return res;
  }
}

/** The instance that answered the first `method path` in `proxy.hits` from index `from` on. */
function answeredBy(proxy: RoundRobinProxy, method: string, path: string, from = 0): { backend: number; index: number } {
  const index = proxy.hits.findIndex((h, i) => i >= from && h.method === method && h.path === path);
  assert.ok(index >= 0, `${method} ${path} went through the proxy (hits: ${JSON.stringify(proxy.hits.slice(from))})`);
  return { backend: proxy.hits[index]!.backend, index };
}

function assertCreated(reply: RawReply, repository: string): number {
  assert.equal(reply.status, 200, reply.text);
  assert.equal(reply.json?.result?.resultType, 'complete', reply.text);
  assert.equal(reply.json.result.isError, undefined, reply.text);
  const content = reply.json.result.structuredContent as { status: string; number: number; repository: string };
  assert.equal(content.status, 'created', reply.text);
  assert.equal(content.repository, repository);
  return content.number;
}

function assertNoGitHubToken(texts: string[]): void {
  for (const text of texts) assert.doesNotMatch(text, GITHUB_TOKEN_SHAPE, 'no GitHub token outside the store');
}

async function timed(call: Promise<RawReply>): Promise<{ ms: number; reply: RawReply }> {
  const start = Date.now();
  const reply = await call;
  return { ms: Date.now() - start, reply };
}

/** Starts a repeat and notes when it is answered, so a test can check it is still being held. */
function held(promise: Promise<RawReply>): { reply: Promise<RawReply>; answeredAt: () => number } {
  let at = 0;
  const reply = promise.then((r) => ((at = Date.now()), r));
  reply.catch(() => {}); // a test that fails first must not leave an unhandled rejection behind
  return { reply, answeredAt: () => at };
}

describe('three instances behind a round-robin proxy: the connect story', () => {
  const scaleOutTest = scaleOutPerSuite();

  scaleOutTest('completes with every step on a different instance than the step before, and creates the issue once', async (out, t) => {
    const { proxy, stack } = out;
    const args = { owner: 'octo-org', repo: 'scale', title: 'Filed across three instances' };
    const token = await stack.token('alice');
    const from = proxy.hits.length;

    const first = await firstCall(out.mcpUrl, token, 'github_create_issue', args);
    const { link, requestState } = connectRequest(first);
    assert.equal(new URL(link).origin, stack.publicUrl);
    const x = answeredBy(proxy, 'POST', '/mcp', from).backend;

    // Sign-in, consent and GitHub's callback each go to the next instance round the ring.
    const route = new Map([
      ['GET /auth/callback', (x + 1) % INSTANCES],
      ['POST /connect/github', (x + 2) % INSTANCES],
      ['GET /connect/github/callback', x],
    ]);
    const browser = new SteeredBrowser(proxy, route);
    const pages: Page[] = [];
    let page = await browser.open(link);
    pages.push(page);
    assert.match(page.html, /Development sign-in/);
    // Every instance seals what a flow under way keeps (one BROKER_SECRET): no verifier or nonce in clear.
    const signIns = await sql<{ code_verifier: string; nonce: string }>(
      out.databaseUrl,
      'SELECT code_verifier, nonce FROM login_transactions',
    );
    assert.ok(signIns.length >= 1);
    for (const row of signIns) for (const value of [row.code_verifier, row.nonce]) assert.match(value, /^v1\./);
    page = await browser.submit(page, { fields: { login: 'alice' } });
    pages.push(page);
    assert.equal(page.status, 200, textOf(page.html).slice(0, 300));
    assert.match(page.html, /name="decision" value="allow"/, 'the consent page');
    page = await browser.submit(page, { button: 'allow' });
    pages.push(page);
    assert.match(page.html, /GitHub stand-in/);
    const flows = await sql<{ code_verifier: string }>(out.databaseUrl, 'SELECT code_verifier FROM oauth_flows');
    assert.ok(flows.length >= 1);
    for (const row of flows) assert.match(row.code_verifier, /^v1\./);
    const connected = await authorizeAtGitHub(browser, page, 'octocat');
    pages.push(connected);
    assert.equal(connected.status, 200);
    assert.match(textOf(connected.html), /Connected as @octocat/);

    await steerTo(proxy, (x + 1) % INSTANCES);
    const repeatFrom = proxy.hits.length;
    const repeat = await repeatCall(out.mcpUrl, token, 'github_create_issue', args, requestState);
    assertCreated(repeat, 'octo-org/scale');

    const steps = [
      ['first POST /mcp', x],
      ['sign-in GET /auth/callback', answeredBy(proxy, 'GET', '/auth/callback', from).backend],
      ['consent POST /connect/github', answeredBy(proxy, 'POST', '/connect/github', from).backend],
      ['GET /connect/github/callback', answeredBy(proxy, 'GET', '/connect/github/callback', from).backend],
      ['repeat POST /mcp', answeredBy(proxy, 'POST', '/mcp', repeatFrom).backend],
    ] as const;
    for (let i = 1; i < steps.length; i++) {
      assert.notEqual(steps[i]![1], steps[i - 1]![1], `${steps[i]![0]} landed on instance ${steps[i]![1]}, like ${steps[i - 1]![0]}`);
    }
    assert.equal(new Set(steps.map(([, b]) => b)).size, INSTANCES, `all three instances served a step: ${JSON.stringify(steps)}`);
    t.diagnostic(`instances per step: ${steps.map(([step, b]) => `${step} → ${b}`).join(', ')}`);
    const flowHits = proxy.hits.slice(from).filter((h) => h.path !== '/healthz');
    assert.equal(new Set(flowHits.map((h) => h.backend)).size, INSTANCES);

    assert.deepEqual(
      stack.github.issues.filter((i) => i.title === args.title).map((i) => [i.repo, i.author]),
      [['scale', 'octocat']],
      'the issue was created exactly once',
    );
    const created = out.brokers.map((b) => (b.output().match(/"event":"connection_created"/g) ?? []).length);
    assert.equal(
      created.reduce((a, b) => a + b, 0),
      1,
      `one connection_created over all instances: ${created}`,
    );
    assert.equal(created[steps[3][1]], 1, 'logged by the instance that handled the callback');
    assertNoGitHubToken([
      first.text,
      repeat.text,
      ...pages.map((p) => p.html),
      ...pages.flatMap((p) => p.trail),
      ...browser.requests,
      ...out.brokers.map((b) => b.output()),
    ]);
    for (const b of out.brokers) assert.ok(!b.output().includes(token), 'the MCP access token is never logged');
  });

  scaleOutTest(
    'releases a repeat held on one instance within a second of the callback landing on another (LISTEN/NOTIFY)',
    async (out, t) => {
      const { proxy, stack, brokers } = out;
      // Each instance LISTENs on a connection of its own, so the held call is woken by a push, not by polling.
      await eventually('every instance to LISTEN', async () => ((await listeners(out.databaseUrl)) === INSTANCES ? true : undefined), {
        timeoutMs: 5_000,
        intervalMs: 50,
      });
      const args = { owner: 'octo-org', repo: 'scale', title: 'Held on one, woken by another' };
      const token = await stack.token('bob');
      const from = proxy.hits.length;
      const { link, requestState } = connectRequest(await firstCall(out.mcpUrl, token, 'github_create_issue', args));
      const a = answeredBy(proxy, 'POST', '/mcp', from).backend;
      const b = (a + 1) % INSTANCES;

      const browser = new SteeredBrowser(proxy, new Map([['GET /connect/github/callback', b]]));
      const authorize = await upToGitHub(browser, link, 'bob');

      // The repeat goes straight to instance A (the way a sticky client connection would).
      const heldSince = Date.now();
      const heldBefore = logged(brokers[a]!.output(), 'repeat_held');
      const repeat = held(repeatCall(`${brokers[a]!.url}/mcp`, token, 'github_create_issue', args, requestState));
      await eventually('instance A to hold the repeat', () => logged(brokers[a]!.output(), 'repeat_held') > heldBefore);
      assert.equal(repeat.answeredAt(), 0, 'the repeat is held while the user is at GitHub');

      const callbackFrom = proxy.hits.length;
      const callbackStartedAt = Date.now();
      const connected = await authorizeAtGitHub(browser, authorize, 'hubot');
      const callbackAnsweredAt = browser.answeredAt.get('GET /connect/github/callback')!;
      assert.match(textOf(connected.html), /Connected as @hubot/);
      assert.equal(answeredBy(proxy, 'GET', '/connect/github/callback', callbackFrom).backend, b, 'the callback landed on instance B');
      assert.notEqual(a, b);

      const reply = await repeat.reply;
      const latency = repeat.answeredAt() - callbackAnsweredAt;
      t.diagnostic(
        `held on instance ${a}, callback on instance ${b}: answered ${latency} ms after the callback's answer, ${repeat.answeredAt() - callbackStartedAt} ms after the authorize click, held ${repeat.answeredAt() - heldSince} ms`,
      );
      assert.ok(repeat.answeredAt() >= callbackStartedAt, 'not answered before the callback');
      assert.ok(latency < 1000, `answered ${latency} ms after the callback (want < 1000)`);
      assertCreated(reply, 'octo-org/scale');
      assert.equal(stack.github.issues.filter((i) => i.title === args.title && i.author === 'hubot').length, 1);
      assertNoGitHubToken([reply.text, connected.html, ...brokers.map((x) => x.output())]);
    },
  );
});

describe('three instances behind a round-robin proxy: the official MCP client in both protocol eras', () => {
  const scaleOutTest = scaleOutPerSuite();

  scaleOutTest(
    '2026-07-28: the SDK client follows the URL elicitation, the browser connects, and its repeat creates the issue, spread over the instances',
    async (out) => {
      const { proxy, stack } = out;
      const from = proxy.hits.length;
      const seen: string[] = [];
      const client = await modernClient({
        url: out.mcpUrl,
        token: await stack.token('gus'),
        onUrl: async (url) => {
          seen.push(url);
          const page = await completeConnect(new Browser(), url, 'gus');
          assert.match(textOf(page.html), /Connected as @octocat/);
          return { action: 'accept' };
        },
      });
      try {
        const result = await client.callTool({
          name: 'github_create_issue',
          arguments: { owner: 'octo-org', repo: 'sdk', title: 'From the SDK, across instances' },
        });
        assert.equal(result.isError, undefined, resultText(result));
        assert.equal((result.structuredContent as { status: string }).status, 'created');
      } finally {
        await client.close();
      }
      assert.equal(seen.length, 1);
      assert.equal(new URL(seen[0]!).origin, stack.publicUrl);
      const mcpHits = proxy.hits.slice(from).filter((h) => h.path === '/mcp');
      assert.ok(
        new Set(mcpHits.map((h) => h.backend)).size >= 2,
        `the client's requests reached several instances: ${JSON.stringify(mcpHits)}`,
      );
      assert.equal(new Set(proxy.hits.slice(from).map((h) => h.backend)).size, INSTANCES);
    },
  );

  scaleOutTest(
    '2025-11-25: the SDK client gets -32042 with our link from one instance, and after the browser step its retry creates the issue on another',
    async (out) => {
      const { proxy, stack } = out;
      const token = await stack.token('hal');
      const args = { owner: 'octo-org', repo: 'sdk', title: 'From a 2025-11-25 client, across instances' };
      const client = await legacyClient({ url: out.mcpUrl, token });
      try {
        const from = proxy.hits.length;
        const error = await client.callTool({ name: 'github_create_issue', arguments: args }).then(
          () => assert.fail('expected -32042'),
          (err: unknown) => err,
        );
        assert.ok(error instanceof UrlElicitationRequiredError, `got ${String(error)}`);
        assert.equal(error.code, -32042);
        const first = proxy.hits
          .slice(from)
          .filter((h) => h.path === '/mcp')
          .at(-1)!.backend;
        const link = error.elicitations[0]!.url;
        assert.equal(new URL(link).origin, stack.publicUrl);
        const page = await completeConnect(new Browser(), link, 'hal');
        assert.match(textOf(page.html), /Connected as @octocat/);
        await steerTo(proxy, (first + 1) % INSTANCES);
        const retryFrom = proxy.hits.length;
        const result = await client.callTool({ name: 'github_create_issue', arguments: args });
        assert.equal(result.isError, undefined, resultText(result));
        assert.equal((result.structuredContent as { status: string }).status, 'created');
        assert.notEqual(answeredBy(proxy, 'POST', '/mcp', retryFrom).backend, first, 'the retry landed on another instance');
      } finally {
        await client.close();
      }
      assert.equal(stack.github.issues.filter((i) => i.title === args.title).length, 1);
    },
  );
});

describe('three instances, one expiring GitHub App token', () => {
  const scaleOutTest = scaleOutPerSuite(GITHUB_APP);

  scaleOutTest(
    'refreshes exactly once at GitHub for 50 concurrent calls spread over the three instances, and all 50 succeed',
    async (out, t) => {
      const { proxy, stack } = out;
      await seedExpired(out.stack.envFor(), out.stack.github, 'dave', 'octocat');
      // Slow GitHub's refresh answer down so that the other calls really arrive while it is in flight.
      stack.github.faults = { refreshDelayMs: 300 };
      const token = await stack.token('dave');
      const from = proxy.hits.length;
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          rawCall(out.mcpUrl, token, {
            method: 'tools/call',
            params: {
              name: 'github_create_issue',
              arguments: { owner: 'octo-org', repo: 'refresh', title: `concurrent ${i}` },
              _meta: envelope(),
            },
          }),
        ),
      );
      stack.github.faults = {};
      const failed = results.filter((r) => r.json?.result?.structuredContent?.status !== 'created');
      assert.equal(failed.length, 0, `all 50 created; e.g. ${failed[0]?.status} ${failed[0]?.text.slice(0, 300)}`);
      const perInstance = [0, 1, 2].map((i) => proxy.hits.slice(from).filter((h) => h.path === '/mcp' && h.backend === i).length);
      t.diagnostic(`calls per instance: ${perInstance.join(', ')}; refreshes at GitHub: ${stack.github.refreshCount}`);
      assert.ok(
        perInstance.every((n) => n >= 15),
        `spread over the three instances: ${perInstance}`,
      );
      assert.equal(stack.github.refreshCount, 1);
      assert.deepEqual(
        stack.github.refreshes.map((r) => r.ok),
        [true],
      );
      assert.equal(new Set(stack.github.issues.filter((i) => i.repo === 'refresh').map((i) => i.number)).size, 50);
      assert.equal((await readConnection(stack.envFor(), 'dave', 'github'))?.status, 'active');
      assertNoGitHubToken([...results.map((r) => r.text), ...out.brokers.map((b) => b.output())]);
    },
  );
});

describe('three instances, one killed mid-flow', () => {
  const scaleOutTest = scaleOutPerSuite();

  scaleOutTest('loses nothing when the instance that answered the first call is SIGKILLed', async (out) => {
    const { proxy, stack, brokers } = out;
    const args = { owner: 'octo-org', repo: 'scale', title: 'Survives a dead instance' };
    const token = await stack.token('carol');
    const from = proxy.hits.length;
    const { link, requestState } = connectRequest(await firstCall(out.mcpUrl, token, 'github_create_issue', args));
    const x = answeredBy(proxy, 'POST', '/mcp', from).backend;

    await brokers[x]!.stop('SIGKILL');
    assert.equal(brokers[x]!.child.signalCode, 'SIGKILL');
    const afterKill = proxy.hits.length;

    const browser = new Browser();
    const connected = await completeConnect(browser, link, 'carol');
    assert.equal(connected.status, 200, textOf(connected.html).slice(0, 300));
    assert.match(textOf(connected.html), /Connected as @octocat/);
    const repeat = await repeatCall(out.mcpUrl, token, 'github_create_issue', args, requestState);
    assertCreated(repeat, 'octo-org/scale');

    const survivors = proxy.hits.slice(afterKill);
    assert.ok(survivors.length > 0);
    assert.ok(
      survivors.every((h) => h.backend !== x),
      `the dead instance ${x} answered nothing after the kill`,
    );
    assert.equal(new Set(survivors.map((h) => h.backend)).size, INSTANCES - 1, 'both survivors served the rest of the flow');
    assert.equal(stack.github.issues.filter((i) => i.title === args.title).length, 1);
    const row = await readConnection(stack.envFor(), 'carol', 'github');
    assert.equal(row?.status, 'active');
    assert.equal(row?.account_login, 'octocat');
    assertNoGitHubToken([repeat.text, connected.html, ...brokers.map((b) => b.output())]);
  });
});

describe('three instances, PostgreSQL restarted mid-flow', () => {
  const scaleOutTest = scaleOutPerSuite();

  scaleOutTest('goes not-ready during the outage, answers calls cleanly, recovers by itself, and finishes the flow', async (out, t) => {
    const { proxy, stack, brokers } = out;
    const args = { owner: 'octo-org', repo: 'scale', title: 'Survives a database restart' };
    const token = await stack.token('erin');
    const { link, requestState } = connectRequest(await firstCall(out.mcpUrl, token, 'github_create_issue', args));
    const browser = new SteeredBrowser(proxy);
    let consent = await browser.open(link);
    consent = await browser.submit(consent, { fields: { login: 'erin' } });
    assert.match(consent.html, /name="decision" value="allow"/, 'signed in, at the consent page');
    for (const b of brokers) assert.equal((await getJson(`${b.url}/readyz`)).status, 200);

    // --- outage ---
    const lostBefore = brokers.map((b) => logged(b.output(), 'postgres_listen_connection_lost'));
    const stoppedAt = Date.now();
    await server.stop();
    const notReadyAfter = await Promise.all(
      brokers.map((b) =>
        eventually(
          `${b.url}/readyz to answer 503`,
          async () => {
            const r = await getJson(`${b.url}/readyz`);
            return r.status === 503
              ? (assert.deepEqual(r.body, {
                  status: 'not_ready',
                  reason: 'database_unreachable',
                  store: 'postgres',
                  checks: { database: 'unreachable', identity_provider: 'ok' },
                }),
                Date.now() - stoppedAt)
              : undefined;
          },
          { timeoutMs: 5_000, intervalMs: 50 },
        ),
      ),
    );
    t.diagnostic(`/readyz answered 503 after ${notReadyAfter.join(', ')} ms`);
    for (const b of brokers) assert.deepEqual(await getJson(`${b.url}/healthz`), { status: 200, body: { status: 'ok' } });

    // Every instance answers a new call and the flow's repeat promptly and cleanly.
    const duringOutage = await Promise.all(
      brokers.flatMap((b) => [
        timed(
          rawCall(`${b.url}/mcp`, token, { method: 'tools/call', params: { name: 'github_whoami', arguments: {}, _meta: envelope() } }),
        ),
        timed(repeatCall(`${b.url}/mcp`, token, 'github_create_issue', args, requestState)),
      ]),
    );
    t.diagnostic(
      `tools/call during the outage: ${duringOutage.map(({ ms, reply }) => `HTTP ${reply.status} in ${ms} ms`).join('; ')}; e.g. ${duringOutage[1]!.reply.text.slice(0, 160)}`,
    );
    for (const { ms, reply } of duringOutage) {
      assert.ok(ms < 8_000, `answered in ${ms} ms, not hung`);
      assert.ok(reply.status < 500, `not a 5xx: ${reply.status} ${reply.text.slice(0, 300)}`);
      assert.doesNotMatch(reply.text, STACK_TRACE);
      const { error, result } = reply.json ?? {};
      assert.ok(
        error ? typeof error.message === 'string' : result?.isError === true,
        `a JSON-RPC error or an isError result: ${reply.text.slice(0, 300)}`,
      );
      assert.match(error?.message ?? resultText(result), /database/i, 'says what is wrong');
      assert.doesNotMatch(
        error?.message ?? resultText(result),
        /ECONNREFUSED|127\.0\.0\.1|postgres:\/\//i,
        'no database internals in the answer',
      );
    }
    assert.equal(stack.github.issues.filter((i) => i.title === args.title).length, 0);
    // Keep the database away until every LISTEN connection has failed a few reconnects.
    await eventually(
      'every instance to fail two LISTEN reconnects',
      () => brokers.every((b, i) => logged(b.output(), 'postgres_listen_connection_lost') >= lostBefore[i]! + 3),
      { timeoutMs: 10_000 },
    );

    // --- recovery ---
    await server.start();
    const startedAt = Date.now();
    const readyAfter = await Promise.all(
      brokers.map((b) =>
        eventually(
          `${b.url}/readyz to answer 200 again`,
          async () => ((await getJson(`${b.url}/readyz`)).status === 200 ? Date.now() - startedAt : undefined),
          { timeoutMs: 10_000, intervalMs: 50 },
        ),
      ),
    );
    const listenAfter = await eventually(
      'every instance to LISTEN again',
      async () => ((await listeners(out.databaseUrl)) === INSTANCES ? Date.now() - startedAt : undefined),
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    t.diagnostic(`after pg.start(): /readyz 200 after ${readyAfter.join(', ')} ms; all three LISTENing again after ${listenAfter} ms`);
    for (const b of brokers) assert.match(b.output(), /"event":"postgres_listen_connection_lost"/);

    // --- finish: repeat held on A, consent and callback on B ---
    const a = 0;
    const b = 1;
    const heldBefore = logged(brokers[a]!.output(), 'repeat_held');
    const repeat = held(repeatCall(`${brokers[a]!.url}/mcp`, token, 'github_create_issue', args, requestState));
    await eventually('instance A to hold the repeat', () => logged(brokers[a]!.output(), 'repeat_held') > heldBefore);
    assert.equal(repeat.answeredAt(), 0, 'the repeat is held');
    browser.route.set('GET /connect/github/callback', b);
    const authorize = await browser.submit(consent, { button: 'allow' });
    assert.match(authorize.html, /GitHub stand-in/);
    const callbackFrom = proxy.hits.length;
    const connected = await authorizeAtGitHub(browser, authorize, 'octocat');
    assert.match(textOf(connected.html), /Connected as @octocat/);
    assert.equal(answeredBy(proxy, 'GET', '/connect/github/callback', callbackFrom).backend, b);
    const reply = await repeat.reply;
    const latency = repeat.answeredAt() - browser.answeredAt.get('GET /connect/github/callback')!;
    t.diagnostic(`after the restart, held on ${a}, callback on ${b}: answered ${latency} ms after the callback`);
    assert.ok(latency < 1000, `answered ${latency} ms after the callback (want < 1000)`);
    assertCreated(reply, 'octo-org/scale');
    assert.equal(stack.github.issues.filter((i) => i.title === args.title).length, 1);
    assertNoGitHubToken([...duringOutage.map((d) => d.reply.text), reply.text, connected.html, ...brokers.map((x) => x.output())]);
    for (const x of brokers) assert.doesNotMatch(x.output(), /unhandled|uncaught/i);
  });
});

describe('three instances, the database lost during the code exchange', () => {
  const scaleOutTest = scaleOutPerSuite();

  scaleOutTest('answers the callback with a clear 503, revokes the token it could not keep, and a new link then works', async (out) => {
    const { stack } = out;
    const args = { owner: 'octo-org', repo: 'scale', title: 'Saved after a failed save' };
    const token = await stack.token('fay');
    const { link } = connectRequest(await firstCall(out.mcpUrl, token, 'github_create_issue', args));
    const browser = new Browser();
    const authorize = await upToGitHub(browser, link, 'fay');
    // GitHub issues the token on arrival and answers 700 ms later; the database goes in between.
    stack.github.faults = { exchangeDelayMs: 700 };
    const active = stack.github.activeTokenCount('octocat');
    const exchangesBefore = exchanges(stack.github);
    const stopping = eventually('the code exchange to reach GitHub', () => exchanges(stack.github) > exchangesBefore).then(() =>
      server.stop(),
    );
    const page = await authorizeAtGitHub(browser, authorize, 'octocat');
    await stopping;
    stack.github.faults = {};
    await server.start();
    assert.equal(page.status, 503, textOf(page.html).slice(0, 300));
    assert.match(textOf(page.html), /could not save the connection because its database is unavailable/);
    assert.match(textOf(page.html), /ask your assistant to try again/);
    assert.doesNotMatch(page.html, STACK_TRACE);
    await eventually(
      'the unkept token to be revoked at GitHub',
      async () => (stack.github.activeTokenCount('octocat') === active ? true : undefined),
      { timeoutMs: 5_000, intervalMs: 50 },
    );
    assert.equal(await readConnection(stack.envFor(), 'fay', 'github'), undefined, 'nothing was stored');

    // Asking again gives a fresh link, and that one connects.
    await eventually(
      'every instance to be ready',
      async () =>
        (await Promise.all(out.brokers.map((b) => getJson(`${b.url}/readyz`)))).every((r) => r.status === 200) ? true : undefined,
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    const again = connectRequest(await firstCall(out.mcpUrl, token, 'github_create_issue', args));
    assert.notEqual(again.link, link);
    const connected = await completeConnect(new Browser(), again.link, 'fay');
    assert.match(textOf(connected.html), /Connected as @octocat/);
    assertCreated(await repeatCall(out.mcpUrl, token, 'github_create_issue', args, again.requestState), 'octo-org/scale');
    assertNoGitHubToken([page.html, ...out.brokers.map((b) => b.output())]);
  });
});

describe('three instances, one rate limit', () => {
  const scaleOutTest = scaleOutPerSuite({ env: { RATE_LIMIT_PER_MINUTE: '5', MCP_RATE_LIMIT_PER_MINUTE: '40' } });

  scaleOutTest('counts a client once across every instance: the sixth sign-in in a minute is refused wherever it lands', async (out) => {
    const { proxy } = out;
    const from = proxy.hits.length;
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${proxy.url}/auth/login`, { redirect: 'manual' });
      statuses.push(res.status);
      await res.body?.cancel();
    }
    const served = new Set(proxy.hits.slice(from).map((h) => h.backend));
    assert.equal(served.size, INSTANCES, 'the six requests were spread over the three instances');
    assert.deepEqual(
      statuses.slice(0, 5).filter((s) => s === 429),
      [],
      `the first five pass: ${statuses}`,
    );
    assert.equal(statuses[5], 429, `the sixth is refused although its instance saw only two: ${statuses}`);
    const rows = await sql<{ key_hash: string; hits: number }>(out.databaseUrl, 'SELECT key_hash, hits FROM rate_limit_windows');
    assert.ok(rows.length > 0);
    assert.ok(
      rows.every((r) => /^[A-Za-z0-9_-]{43}$/.test(r.key_hash) && !r.key_hash.includes('127.0.0.1')),
      'only keyed hashes, never an address',
    );
  });

  scaleOutTest(
    'counts an MCP user once across every instance: once each has heard the count (within a second), the 41st call in a minute gets 429, Retry-After and a JSON-RPC error wherever it lands',
    async (out) => {
      const token = await out.stack.token('scale-limited');
      const from = out.proxy.hits.length;
      const list = () => rawCall(out.mcpUrl, token, { method: 'tools/list', params: { _meta: envelope() } });
      const replies: RawReply[] = [];
      for (let i = 0; i < 40; i++) replies.push(await list());
      assert.equal(new Set(out.proxy.hits.slice(from).map((h) => h.backend)).size, INSTANCES, 'spread over the three instances');
      assert.deepEqual(
        replies.filter((r) => r.status !== 200).map((r) => r.status),
        [],
        'the first forty pass',
      );
      // An instance answers from a count it heard within the last second, or asks the store first:
      // a second and a half on, every instance asks, hears the 40 and refuses.
      await new Promise((r) => setTimeout(r, 1_500));
      const later: RawReply[] = [];
      for (let i = 0; i < INSTANCES * 2; i++) later.push(await list());
      assert.deepEqual(
        later.map((r) => r.status),
        later.map(() => 429),
        'every later call is refused, although each instance saw about 14',
      );
      const limited = later[0]!;
      assert.ok(Number(limited.headers.get('retry-after')) >= 1);
      assert.equal(limited.json.error.code, -32000);
    },
  );

  scaleOutTest('makes one open pending connection for 30 concurrent calls from one user spread over the three instances', async (out) => {
    const token = await out.stack.token('scale-bounded');
    const replies = await Promise.all(
      Array.from({ length: 30 }, () =>
        rawCall(out.mcpUrl, token, { method: 'tools/call', params: { name: 'github_whoami', arguments: {}, _meta: envelope() } }),
      ),
    );
    const links = new Set(replies.map((r) => r.json.result.inputRequests.connect_account.params.url as string));
    assert.equal(links.size, 1, 'the same link from every instance');
    const rows = await sql<{ n: string }>(out.databaseUrl, "SELECT count(*) AS n FROM pending_connections WHERE subject = 'scale-bounded'");
    assert.equal(Number(rows[0]!.n), 1);
  });
});
