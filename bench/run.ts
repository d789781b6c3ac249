// `npm run bench`: the broker against a bare MCP server, on loopback, in one run.
// Prints a table and writes bench/results.json; bench/README.md explains every row.
//
// Processes: this one (orchestration, the load generator, the identity provider, which the brokers
// only contact to discover it and fetch its JWKS once), and children for the baseline server, the
// GitHub stand-in and each broker (`node --import tsx src/main.ts`, exactly as the tests spawn it).
// The `postgres` phase adds a throwaway PostgreSQL cluster (test/support/postgres.ts), brokers on
// it, and the round-robin proxy in a process of its own (bench/lib/proxy-server.ts).
//
// Knobs (environment): BENCH_DURATION (seconds per autocannon run, default 5), BENCH_ROWS (largest
// store size, default 1000000), BENCH_PROFILE=1 (broker A and the baseline run with --cpu-prof, into
// bench/profiles/{broker,baseline}/; summarise with bench/profile-summary.ts). Partial runs, for
// profiling: BENCH_PHASES, BENCH_CONCURRENCY, BENCH_ROUNDS, BENCH_TOOLS (see bench/README.md).
import { McpServer, type McpRequestContext } from '@modelcontextprotocol/server';
import autocannon from 'autocannon';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { AccessTokenVerifier } from '../src/auth/bearer.js';
import { OidcClient } from '../src/auth/oidc-client.js';
import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import { ConnectionService } from '../src/connect/connections.js';
import { Sealer } from '../src/crypto/index.js';
import { createLogger } from '../src/log.js';
import type { ToolDeps } from '../src/mcp/context.js';
import { withCallScope } from '../src/mcp/call-scope.js';
import { createToolStateCodec } from '../src/mcp/request-state.js';
import { buildMcpServer } from '../src/mcp/server.js';
import { openDatabase } from '../src/store/sqlite/database.js';
import { openSqliteStore } from '../src/store/index.js';
import { openPostgresStore } from '../src/store/postgres/index.js';
import { SandboxGitHubStore } from '../src/store/sqlite/sandbox-github-store.js';
import { Browser, type Page } from '../test/support/browser.js';
import { freePort, startIdp, type StartedIdp } from '../test/support/idp.js';
import { envelope, rawCall } from '../test/support/mcp.js';
import { startPostgres, type PgServer } from '../test/support/postgres.js';
import { BROKER_CLIENT } from '../test/support/stack.js';
import { clusterCpuMs, postgresUnavailable, postmasterPid } from './lib/postgres.js';
import { cpuMs, rssBytes, spawnNode, type Child } from './lib/proc.js';
import { mb, mean, ms, percentile, round, summary, us } from './lib/stats.js';

const BENCH_DIR = fileURLToPath(new URL('./', import.meta.url));
const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const MAX_ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const PROFILE = process.env.BENCH_PROFILE === '1';
const PHASES = new Set((process.env.BENCH_PHASES ?? 'throughput,overhead,first,completion,postgres,held,store').split(',').map((p) => p.trim()));
const phase = (name: string) => PHASES.has(name);
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? '1,16,64').split(',').map(Number);
const CONNECTED_USERS = 256;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const FIRST_CALLS = 200;
const COMPLETION_SAMPLES = 20;
const HELD = 1000;
const LOOKUPS = 20_000;

const silent = createLogger('error', () => {});
const started = Date.now();
const say = (line: string) => process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s] ${line}\n`);

// ------------------------------------------------------------------------------------ the wire

/** Headers of a 2026-07-28 tools/call, as `rawCall` in test/support/mcp.ts sends them. */
function callHeaders(tool: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/call',
    'mcp-name': tool,
  };
}

/** A tools/call without arguments from a client that declares URL and form elicitation. */
function callBody(tool: string): string {
  return JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: {}, _meta: envelope() } });
}

type Reply = Awaited<ReturnType<typeof rawCall>>;

function firstCall(url: string, token: string, tool = 'github_whoami'): Promise<Reply> {
  return rawCall(`${url}/mcp`, token, { method: 'tools/call', params: { name: tool, arguments: {}, _meta: envelope() } });
}

function repeatCall(url: string, token: string, requestState: string, tool = 'github_whoami'): Promise<Reply> {
  return rawCall(`${url}/mcp`, token, {
    id: 2,
    method: 'tools/call',
    params: { name: tool, arguments: {}, inputResponses: { connect_account: { action: 'accept' } }, requestState, _meta: envelope() },
  });
}

function connectRequest(reply: Reply): { link: string; requestState: string } {
  const result = reply.json?.result;
  if (reply.status !== 200 || result?.resultType !== 'input_required') throw new Error(`expected input_required, got ${reply.status} ${reply.text.slice(0, 300)}`);
  return { link: result.inputRequests.connect_account.params.url as string, requestState: result.requestState as string };
}

function expectComplete(reply: Reply, what: string): any {
  const result = reply.json?.result;
  if (reply.status !== 200 || result?.resultType !== 'complete' || result.isError) throw new Error(`${what}: expected a complete result, got ${reply.status} ${reply.text.slice(0, 300)}`);
  return result;
}

/** Runs `fn` over `items` with at most `limit` in flight. */
async function pool<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

// ------------------------------------------------------------------------------- load (autocannon)

interface LoadResult {
  target: string;
  connections: number;
  seconds: number;
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  mean: number;
  errors: number;
  non2xx: number;
  badBodies: number;
  /** CPU time of the server process (and of the GitHub stand-in, for github_whoami) per request, in µs. */
  cpuPerRequestUs: number;
  upstreamCpuPerRequestUs: number;
  /** CPU per request, in µs, of the other processes `load` was told to watch (PostgreSQL, the proxy). */
  extraCpuPerRequestUs?: Record<string, number>;
}

interface Run {
  requests: number;
  seconds: number;
  latencies: number[];
  errors: number;
  non2xx: number;
  badBodies: number;
  serverCpuMs: number;
  upstreamCpuMs: number;
  extraCpuMs: Record<string, number>;
}

/**
 * One autocannon run: a fixed body and headers, the Authorization header rotating over `tokens`
 * (one user per token) through `setupRequest`. Latencies are kept at full precision from the
 * `response` event (autocannon's own histogram rounds to whole milliseconds), and the CPU time the
 * server process (and `upstreamPid`, the GitHub stand-in) spent is read from /proc around the run.
 */
async function load(
  url: string,
  tool: string,
  tokens: readonly string[],
  connections: number,
  seconds: number,
  serverPid: number | readonly number[],
  upstreamPid?: number,
  extraCpu: Record<string, () => number> = {},
): Promise<Run> {
  let next = 0;
  let badBodies = 0;
  const latencies: number[] = [];
  const base = callHeaders(tool);
  // Several server processes (instances behind a proxy) count together.
  const serverCpu = () => (typeof serverPid === 'number' ? cpuMs(serverPid) : serverPid.reduce((a, pid) => a + cpuMs(pid), 0));
  const extra0 = Object.fromEntries(Object.entries(extraCpu).map(([k, f]) => [k, f()]));
  const cpu0 = serverCpu();
  const up0 = upstreamPid ? cpuMs(upstreamPid) : 0;
  const instance = autocannon({
    url: `${url}/mcp`,
    connections,
    duration: seconds,
    timeout: 10,
    method: 'POST',
    headers: base,
    body: callBody(tool),
    requests: [
      {
        setupRequest: (req: any) => {
          req.headers = { ...base, authorization: `Bearer ${tokens[next++ % tokens.length]}` };
          return req;
        },
        onResponse: (status: number, body: string) => {
          if (status !== 200 || !body.includes('"resultType":"complete"') || body.includes('"isError":true')) badBodies++;
        },
      },
    ],
  } as autocannon.Options) as unknown as autocannon.Instance & Promise<autocannon.Result>;
  instance.on('response', (_client: unknown, _status: number, _bytes: number, responseTime: number) => void latencies.push(responseTime));
  const result = await instance;
  return {
    requests: result['2xx'],
    seconds: (new Date(result.finish).getTime() - new Date(result.start).getTime()) / 1000,
    latencies,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    badBodies,
    serverCpuMs: serverCpu() - cpu0,
    upstreamCpuMs: upstreamPid ? cpuMs(upstreamPid) - up0 : 0,
    extraCpuMs: Object.fromEntries(Object.entries(extraCpu).map(([k, f]) => [k, f() - extra0[k]!])),
  };
}

/** Pools the rounds of one target at one concurrency. */
function combine(target: string, connections: number, runs: Run[]): LoadResult {
  const latencies = runs.flatMap((r) => r.latencies);
  const requests = runs.reduce((a, r) => a + r.requests, 0);
  const seconds = runs.reduce((a, r) => a + r.seconds, 0);
  const sum = (f: (r: Run) => number) => runs.reduce((a, r) => a + f(r), 0);
  const extra = [...new Set(runs.flatMap((r) => Object.keys(r.extraCpuMs)))];
  return {
    target,
    connections,
    seconds: round(seconds, 2),
    requests,
    rps: requests / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    mean: mean(latencies),
    errors: sum((r) => r.errors),
    non2xx: sum((r) => r.non2xx),
    badBodies: sum((r) => r.badBodies),
    cpuPerRequestUs: (sum((r) => r.serverCpuMs) * 1000) / requests,
    upstreamCpuPerRequestUs: (sum((r) => r.upstreamCpuMs) * 1000) / requests,
    ...(extra.length ? { extraCpuPerRequestUs: Object.fromEntries(extra.map((k) => [k, (sum((r) => r.extraCpuMs[k] ?? 0) * 1000) / requests])) } : {}),
  };
}

// ------------------------------------------------------------------------------ browser timing

/** A browser pinned to one broker process (like a load balancer would route it) that notes when the provider callback starts and finishes. */
class TimedBrowser extends Browser {
  callbackStartedAt = 0;
  callbackDoneAt = 0;

  constructor(
    private readonly publicOrigin: string,
    private readonly backendOrigin: string,
  ) {
    super();
  }

  override async request(url: string, init: { method?: string; body?: URLSearchParams; headers?: Record<string, string> } = {}): Promise<Response> {
    const u = new URL(url);
    const target = u.origin === this.publicOrigin ? new URL(u.pathname + u.search, this.backendOrigin).href : url;
    const isCallback = u.pathname === '/connect/github/callback';
    if (isCallback) this.callbackStartedAt = performance.now();
    const res = await super.request(target, init);
    if (isCallback) this.callbackDoneAt = performance.now();
    return res;
  }
}

/** Signs in at the IdP and consents on our page, stopping at GitHub's authorize form. */
async function upToGitHub(browser: Browser, link: string, user: string): Promise<Page> {
  let page = await browser.open(link);
  if (/Development sign-in/.test(page.html)) page = await browser.submit(page, { fields: { login: user } });
  if (page.status !== 200) throw new Error(`consent page: ${page.status} ${page.html.slice(0, 300)}`);
  page = await browser.submit(page, { button: 'allow' });
  if (!/GitHub stand-in/.test(page.html)) throw new Error(`expected the GitHub authorize page, got ${page.status} ${page.url}`);
  return page;
}

/**
 * COMPLETION_SAMPLES (after 2 warm-up) of: a first call on `heldOn`, the browser part up to GitHub's
 * authorize form on `callbackOn`, the repeat sent to `heldOn` and held, and 150 ms later the
 * authorization submitted, so the provider callback lands on `callbackOn`. Returns, per sample, the
 * ms from the browser receiving the callback page (and from sending the callback request) to the
 * held repeat returning its result.
 */
async function completionSamples(publicUrl: string, heldOn: string, callbackOn: string, subPrefix: string): Promise<{ afterDone: number[]; afterStart: number[] }> {
  const afterDone: number[] = [];
  const afterStart: number[] = [];
  for (let i = 0; i < COMPLETION_SAMPLES + 2; i++) {
    const sub = `${subPrefix}-${i}`;
    const token = await idp!.mintAccessToken({ sub, expiresInSeconds: 3600 });
    const { link, requestState } = connectRequest(await firstCall(heldOn, token));
    const browser = new TimedBrowser(publicUrl, callbackOn);
    const authorize = await upToGitHub(browser, link, sub);
    let answeredAt = 0;
    const held = repeatCall(heldOn, token, requestState).then((r) => {
      answeredAt = performance.now();
      return r;
    });
    await sleep(150);
    if (answeredAt) throw new Error('the repeat was not held');
    const done = await browser.submit(authorize, { button: 'authorize', fields: { login: sub } });
    if (done.status !== 200 || !/Connected/.test(done.html)) throw new Error(`callback page: ${done.status}`);
    const result = expectComplete(await held, 'held repeat');
    if (result.structuredContent.login !== sub) throw new Error(`held repeat answered for ${result.structuredContent.login}`);
    if (i < 2) continue; // warm-up
    afterDone.push(answeredAt - browser.callbackDoneAt);
    afterStart.push(answeredAt - browser.callbackStartedAt);
  }
  return { afterDone, afterStart };
}

// ---------------------------------------------------------------------------------------- main

interface Row {
  section: string;
  measure: string;
  value: string;
  target?: string;
  met?: boolean;
}

const rows: Row[] = [];
const results: Record<string, unknown> = {};
const children: Child[] = [];
let dir = '';
let idp: StartedIdp | undefined;
let pgServer: PgServer | undefined;

function machine() {
  const cpu = /^model name\s*:\s*(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown';
  let free = '';
  try {
    free = execFileSync('free', ['-h'], { encoding: 'utf8' }).trim();
  } catch {
    free = 'free(1) not available';
  }
  return { nproc: availableParallelism(), cpu, free, node: process.version, kernel: release(), loadavgAtStart: loadavg().map((n) => round(n, 2)) };
}

/** Starts a child server and keeps it in `children`, so that the end of the run stops it. */
async function start(name: string, script: string, env: Record<string, string>, execArgv: string[] = []): Promise<Child> {
  const child = await spawnNode(name, script, env, execArgv);
  children.push(child);
  return child;
}

/** A broker process: `node --import tsx src/main.ts`, configured by `env`. */
const spawnBroker = (name: string, env: Record<string, string>, execArgv: string[] = []) => start(name, 'src/main.ts', env, execArgv);

async function main(): Promise<void> {
  results.machine = machine();
  results.settings = { durationSeconds: DURATION, rounds: ROUNDS, concurrency: CONCURRENCY, connectedUsers: CONNECTED_USERS, firstCalls: FIRST_CALLS, completionSamples: COMPLETION_SAMPLES, held: HELD, storeRows: [1000, MAX_ROWS], lookups: LOOKUPS };
  dir = mkdtempSync(join(tmpdir(), 'broker-bench-'));

  // ---- identity provider, GitHub stand-in, seeded users
  const portA = await freePort();
  const publicUrl = `http://127.0.0.1:${portA}`;
  idp = await startIdp({
    clients: [{ client_id: BROKER_CLIENT.id, client_secret: BROKER_CLIENT.secret, redirect_uris: [`${publicUrl}/auth/callback`], token_endpoint_auth_method: 'client_secret_basic' }],
    resource: `${publicUrl}/mcp`,
  });
  const github = { clientId: 'Iv1.bench', clientSecret: randomBytes(20).toString('hex') };
  const sandboxDb = join(dir, 'github.db');
  const brokerDb = join(dir, 'broker.db');
  const encryptionKey = randomBytes(32);
  const users = Array.from({ length: CONNECTED_USERS }, (_, i) => ({ sub: `bench-user-${i}`, login: `bench-gh-${i}`, githubToken: `gho_${randomBytes(18).toString('hex')}` }));
  {
    const db = openDatabase(sandboxDb);
    const sandbox = new SandboxGitHubStore(db);
    for (const u of users) {
      sandbox.ensureUser(u.login);
      sandbox.issueToken(u.githubToken, { clientId: github.clientId, login: u.login, scopes: ['repo'], issuedAt: Date.now() }, 10);
    }
    db.close();
  }
  {
    // Connections are written through the real ConnectionService, sealed with the broker's key.
    const store = openSqliteStore(brokerDb);
    const service = new ConnectionService(store, new Sealer([encryptionKey]), silent);
    for (const [i, u] of users.entries()) {
      await service.save(principalFromVerifiedClaims(idp!.issuer, u.sub), 'github', { id: String(1000 + i), login: u.login }, { accessToken: u.githubToken, tokenType: 'bearer', scopes: ['repo'] }, { refuseShared: false });
    }
    await store.close();
  }
  const gh = await start('github', 'bench/servers/github.ts', { SANDBOX_DB: sandboxDb, GITHUB_CLIENT_ID: github.clientId, GITHUB_CLIENT_SECRET: github.clientSecret });
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PUBLIC_URL: publicUrl,
    DATABASE_PATH: brokerDb,
    OIDC_ISSUER: idp.issuer,
    OIDC_CLIENT_ID: BROKER_CLIENT.id,
    OIDC_CLIENT_SECRET: BROKER_CLIENT.secret,
    GITHUB_CLIENT_ID: github.clientId,
    GITHUB_CLIENT_SECRET: github.clientSecret,
    GITHUB_WEB_URL: gh.url,
    GITHUB_API_URL: `${gh.url}/api/v3`,
    BROKER_SECRET: randomBytes(32).toString('base64url'),
    TOKEN_ENCRYPTION_KEY: encryptionKey.toString('base64'),
    REPEAT_HOLD_SECONDS: '20',
    LOG_LEVEL: 'info',
    // The completion runs drive ~20 sign-ins per process from one IP; page rate limits would refuse them.
    RATE_LIMIT_PER_MINUTE: '0',
    // The throughput phases send thousands of calls a minute as one user.
    MCP_RATE_LIMIT_PER_MINUTE: '0',
  };
  const tokens = await Promise.all(users.map((u) => idp!.mintAccessToken({ sub: u.sub, expiresInSeconds: 3600 })));

  const profileDir = join(BENCH_DIR, 'profiles');
  if (PROFILE) mkdirSync(profileDir, { recursive: true });
  // allSettled: if one fails to start, the other is still in `children` before the run stops them.
  const [baselineStart, brokerStart] = await Promise.allSettled([
    start('baseline', 'bench/servers/baseline.ts', {}, PROFILE ? ['--cpu-prof', '--cpu-prof-dir', join(profileDir, 'baseline')] : []),
    spawnBroker('broker A', { ...env, PORT: String(portA) }, PROFILE ? ['--cpu-prof', '--cpu-prof-dir', join(profileDir, 'broker')] : []),
  ]);
  if (baselineStart.status === 'rejected') throw baselineStart.reason;
  if (brokerStart.status === 'rejected') throw brokerStart.reason;
  const baseline = baselineStart.value;
  const brokerA = brokerStart.value;
  say(`baseline ${baseline.url}, broker A ${brokerA.url}, GitHub stand-in ${gh.url}, ${users.length} connected users`);

  // ---- sanity: every target answers what it should before it is loaded
  expectComplete(await rawCall(`${baseline.url}/mcp`, undefined, { method: 'tools/call', params: { name: 'ping', arguments: {}, _meta: envelope() } }), 'baseline ping');
  const listed = expectComplete(await firstCall(brokerA.url, tokens[0]!, 'list_connections'), 'list_connections');
  if (listed.structuredContent.connections[0]?.login !== users[0]!.login) throw new Error(`list_connections: ${JSON.stringify(listed.structuredContent)}`);
  const whoami = expectComplete(await firstCall(brokerA.url, tokens[1]!, 'github_whoami'), 'github_whoami');
  if (whoami.structuredContent.login !== users[1]!.login) throw new Error(`github_whoami: ${JSON.stringify(whoami.structuredContent)}`);

  // ---- 1. throughput and latency, side by side at each concurrency
  const targets = [
    { name: 'baseline ping', url: baseline.url, tool: 'ping', pid: baseline.pid, upstream: undefined },
    { name: 'broker list_connections', url: brokerA.url, tool: 'list_connections', pid: brokerA.pid, upstream: undefined },
    { name: 'broker github_whoami', url: brokerA.url, tool: 'github_whoami', pid: brokerA.pid, upstream: gh.pid },
  ].filter((t) => !process.env.BENCH_TOOLS || process.env.BENCH_TOOLS.split(',').includes(t.tool));
  const load1: LoadResult[] = [];
  if (phase('throughput')) {
    for (const c of CONCURRENCY) {
      // Interleaved rounds (A B C, then C B A), so a neighbour's burst on this shared machine hits
      // every target alike and the ratios stay meaningful even when the absolute figures move.
      const runs = new Map<string, Run[]>(targets.map((t) => [t.name, []]));
      for (const t of targets) await load(t.url, t.tool, tokens, c, 1, t.pid); // warm-up, not recorded
      for (let round = 0; round < ROUNDS; round++) {
        for (const t of round % 2 === 0 ? targets : [...targets].reverse()) runs.get(t.name)!.push(await load(t.url, t.tool, tokens, c, DURATION, t.pid, t.upstream));
      }
      for (const t of targets) {
        const r = combine(t.name, c, runs.get(t.name)!);
        load1.push(r);
        say(
          `${t.name.padEnd(24)} c=${String(c).padStart(2)}: ${Math.round(r.rps)} req/s, p50 ${ms(r.p50)}, p99 ${ms(r.p99)}, CPU ${us(r.cpuPerRequestUs)}/req` +
            (t.upstream ? ` (+ GitHub stand-in ${us(r.upstreamCpuPerRequestUs)})` : '') +
            (r.errors + r.non2xx + r.badBodies ? `, ${r.errors} errors, ${r.non2xx} non-2xx, ${r.badBodies} bad bodies` : ''),
        );
      }
    }
    results.throughput = load1.map((r) => ({ ...r, rps: round(r.rps), p50: round(r.p50), p99: round(r.p99), mean: round(r.mean), cpuPerRequestUs: round(r.cpuPerRequestUs), upstreamCpuPerRequestUs: round(r.upstreamCpuPerRequestUs) }));
    for (const c of CONCURRENCY) {
      const base = load1.find((r) => r.connections === c && r.target === 'baseline ping');
      if (!base) continue;
      rows.push({ section: 'throughput', measure: `baseline ping, c=${c}`, value: `${Math.round(base.rps)} req/s, p50 ${ms(base.p50)}, p99 ${ms(base.p99)}; CPU ${us(base.cpuPerRequestUs)}/req` });
      for (const tool of ['list_connections', 'github_whoami']) {
        const r = load1.find((x) => x.connections === c && x.target === `broker ${tool}`);
        if (!r) continue;
        const ratio = r.rps / base.rps;
        const clean = r.errors + r.non2xx + r.badBodies === 0;
        rows.push({
          section: 'throughput',
          measure: `${tool}, c=${c}`,
          value:
            `${Math.round(r.rps)} req/s = ${Math.round(ratio * 100)} % of baseline, p50 ${ms(r.p50)}, p99 ${ms(r.p99)}; CPU ${us(r.cpuPerRequestUs)}/req` +
            (r.upstreamCpuPerRequestUs ? ` + ${us(r.upstreamCpuPerRequestUs)} stand-in` : '') +
            (clean ? '' : ' — ERRORS'),
          target: '≥ 70 % of baseline',
          met: clean && ratio >= 0.7,
        });
        if (c === 16) rows.push({ section: 'latency', measure: `${tool} p99, c=16`, value: `${ms(r.p99)} (baseline ${ms(base.p99)})`, target: '< 20 ms', met: clean && r.p99 < 20 });
      }
    }
    const c1 = (t: string) => load1.find((r) => r.connections === 1 && r.target === t)!;
    if (CONCURRENCY.includes(1) && targets.length === 3) {
      results.perRequestOverhead = {
        note: 'c=1 closed loop: mean time per request (1000 / req/s) minus the baseline\'s, in ms; and server CPU per request minus the baseline\'s, in µs (all concurrencies pooled)',
        wallMs: {
          list_connections: round(1000 / c1('broker list_connections').rps - 1000 / c1('baseline ping').rps),
          github_whoami: round(1000 / c1('broker github_whoami').rps - 1000 / c1('baseline ping').rps),
        },
        cpuUs: Object.fromEntries(
          ['list_connections', 'github_whoami'].map((tool) => {
            const cpu = (name: string) => mean(load1.filter((r) => r.target === name).map((r) => r.cpuPerRequestUs));
            return [tool, round(cpu(`broker ${tool}`) - cpu('baseline ping'))];
          }),
        ),
      };
    }
  }

  // ---- 2. where the per-request overhead goes, measured in this process on the same data
  if (phase('overhead')) {
    const verifier = new AccessTokenVerifier(new OidcClient({ issuer: new URL(idp.issuer), clientId: BROKER_CLIENT.id, clientSecret: BROKER_CLIENT.secret }), `${publicUrl}/mcp`);
    await verifier.verifyAccessToken(tokens[0]!); // discovery + JWKS fetch, then cached
    const store = openSqliteStore(brokerDb);
    const sealer = new Sealer([encryptionKey]);
    const service = new ConnectionService(store, sealer, silent);
    const principals = users.map((u) => principalFromVerifiedClaims(idp!.issuer, u.sub));
    const rowsFor = await Promise.all(principals.map(async (p) => (await store.connections.find(p, 'github'))!));
    /** Mean µs of `fn(warm … warm + n - 1)` after `fn(0 … warm - 1)` as a warm-up. */
    const time = async (n: number, fn: (i: number) => unknown, warm = Math.min(n, 500)): Promise<number> => {
      for (let i = 0; i < warm; i++) await fn(i);
      const t0 = performance.now();
      for (let i = warm; i < warm + n; i++) await fn(i);
      return ((performance.now() - t0) * 1000) / n;
    };
    // A token seen for the first time pays for the signature check; a repeat finds it verified.
    const unseen = await Promise.all(Array.from({ length: 600 }, (_, i) => idp!.mintAccessToken({ sub: `bench-unseen-${i}`, expiresInSeconds: 3600 })));
    const parts: Record<string, number> = {
      jwtVerifyFirstSight: await time(500, (i) => verifier.verifyAccessToken(unseen[i]!), 100),
      jwtVerifyRepeat: await time(20000, (i) => verifier.verifyAccessToken(tokens[i % tokens.length]!)),
      storeFind: await time(20000, (i) => store.connections.find(principals[i % principals.length]!, 'github')),
      storeList: await time(20000, (i) => store.connections.list(principals[i % principals.length]!)),
      decrypt: await time(20000, (i) => {
        const r = rowsFor[i % rowsFor.length]!;
        return sealer.open({ keyId: r.key_id, value: r.sealed_tokens }, { issuer: r.issuer, subject: r.subject, provider: r.provider });
      }),
      connectionOpen: await time(20000, (i) => service.open(principals[i % principals.length]!, 'github')),
      touch: await time(2000, (i) => store.connections.touch(principals[i % principals.length]!, 'github')),
      // What the SDK's per-request server costs: ours (every tool registered) against the baseline's.
      baselineServerBuild: await time(5000, () => {
        const server = new McpServer({ name: 'b', version: '1' }, { capabilities: { tools: {} } });
        server.registerTool('ping', { description: 'Answers pong.', inputSchema: z.object({}) }, () => ({ content: [{ type: 'text', text: 'pong' }] }));
      }),
    };
    try {
      const deps = { codec: createToolStateCodec(randomBytes(32), 600), log: silent, publicUrl: new URL(publicUrl), store, connections: service, github: { provider: {}, api: {} }, providers: new Map() };
      // As the HTTP layer hands it over: the verified principal plus the scope of the call.
      const authInfo = await verifier.verifyAccessToken(tokens[0]!);
      const forCall = { era: 'modern', authInfo: withCallScope(authInfo, { method: 'tools/call', params: { name: 'list_connections', arguments: {} } }) } as McpRequestContext;
      const forList = { era: 'modern', authInfo: withCallScope(authInfo, { method: 'tools/list' }) } as McpRequestContext;
      parts.brokerServerBuildForCall = await time(5000, () => buildMcpServer(forCall, deps as unknown as ToolDeps));
      parts.brokerServerBuildAllTools = await time(5000, () => buildMcpServer(forList, deps as unknown as ToolDeps));
    } catch (err) {
      process.stderr.write(`(broker server build not measured: ${err instanceof Error ? err.message : String(err)})\n`);
    }
    await store.close();
    results.overheadPartsMicroseconds = Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, round(v)]));
    const overhead = results.perRequestOverhead as { wallMs: Record<string, number>; cpuUs: Record<string, number> } | undefined;
    if (overhead) {
      rows.push({
        section: 'overhead',
        measure: 'per request vs baseline',
        value: `list_connections +${ms(overhead.wallMs.list_connections!)} at c=1, +${us(overhead.cpuUs.list_connections!)} CPU; github_whoami +${ms(overhead.wallMs.github_whoami!)}, +${us(overhead.cpuUs.github_whoami!)} CPU (broker only)`,
      });
    }
    rows.push({
      section: 'overhead',
      measure: 'of which (in-process, mean)',
      value:
        `JWT verify ${us(parts.jwtVerifyFirstSight!)} first sight / ${us(parts.jwtVerifyRepeat!)} repeat; store find ${us(parts.storeFind!)}, list ${us(parts.storeList!)}; ` +
        `decrypt ${us(parts.decrypt!)}; touch ${us(parts.touch!)}; MCP server per tools/call ${parts.brokerServerBuildForCall ? us(parts.brokerServerBuildForCall) : 'n/a'} (baseline ${us(parts.baselineServerBuild!)})`,
    });
    say(`overhead parts: ${JSON.stringify(results.overheadPartsMicroseconds)}`);
  }

  // ---- 3. first call to URL: a call that ends in input_required
  if (phase('first')) {
    const fresh = await Promise.all(Array.from({ length: FIRST_CALLS + 20 }, (_, i) => idp!.mintAccessToken({ sub: `bench-new-${i}`, expiresInSeconds: 3600 })));
    const latencies: number[] = [];
    for (let i = 0; i < fresh.length; i++) {
      const t0 = performance.now();
      const reply = await firstCall(brokerA.url, fresh[i]!);
      const dt = performance.now() - t0;
      connectRequest(reply);
      if (i >= 20) latencies.push(dt); // the first 20 warm up
    }
    const s = summary(latencies);
    results.firstCallToUrl = { ...s, p50: round(s.p50), p99: round(s.p99), mean: round(s.mean), max: round(s.max) };
    rows.push({ section: 'first call', measure: `github_whoami → input_required (c=1, n=${s.n})`, value: `p50 ${ms(s.p50)}, p99 ${ms(s.p99)}` });
    say(`first call to URL: p50 ${ms(s.p50)}, p99 ${ms(s.p99)}`);
  }

  // ---- 4. completion detection: callback finished → held repeat answered
  if (phase('completion')) {
    const portB = await freePort();
    const brokerB = await spawnBroker('broker B', { ...env, PORT: String(portB) });
    const completion: Record<string, unknown> = {};
    for (const mode of ['same process', 'across processes'] as const) {
      const { afterDone, afterStart } = await completionSamples(publicUrl, brokerA.url, mode === 'same process' ? brokerA.url : brokerB.url, `bench-cd-${mode === 'same process' ? 's' : 'x'}`);
      const s = summary(afterDone);
      const st = summary(afterStart);
      completion[mode] = { fromCallbackFinished: { ...s, p50: round(s.p50), p99: round(s.p99), mean: round(s.mean), max: round(s.max) }, fromCallbackStarted: { p50: round(st.p50), p99: round(st.p99) } };
      rows.push({
        section: 'completion',
        measure: `${mode} (n=${s.n})`,
        value: `p50 ${ms(s.p50)}, p99 ${ms(s.p99)} after the callback page arrived (${ms(st.p50)} / ${ms(st.p99)} after it was requested)`,
        target: 'p50 < 250 ms',
        met: s.p50 < 250,
      });
      say(`completion detection, ${mode}: p50 ${ms(s.p50)}, p99 ${ms(s.p99)}`);
    }
    results.completionDetection = completion;
    await brokerB.stop();
  }
  // ---- 5. PostgreSQL beside SQLite (broker A is still up, so its figures are taken in the same rounds)
  if (phase('postgres')) {
    const unavailable = postgresUnavailable();
    if (unavailable) say(`postgres phase skipped: ${unavailable}`);
    else await postgresPhase({ publicUrl, env, users, tokens, encryptionKey, baseline, brokerA, gh });
  }

  await brokerA.stop(); // SIGTERM: a graceful exit, which also writes the CPU profile when asked
  await baseline.stop();
  await gh.stop();

  // ---- 5. memory and CPU with 1,000 held repeats, in a fresh broker process
  if (phase('held')) {
    const heldDb = join(dir, 'held.db');
    const brokerC = await spawnBroker('broker C', { ...env, PORT: '0', DATABASE_PATH: heldDb, REPEAT_HOLD_SECONDS: '30' });
    const idleRss = rssBytes(brokerC.pid);
    const heldTokens = await Promise.all(Array.from({ length: HELD }, (_, i) => idp!.mintAccessToken({ sub: `bench-held-${i}`, expiresInSeconds: 3600 })));
    const states = await pool(heldTokens, 16, async (token) => connectRequest(await firstCall(brokerC.url, token)).requestState);
    await sleep(1000);
    const beforeRss = rssBytes(brokerC.pid);
    const idleCpu0 = cpuMs(brokerC.pid);
    await sleep(3000);
    const idleCpuMs = cpuMs(brokerC.pid) - idleCpu0;

    let answered = 0;
    const t0 = performance.now();
    const replies = heldTokens.map((token, i) =>
      repeatCall(brokerC.url, token, states[i]!).then((r) => {
        answered++;
        return r;
      }),
    );
    // Held once the broker has taken every request and gone quiet.
    let last = cpuMs(brokerC.pid);
    for (let quiet = 0, waited = 0; quiet < 2 && waited < 15_000; waited += 500) {
      await sleep(500);
      const now = cpuMs(brokerC.pid);
      quiet = now - last < 30 ? quiet + 1 : 0;
      last = now;
    }
    const settledAfterMs = performance.now() - t0;
    const samples: number[] = [];
    const cpu0 = cpuMs(brokerC.pid);
    const wall0 = performance.now();
    for (let i = 0; i < 16; i++) {
      await sleep(500);
      samples.push(rssBytes(brokerC.pid));
    }
    const heldCpuMs = cpuMs(brokerC.pid) - cpu0;
    const heldWallMs = performance.now() - wall0;
    const heldRss = Math.max(...samples);
    const stillHeld = HELD - answered;
    // Release them all: a graceful stop answers each held call `input_required` with its link.
    const r0 = performance.now();
    await brokerC.stop();
    const finals = await Promise.allSettled(replies);
    const releasedMs = performance.now() - r0;
    const askedAgain = finals.filter((f) => f.status === 'fulfilled' && f.value.json?.result?.resultType === 'input_required').length;
    const cpuPercent = (heldCpuMs / heldWallMs) * 100;
    results.heldRepeats = {
      held: HELD,
      stillHeldWhileMeasuring: stillHeld,
      settledAfterMs: round(settledAfterMs),
      rssIdleAfterStartMB: round(idleRss / 2 ** 20),
      rssBeforeMB: round(beforeRss / 2 ** 20),
      rssWhileHeldMB: round(heldRss / 2 ** 20),
      rssPerHeldKB: round((heldRss - beforeRss) / 1024 / HELD),
      cpuWhileHeldMs: round(heldCpuMs),
      cpuWhileHeldWindowMs: round(heldWallMs),
      cpuWhileHeldPercent: round(cpuPercent),
      cpuIdleBeforeMsPer3s: round(idleCpuMs),
      answeredInputRequiredOnStop: askedAgain,
      releasedInMs: round(releasedMs),
    };
    rows.push({
      section: 'memory',
      measure: `RSS with ${stillHeld} repeats held`,
      value: `${mb(heldRss)} (before ${mb(beforeRss)}, +${round((heldRss - beforeRss) / 1024 / HELD)} KB each)`,
      target: '< 300 MB',
      met: heldRss < 300 * 2 ** 20 && stillHeld === HELD,
    });
    rows.push({
      section: 'memory',
      measure: `CPU while holding (${round(heldWallMs / 1000, 1)} s)`,
      value: `${round(heldCpuMs)} ms = ${round(cpuPercent, 2)} % of a core; ${askedAgain}/${HELD} answered input_required on release`,
      target: 'no spin (≈ 0)',
      met: cpuPercent < 2 && askedAgain === HELD,
    });
    say(`held: ${JSON.stringify(results.heldRepeats)}`);
  }
  await idp.close();
  idp = undefined;

  // ---- 6. scale of the store: lookups with 1k vs 1M stored connections
  if (phase('store')) {
    const scale: Record<string, unknown> = {};
    const measured: Record<number, { find: ReturnType<typeof summary>; open: ReturnType<typeof summary>; raw: ReturnType<typeof summary> }> = {};
    const issuer = 'http://127.0.0.1:49152';
    const sealer = new Sealer([encryptionKey]);
    const plaintext = JSON.stringify({ accessToken: `gho_${randomBytes(18).toString('hex')}`, tokenType: 'bearer', scopes: ['repo'] });
    for (const n of [1000, MAX_ROWS]) {
      const path = join(dir, `scale-${n}.db`);
      const store = openSqliteStore(path);
      const t0 = performance.now();
      const insert = store.db.prepare(
        `INSERT INTO connections (issuer, subject, provider, account_id, account_login, scopes, key_id, sealed_tokens, created_at, updated_at)
         VALUES (?, ?, 'github', ?, ?, 'repo', ?, ?, ?, ?)`,
      );
      const now = Date.now();
      store.db.transaction(() => {
        for (let i = 0; i < n; i++) {
          const subject = `user-${i}`;
          // One token, re-sealed per row: each row opens only under its own principal, like the real thing.
          const sealed = sealer.seal(plaintext, { issuer, subject, provider: 'github' });
          insert.run(issuer, subject, String(10_000_000 + i), `gh-user-${i}`, sealed.keyId, sealed.value, now, now);
        }
      })();
      const seedMs = performance.now() - t0;
      await store.close();
      // Lookups go through a freshly opened store, as a broker process would have it.
      const reopened = openSqliteStore(path);
      const service = new ConnectionService(reopened, sealer, silent);
      const pick = () => principalFromVerifiedClaims(issuer, `user-${Math.floor(Math.random() * n)}`);
      const find: number[] = [];
      const open: number[] = [];
      const raw: number[] = [];
      // The bare indexed lookup with a statement prepared once, to separate the index's own scaling
      // from the constant cost of ConnectionStore preparing its statement on every call.
      const prepared = reopened.db.prepare('SELECT * FROM connections WHERE issuer = ? AND subject = ? AND provider = ?');
      for (let i = 0; i < 2000; i++) await service.open(pick(), 'github'); // warm-up
      for (let i = 0; i < LOOKUPS; i++) {
        const p = pick();
        const q = pick();
        const r = pick();
        const a = performance.now();
        const row = await reopened.connections.find(p, 'github');
        const b = performance.now();
        const conn = await service.open(q, 'github');
        const c = performance.now();
        const bare = prepared.get(r.issuer, r.subject, 'github');
        const d = performance.now();
        if (!row || !conn || !bare) throw new Error('lookup missed a seeded row');
        find.push((b - a) * 1000);
        open.push((c - b) * 1000);
        raw.push((d - c) * 1000);
      }
      await reopened.close();
      measured[n] = { find: summary(find), open: summary(open), raw: summary(raw) };
      const micro = (x: ReturnType<typeof summary>) => ({ p50: round(x.p50), p99: round(x.p99), mean: round(x.mean) });
      scale[n] = {
        seedSeconds: round(seedMs / 1000, 2),
        findMicroseconds: micro(measured[n]!.find),
        openMicroseconds: micro(measured[n]!.open),
        preparedGetMicroseconds: micro(measured[n]!.raw),
      };
      say(
        `store with ${n} rows (seeded in ${round(seedMs / 1000, 1)} s): find p50 ${us(measured[n]!.find.p50)} p99 ${us(measured[n]!.find.p99)}; ` +
          `open p50 ${us(measured[n]!.open.p50)} p99 ${us(measured[n]!.open.p99)}; prepared get p50 ${us(measured[n]!.raw.p50)} p99 ${us(measured[n]!.raw.p99)}`,
      );
      rmSync(path, { force: true });
      rmSync(`${path}-wal`, { force: true });
      rmSync(`${path}-shm`, { force: true });
    }
    const small = measured[1000]!;
    const big = measured[MAX_ROWS]!;
    const ratio = big.open.p50 / small.open.p50;
    scale.ratioOpenP50 = round(ratio);
    scale.ratioFindP50 = round(big.find.p50 / small.find.p50);
    scale.ratioOpenP99 = round(big.open.p99 / small.open.p99);
    scale.ratioPreparedGetP50 = round(big.raw.p50 / small.raw.p50);
    results.storeScale = scale;
    for (const [n, m] of [[1000, small], [MAX_ROWS, big]] as const) {
      rows.push({
        section: 'store',
        measure: `ConnectionService.open, ${n.toLocaleString('en')} rows`,
        value: `p50 ${us(m.open.p50)}, p99 ${us(m.open.p99)} (ConnectionStore.find p50 ${us(m.find.p50)}; bare prepared get p50 ${us(m.raw.p50)})`,
      });
    }
    rows.push({ section: 'store', measure: `${MAX_ROWS.toLocaleString('en')} vs 1,000 rows (open, p50)`, value: `${round(ratio, 2)}× (p99 ${round(big.open.p99 / small.open.p99, 2)}×; find p50 ${round(big.find.p50 / small.find.p50, 2)}×; bare prepared get p50 ${round(big.raw.p50 / small.raw.p50, 2)}×)`, target: '≤ 1.5×', met: ratio <= 1.5 });
  }
}

// ------------------------------------------------------------------------------ the postgres phase

interface PostgresContext {
  publicUrl: string;
  /** Broker A's environment (SQLite), less PORT. */
  env: Record<string, string>;
  users: { sub: string; login: string; githubToken: string }[];
  tokens: string[];
  encryptionKey: Buffer;
  baseline: Child;
  brokerA: Child;
  gh: Child;
}

const proxySeq = new Map<Child, number>();

/** Requests each backend of a bench/lib/proxy-server.ts child answered since the last call. */
async function proxyHits(proxy: Child): Promise<number[]> {
  const seq = (proxySeq.get(proxy) ?? 0) + 1;
  proxySeq.set(proxy, seq);
  const line = new RegExp(`\\{"event":"hits","seq":${seq},"counts":(\\[[0-9,]*\\])\\}`);
  process.kill(proxy.pid, 'SIGUSR2');
  for (const deadline = Date.now() + 5_000; Date.now() < deadline; await sleep(20)) {
    const m = line.exec(proxy.output());
    if (m) return JSON.parse(m[1]!) as number[];
  }
  throw new Error(`${proxy.name} did not report its hits`);
}

const roundLoad = (r: LoadResult) => ({
  ...r,
  rps: round(r.rps),
  p50: round(r.p50),
  p99: round(r.p99),
  mean: round(r.mean),
  cpuPerRequestUs: round(r.cpuPerRequestUs),
  upstreamCpuPerRequestUs: round(r.upstreamCpuPerRequestUs),
  ...(r.extraCpuPerRequestUs ? { extraCpuPerRequestUs: Object.fromEntries(Object.entries(r.extraCpuPerRequestUs).map(([k, v]) => [k, round(v)])) } : {}),
});

const dirty = (r: LoadResult) => r.errors + r.non2xx + r.badBodies;

/**
 * A throwaway PostgreSQL cluster holding the same connections as broker A's SQLite file; broker P1
 * on it loaded in the same interleaved rounds as broker A and the baseline; then 1, 2 and 3
 * instances behind a round-robin proxy; then completion detection across two instances.
 */
async function postgresPhase(ctx: PostgresContext): Promise<void> {
  const { publicUrl, env, users, tokens, encryptionKey, baseline, brokerA, gh } = ctx;
  const out: Record<string, unknown> = {};
  results.postgres = out;

  const t0 = performance.now();
  pgServer = await startPostgres();
  const databaseUrl = await pgServer.createDatabase('bench');
  const postmaster = postmasterPid(pgServer.port);
  const pgCpu = () => clusterCpuMs(postmaster);
  const clusterMs = performance.now() - t0;
  const s0 = performance.now();
  {
    // As for SQLite: through the real ConnectionService, sealed with the broker's key.
    const store = await openPostgresStore(databaseUrl);
    const service = new ConnectionService(store, new Sealer([encryptionKey]), silent);
    for (const [i, u] of users.entries()) {
      await service.save(principalFromVerifiedClaims(idp!.issuer, u.sub), 'github', { id: String(1000 + i), login: u.login }, { accessToken: u.githubToken, tokenType: 'bearer', scopes: ['repo'] }, { refuseShared: false });
    }
    await store.close();
  }
  const seedMs = performance.now() - s0;
  // DATABASE_URL wins; DATABASE_PATH names a file that must never appear.
  const unusedPath = join(dir, 'unused-with-postgres.db');
  const pgEnv = { ...env, DATABASE_URL: databaseUrl, DATABASE_PATH: unusedPath };
  const p1 = await spawnBroker('broker P1', { ...pgEnv, PORT: '0' });
  say(`postgres: cluster on port ${pgServer.port} in ${round(clusterMs / 1000, 1)} s, ${users.length} connections seeded in ${round(seedMs / 1000, 2)} s, broker P1 ${p1.url}`);
  out.clusterStartSeconds = round(clusterMs / 1000, 2);
  out.seedSeconds = round(seedMs / 1000, 2);

  const listed = expectComplete(await firstCall(p1.url, tokens[0]!, 'list_connections'), 'PostgreSQL list_connections');
  if (listed.structuredContent.connections[0]?.login !== users[0]!.login) throw new Error(`PostgreSQL list_connections: ${JSON.stringify(listed.structuredContent)}`);
  const whoami = expectComplete(await firstCall(p1.url, tokens[1]!, 'github_whoami'), 'PostgreSQL github_whoami');
  if (whoami.structuredContent.login !== users[1]!.login) throw new Error(`PostgreSQL github_whoami: ${JSON.stringify(whoami.structuredContent)}`);

  // -- the column: baseline, SQLite (broker A) and PostgreSQL (P1), interleaved as in the throughput phase
  const wanted = (tool: string) => !process.env.BENCH_TOOLS || process.env.BENCH_TOOLS.split(',').includes(tool);
  const tools = ['list_connections', 'github_whoami'].filter(wanted);
  type Target = { name: string; url: string; tool: string; pid: number; upstream: number | undefined; extra: Record<string, () => number> };
  const targets: Target[] = [
    ...(wanted('ping') ? [{ name: 'baseline ping', url: baseline.url, tool: 'ping', pid: baseline.pid, upstream: undefined, extra: {} }] : []),
    ...tools.flatMap((tool): Target[] => {
      const upstream = tool === 'github_whoami' ? gh.pid : undefined;
      return [
        { name: `SQLite ${tool}`, url: brokerA.url, tool, pid: brokerA.pid, upstream, extra: {} },
        { name: `PostgreSQL ${tool}`, url: p1.url, tool, pid: p1.pid, upstream, extra: { postgres: pgCpu } },
      ];
    }),
  ];
  // P1 is a fresh process while broker A has run every earlier phase: let its JIT catch up first.
  for (const tool of tools) await load(p1.url, tool, tokens, 16, 3, p1.pid);
  const column: LoadResult[] = [];
  for (const c of CONCURRENCY) {
    const runs = new Map<string, Run[]>(targets.map((t) => [t.name, []]));
    for (const t of targets) await load(t.url, t.tool, tokens, c, 1, t.pid); // warm-up, not recorded
    for (let r = 0; r < ROUNDS; r++) {
      for (const t of r % 2 === 0 ? targets : [...targets].reverse()) runs.get(t.name)!.push(await load(t.url, t.tool, tokens, c, DURATION, t.pid, t.upstream, t.extra));
    }
    for (const t of targets) {
      const res = combine(t.name, c, runs.get(t.name)!);
      column.push(res);
      const pgPart = res.extraCpuPerRequestUs?.postgres;
      say(
        `${t.name.padEnd(27)} c=${String(c).padStart(2)}: ${Math.round(res.rps)} req/s, p50 ${ms(res.p50)}, p99 ${ms(res.p99)}, CPU ${us(res.cpuPerRequestUs)}/req` +
          (pgPart !== undefined ? ` + PostgreSQL ${us(pgPart)}` : '') +
          (t.upstream ? ` (+ GitHub stand-in ${us(res.upstreamCpuPerRequestUs)})` : '') +
          (dirty(res) ? `, ${res.errors} errors, ${res.non2xx} non-2xx, ${res.badBodies} bad bodies` : ''),
      );
    }
  }
  out.column = column.map(roundLoad);
  for (const c of CONCURRENCY) {
    const base = column.find((r) => r.connections === c && r.target === 'baseline ping');
    for (const tool of tools) {
      const sq = column.find((r) => r.connections === c && r.target === `SQLite ${tool}`)!;
      const pg = column.find((r) => r.connections === c && r.target === `PostgreSQL ${tool}`)!;
      const clean = dirty(sq) + dirty(pg) === 0;
      const stand = (r: LoadResult) => (r.upstreamCpuPerRequestUs ? ` + ${us(r.upstreamCpuPerRequestUs)} stand-in` : '');
      rows.push({
        section: 'postgres',
        measure: `${tool}, c=${c}`,
        value:
          `SQLite ${Math.round(sq.rps)} req/s, p99 ${ms(sq.p99)}, CPU ${us(sq.cpuPerRequestUs)}/req${stand(sq)} | ` +
          `PostgreSQL ${Math.round(pg.rps)} req/s, p99 ${ms(pg.p99)}, CPU ${us(pg.cpuPerRequestUs)}/req + ${us(pg.extraCpuPerRequestUs?.postgres ?? NaN)} PostgreSQL${stand(pg)} ` +
          `(${Math.round((pg.rps / sq.rps) * 100)} % of SQLite${base ? `, ${Math.round((pg.rps / base.rps) * 100)} % of baseline` : ''})` +
          (clean ? '' : ' — ERRORS'),
      });
    }
  }

  // -- 1, 2 and 3 instances behind the round-robin proxy (in its own process), list_connections
  const cInst = CONCURRENCY.includes(16) ? 16 : Math.max(...CONCURRENCY.filter((c) => c <= 64), 1);
  // allSettled: a failed start must not leave the other one outside `children`.
  const more = await Promise.allSettled([spawnBroker('broker P2', { ...pgEnv, PORT: '0' }), spawnBroker('broker P3', { ...pgEnv, PORT: '0' })]);
  for (const m of more) if (m.status === 'rejected') throw m.reason;
  const instances = [p1, ...more.map((m) => (m as PromiseFulfilledResult<Child>).value)];
  // P2 and P3 are fresh processes; P1 has just run the column.
  for (const b of instances.slice(1)) await load(b.url, 'list_connections', tokens, cInst, 3, b.pid);
  const proxies: Child[] = [];
  for (const n of [1, 2, 3]) proxies.push(await start(`proxy ×${n}`, 'bench/lib/proxy-server.ts', { PORT: '0', PROXY_BACKENDS: instances.slice(0, n).map((b) => b.url).join(',') }));
  for (const proxy of proxies) expectComplete(await firstCall(proxy.url, tokens[2]!, 'list_connections'), `list_connections through ${proxy.name}`);
  const setups = [1, 2, 3].map((n) => ({
    n,
    proxy: proxies[n - 1]!,
    pids: instances.slice(0, n).map((b) => b.pid),
    runs: [] as Run[],
    hits: new Array<number>(n).fill(0),
  }));
  const extraFor = (proxy: Child) => ({ proxy: () => cpuMs(proxy.pid), postgres: pgCpu });
  for (const s of setups) {
    await load(s.proxy.url, 'list_connections', tokens, cInst, 2, s.pids); // warm-up (the proxy's too), not recorded
    await proxyHits(s.proxy); // and its hits do not count
  }
  for (let r = 0; r < ROUNDS; r++) {
    for (const s of r % 2 === 0 ? setups : [...setups].reverse()) {
      s.runs.push(await load(s.proxy.url, 'list_connections', tokens, cInst, DURATION, s.pids, undefined, extraFor(s.proxy)));
      (await proxyHits(s.proxy)).forEach((h, i) => (s.hits[i]! += h));
    }
  }
  const spread = setups.map((s) => ({ n: s.n, hits: s.hits, result: combine(`${s.n} PostgreSQL instance(s) behind the proxy`, cInst, s.runs) }));
  for (const { n, hits, result } of spread) {
    const x = result.extraCpuPerRequestUs ?? {};
    say(
      `${n} instance(s) behind the proxy, list_connections c=${cInst}: ${Math.round(result.rps)} req/s, p50 ${ms(result.p50)}, p99 ${ms(result.p99)}; ` +
        `CPU/req brokers ${us(result.cpuPerRequestUs)}, proxy ${us(x.proxy ?? NaN)}, PostgreSQL ${us(x.postgres ?? NaN)}; hits ${hits.join('/')}` +
        (dirty(result) ? `; ${result.errors} errors, ${result.non2xx} non-2xx, ${result.badBodies} bad bodies` : ''),
    );
  }
  out.instances = spread.map(({ n, hits, result }) => ({ instances: n, hitsPerInstance: hits, ...roundLoad(result) }));
  const one = spread[0]!.result.rps;
  const everyInstanceServed = spread.every((s) => s.hits.length === s.n && s.hits.every((h) => h > 0));
  const clean = spread.every((s) => dirty(s.result) === 0);
  rows.push({
    section: 'postgres',
    measure: `list_connections via proxy, c=${cInst}: 1 / 2 / 3 instances`,
    value:
      `${spread.map((s) => Math.round(s.result.rps)).join(' / ')} req/s (${spread
        .slice(1)
        .map((s) => `${s.n}: ${Math.round((s.result.rps / one) * 100)} %`)
        .join(', ')} of 1); p99 ${spread.map((s) => ms(s.result.p99)).join(' / ')}; ` +
      `requests per instance ${spread.map((s) => s.hits.join('+')).join(' | ')}` +
      (clean ? '' : ' — ERRORS'),
    target: 'no errors, every instance served',
    met: clean && everyInstanceServed,
  });
  rows.push({
    section: 'postgres',
    measure: `CPU per request, 1 / 2 / 3 instances`,
    value: (['brokers', 'proxy', 'postgres'] as const)
      .map((k) => `${k === 'postgres' ? 'PostgreSQL' : k} ${spread.map((s) => us(k === 'brokers' ? s.result.cpuPerRequestUs : (s.result.extraCpuPerRequestUs?.[k] ?? NaN))).join(' / ')}`)
      .join('; '),
  });

  // -- completion detection across instances: held on P1, the provider callback on P2 (LISTEN/NOTIFY)
  {
    const { afterDone, afterStart } = await completionSamples(publicUrl, p1.url, instances[1]!.url, 'bench-cd-pg');
    const s = summary(afterDone);
    const st = summary(afterStart);
    out.completionAcrossInstances = { fromCallbackFinished: { ...s, p50: round(s.p50), p99: round(s.p99), mean: round(s.mean), max: round(s.max) }, fromCallbackStarted: { p50: round(st.p50), p99: round(st.p99) } };
    rows.push({
      section: 'postgres',
      measure: `completion across instances (n=${s.n})`,
      value: `p50 ${ms(s.p50)}, p99 ${ms(s.p99)} after the callback page arrived (${ms(st.p50)} / ${ms(st.p99)} after it was requested)`,
      target: 'p50 < 250 ms',
      met: s.p50 < 250,
    });
    say(`completion detection across PostgreSQL instances: p50 ${ms(s.p50)}, p99 ${ms(s.p99)}`);
  }

  for (const proxy of proxies) await proxy.stop();
  await Promise.all(instances.map((b) => b.stop()));
  out.databasePathCreated = existsSync(unusedPath);
  if (out.databasePathCreated) say(`postgres: a broker created the unused DATABASE_PATH ${unusedPath}`);
  await pgServer.destroy();
  pgServer = undefined;
}

function printTable(): void {
  const header = ['', 'measure', 'result', 'target', ''];
  const body = rows.map((r) => [r.section, r.measure, r.value, r.target ?? '', r.met === undefined ? '' : r.met ? 'met' : 'MISSED']);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ').trimEnd();
  process.stdout.write(`\n${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('-|-')}\n${body.map(line).join('\n')}\n`);
}

let failed = false;
try {
  await main();
} catch (err) {
  failed = true;
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  for (const c of children) {
    const state = c.child.exitCode === null && c.child.signalCode === null ? 'running' : `exited (${c.child.exitCode ?? c.child.signalCode})`;
    process.stderr.write(`--- ${c.name}, ${state}, output (tail) ---\n${c.output().slice(-3000)}\n`);
  }
} finally {
  await Promise.all(children.map((c) => c.stop('SIGKILL').catch(() => undefined)));
  await idp?.close().catch(() => undefined);
  await pgServer?.destroy().catch(() => undefined);
  if (dir) rmSync(dir, { recursive: true, force: true });
}
results.rows = rows;
(results.machine as Record<string, unknown>).loadavgAtEnd = loadavg().map((n) => round(n, 2));
results.totalSeconds = round((Date.now() - started) / 1000, 1);
results.finishedAt = new Date().toISOString();
if (!failed) {
  printTable();
  // Only a full run replaces the recorded figures; a partial one (BENCH_PHASES, …) just prints.
  if (['BENCH_PHASES', 'BENCH_CONCURRENCY', 'BENCH_ROWS', 'BENCH_DURATION', 'BENCH_ROUNDS', 'BENCH_TOOLS', 'BENCH_PROFILE'].every((k) => !process.env[k])) {
    writeFileSync(join(BENCH_DIR, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
    say(`wrote bench/results.json (${results.totalSeconds} s in all)`);
  } else say(`partial run (${results.totalSeconds} s): bench/results.json left as it was`);
}
process.exit(failed ? 1 : 0);
