// Load with autocannon: one run against one target, the pooling of a target's rounds, and the
// interleaved rounds the throughput and postgres phases share.
import autocannon from 'autocannon';
import { cpuMs } from './proc.js';
import { ROUNDS } from './settings.js';
import { mean, percentile, round } from './stats.js';
import { callBody, callHeaders } from './wire.js';

export interface LoadResult {
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
  /** How many answers failed the check, by HTTP status (absent when none did). */
  badStatuses?: Record<string, number>;
  /** CPU time of the server process (and of the GitHub stand-in, for github_whoami) per request, in µs. */
  cpuPerRequestUs: number;
  upstreamCpuPerRequestUs: number;
  /** CPU per request, in µs, of the other processes `load` was told to watch (PostgreSQL, the proxy). */
  extraCpuPerRequestUs?: Record<string, number>;
  /**
   * The calls per minute of the busiest user (token) in the busiest round: the most any one user
   * sent in any 60 s while this target was loaded, read against a per-user rate limit.
   */
  busiestUserPerMinute: number;
}

export interface Run {
  requests: number;
  seconds: number;
  latencies: number[];
  errors: number;
  non2xx: number;
  badBodies: number;
  badStatuses: Record<string, number>;
  serverCpuMs: number;
  upstreamCpuMs: number;
  extraCpuMs: Record<string, number>;
  /** Requests sent with each token (in `tokens` order). */
  perToken: number[];
}

/** What one load run sends and accepts: the path, the headers and body for a token, and the check on each answer. */
export interface RequestSpec {
  path: string;
  headers(token: string): Record<string, string>;
  body(token: string): string;
  ok(status: number, body: string): boolean;
}

/** A raw 2026-07-28 `tools/call` of `tool`, the token as the bearer, answered by a complete, non-error result. */
export function mcpSpec(tool: string): RequestSpec {
  const base = callHeaders(tool);
  const body = callBody(tool);
  return {
    path: '/mcp',
    headers: (token) => ({ ...base, authorization: `Bearer ${token}` }),
    body: () => body,
    ok: (status, text) => status === 200 && text.includes('"resultType":"complete"') && !text.includes('"isError":true'),
  };
}

/**
 * One autocannon run of `tool`'s `tools/call` (mcpSpec) or of `spec`: the Authorization header
 * (or the body) rotating over `tokens` (one user per token) through `setupRequest`. Latencies are
 * kept at full precision from the `response` event (autocannon's own histogram rounds to whole
 * milliseconds), and the CPU time the server process (and `upstreamPid`, the GitHub stand-in)
 * spent is read from /proc around the run.
 */
export async function load(
  url: string,
  tool: string | RequestSpec,
  tokens: readonly string[],
  connections: number,
  seconds: number,
  serverPid: number | readonly number[],
  upstreamPid?: number,
  extraCpu: Record<string, () => number> = {},
): Promise<Run> {
  let next = 0;
  let badBodies = 0;
  const badStatuses: Record<string, number> = {};
  // Round robin over every user, so the per-user limits see the load spread evenly.
  const perToken = new Array<number>(tokens.length).fill(0);
  const latencies: number[] = [];
  const spec = typeof tool === 'string' ? mcpSpec(tool) : tool;
  // Several server processes (instances behind a proxy) count together.
  const serverCpu = () => (typeof serverPid === 'number' ? cpuMs(serverPid) : serverPid.reduce((a, pid) => a + cpuMs(pid), 0));
  const extra0 = Object.fromEntries(Object.entries(extraCpu).map(([k, f]) => [k, f()]));
  const cpu0 = serverCpu();
  const up0 = upstreamPid ? cpuMs(upstreamPid) : 0;
  const instance = autocannon({
    url: `${url}${spec.path}`,
    connections,
    duration: seconds,
    timeout: 10,
    method: 'POST',
    headers: spec.headers(tokens[0]!),
    body: spec.body(tokens[0]!),
    requests: [
      {
        setupRequest: (req: autocannon.Request) => {
          const i = next++ % tokens.length;
          perToken[i]!++;
          const token = tokens[i]!;
          req.headers = spec.headers(token);
          req.body = spec.body(token);
          return req;
        },
        onResponse: (status: number, body: string) => {
          if (spec.ok(status, body)) return;
          badBodies++;
          badStatuses[status] = (badStatuses[status] ?? 0) + 1;
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
    badStatuses,
    serverCpuMs: serverCpu() - cpu0,
    upstreamCpuMs: upstreamPid ? cpuMs(upstreamPid) - up0 : 0,
    extraCpuMs: Object.fromEntries(Object.entries(extraCpu).map(([k, f]) => [k, f() - extra0[k]!])),
    perToken,
  };
}

/** Per-key counts added up. */
function countsTogether(counts: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of counts) for (const [k, n] of Object.entries(c)) out[k] = (out[k] ?? 0) + n;
  return out;
}

/** Pools the rounds of one target at one concurrency. */
export function combine(target: string, connections: number, runs: Run[]): LoadResult {
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
    ...(sum((r) => r.badBodies) > 0 ? { badStatuses: countsTogether(runs.map((r) => r.badStatuses)) } : {}),
    busiestUserPerMinute: Math.max(...runs.map((r) => (Math.max(0, ...r.perToken) / r.seconds) * 60)),
    cpuPerRequestUs: (sum((r) => r.serverCpuMs) * 1000) / requests,
    upstreamCpuPerRequestUs: (sum((r) => r.upstreamCpuMs) * 1000) / requests,
    ...(extra.length
      ? { extraCpuPerRequestUs: Object.fromEntries(extra.map((k) => [k, (sum((r) => r.extraCpuMs[k] ?? 0) * 1000) / requests])) }
      : {}),
  };
}

/** A load result rounded for results.json. */
export const roundLoad = (r: LoadResult) => ({
  ...r,
  rps: round(r.rps),
  p50: round(r.p50),
  p99: round(r.p99),
  mean: round(r.mean),
  busiestUserPerMinute: Math.round(r.busiestUserPerMinute),
  cpuPerRequestUs: round(r.cpuPerRequestUs),
  upstreamCpuPerRequestUs: round(r.upstreamCpuPerRequestUs),
  ...(r.extraCpuPerRequestUs
    ? { extraCpuPerRequestUs: Object.fromEntries(Object.entries(r.extraCpuPerRequestUs).map(([k, v]) => [k, round(v)])) }
    : {}),
});

/** Errors, timeouts, non-2xx answers and bad bodies of a load result. */
export const dirty = (r: LoadResult) => r.errors + r.non2xx + r.badBodies;
/** What a table row says after its figures when any of these runs had errors. */
export const errorsNote = (...runs: LoadResult[]) => (runs.some((r) => dirty(r) > 0) ? ' — ERRORS' : '');

/** The runs of one comparison at one concurrency: one load result per variant (`direct`, `proxy` …). */
export type LoadsAt<Variant extends string> = { connections: number } & Record<Variant, LoadResult>;

/** The trailer of a progress line: nothing for a clean result, its error counts otherwise. */
export const errorCounts = (r: LoadResult, separator: string) =>
  dirty(r)
    ? `${separator} ${r.errors} errors, ${r.non2xx} non-2xx, ${r.badBodies} bad bodies` +
      (r.badStatuses
        ? ` (${Object.entries(r.badStatuses)
            .map(([status, n]) => `${n}× ${status}`)
            .join(', ')})`
        : '')
    : '';

export interface LoadTarget {
  name: string;
  url: string;
  tool: string;
  pid: number;
  upstream: number | undefined;
  /** Other processes whose CPU per request is reported (PostgreSQL). */
  extra?: Record<string, () => number>;
  /** What to send instead of `tool`'s tools/call (the exchange phase's form POSTs). */
  spec?: RequestSpec;
  /** The tokens to rotate over instead of the run's (the exchange phase's subject tokens). */
  tokens?: readonly string[];
}

/**
 * Every target at `connections`: a 1 s warm-up each (not recorded), then ROUNDS interleaved rounds
 * (A B C, then C B A), so a neighbour's burst on this shared machine hits every target alike and
 * the ratios stay meaningful even when the absolute figures move. One pooled result per target.
 */
export async function interleavedRounds(
  targets: readonly LoadTarget[],
  connections: number,
  tokens: readonly string[],
  duration: number,
): Promise<LoadResult[]> {
  const runs = new Map<string, Run[]>(targets.map((t) => [t.name, []]));
  for (const t of targets) await load(t.url, t.spec ?? t.tool, t.tokens ?? tokens, connections, 1, t.pid);
  for (let r = 0; r < ROUNDS; r++) {
    for (const t of r % 2 === 0 ? targets : [...targets].reverse())
      runs.get(t.name)!.push(await load(t.url, t.spec ?? t.tool, t.tokens ?? tokens, connections, duration, t.pid, t.upstream, t.extra));
  }
  return targets.map((t) => combine(t.name, connections, runs.get(t.name)!));
}
