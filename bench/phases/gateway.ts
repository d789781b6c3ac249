// The gateway (issues 13 and 23): the same `tools/call` sent to an upstream directly with the
// user's token for it, through a bare forwarding proxy (bench/servers/forward-proxy.ts: the cost of
// one more hop) and through broker G (every limit at its default) and broker G0 (limits off), in
// the same interleaved rounds at c=1 and c=16, for two upstreams in G's PROVIDERS_FILE:
// `auth: none` (the baseline server's `ping`, a fixed small result: `bench_ping`) and
// `provider: github` (the GitHub stand-in's MCP server, src/dev/sandbox-github/mcp, with each
// user's GitHub token: `gh_get_me`, a store read at the stand-in). Without the gateway in the broker
// (it does not start with that file, or does not offer the tool), the broker rows say "gateway not available".
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../test/support/idp.js';
import { envelope, rawCall } from '../../test/support/mcp.js';
import { gatewayRows, type GatewayLoad } from '../lib/gateway-rows.js';
import { errorCounts, interleavedRounds, roundLoad, type LoadTarget } from '../lib/load.js';
import { definePhase } from '../lib/phase.js';
import type { Child } from '../lib/proc.js';
import { DURATION, profiled, say } from '../lib/settings.js';
import { withDefaultLimits } from '../lib/stack.js';
import { ms, us } from '../lib/stats.js';

export const UPSTREAM_ID = 'bench';
/** The upstream's tool as the broker lists it (the default prefix is `<id>_`). */
export const GATEWAY_TOOL = `${UPSTREAM_ID}_ping`;
/** The `provider: github` upstream (the GitHub stand-in's MCP server) and its `get_me` as the broker lists it. */
export const PROVIDER_UPSTREAM_ID = 'gh';
export const PROVIDER_TOOL = `${PROVIDER_UPSTREAM_ID}_get_me`;
const CONCURRENCIES = [1, 16] as const;

/**
 * The broker's PROVIDERS_FILE: one upstream without credentials (still only for signed-in MCP
 * users) and, with `githubMcpUrl`, GitHub's MCP server taking the user's GitHub connection as
 * Bearer — the case people deploy (only its `get_me`: its `create_issue` would be `gh_create_issue`).
 */
export function upstreamsYaml(mcpUrl: string, githubMcpUrl?: string): string {
  return [
    'upstreams:',
    `  - id: ${UPSTREAM_ID}`,
    `    url: ${mcpUrl}`,
    '    auth: none',
    ...(githubMcpUrl
      ? [
          `  - id: ${PROVIDER_UPSTREAM_ID}`,
          `    url: ${githubMcpUrl}`,
          '    provider: github',
          '    scopes: [repo]',
          '    tools: { include: [get_me] }',
        ]
      : []),
    '',
  ].join('\n');
}

/** Why the broker cannot be measured on `tool`, or undefined when it lists it and its answer includes `expect`. */
async function gatewayMissing(url: string, token: string, tool: string, expect: string): Promise<string | undefined> {
  const listed = await rawCall(`${url}/mcp`, token, { method: 'tools/list', params: { _meta: envelope() } });
  const names = ((listed.json?.result?.tools ?? []) as Array<{ name?: string }>).map((t) => t.name);
  if (!names.includes(tool)) return `the broker does not list ${tool} (tools/list: ${names.join(', ') || listed.status})`;
  const called = await rawCall(`${url}/mcp`, token, { method: 'tools/call', params: { name: tool, arguments: {}, _meta: envelope() } });
  const text = JSON.stringify(called.json?.result ?? null);
  if (called.json?.result?.resultType !== 'complete' || called.json.result.isError || !text.includes(expect))
    return `${tool} did not answer with ${expect} (${called.status} ${called.text.slice(0, 160)})`;
  return undefined;
}

/** One upstream case: its rows' label, the upstream (process, tool) and the broker's name of the tool. */
interface Case {
  label: string;
  key: string;
  upstream: Child;
  tool: string;
  brokerTool: string;
  /** What the upstream is sent directly and through the proxy: the user's token for that upstream. */
  directTokens: readonly string[];
  expect: string;
}

export const gateway = definePhase({
  name: 'gateway',
  async run({ stack, resources, report }) {
    const { baseline, gh, env, tokens, users } = stack;
    const file = join(resources.dir, 'upstreams.yaml');
    writeFileSync(file, upstreamsYaml(`${baseline.url}/mcp`, `${gh.url}/mcp`));
    const cases: Case[] = [
      {
        label: 'auth: none',
        key: 'authNone',
        upstream: baseline,
        tool: 'ping',
        brokerTool: GATEWAY_TOOL,
        directTokens: tokens,
        expect: 'pong',
      },
      {
        label: 'provider: github',
        key: 'providerGithub',
        upstream: gh,
        tool: 'get_me',
        brokerTool: PROVIDER_TOOL,
        // Straight to GitHub's server, each user with their own GitHub token, in the same order as the broker's tokens.
        directTokens: users.map((u) => u.githubToken),
        expect: users[0]!.login,
      },
    ];
    const proxies = await Promise.all(
      cases.map((k) => resources.start(`forward proxy (${k.label})`, 'bench/servers/forward-proxy.ts', { UPSTREAM: k.upstream.url })),
    );
    // Broker G with every limit at its default, broker G0 with the limits off (as broker A).
    const brokers: Array<{ name: string; child?: Child; unavailable?: string }> = [];
    for (const [name, brokerEnv, profile] of [
      ['broker G', withDefaultLimits(env), 'gateway'],
      ['broker G0', env, undefined],
    ] as const) {
      try {
        const child = await resources.spawnBroker(
          name,
          { ...brokerEnv, PROVIDERS_FILE: file, PORT: String(await freePort()) },
          profile ? profiled(profile) : [],
        );
        brokers.push({ name, child });
      } catch (err) {
        const exited = err instanceof Error ? /(?:Configuration error|Could not start): ([^\n]+)/.exec(err.message)?.[1] : undefined;
        brokers.push({
          name,
          unavailable: `the broker did not start with upstreams: in PROVIDERS_FILE${exited ? ` (${exited.slice(0, 160)})` : ''}`,
        });
      }
    }
    const results: Record<string, unknown> = {};
    for (const [i, k] of cases.entries()) {
      const proxy = proxies[i]!;
      const usable: Child[] = [];
      let unavailable: string | undefined;
      for (const b of brokers) {
        const missing = b.unavailable ?? (await gatewayMissing(b.child!.url, tokens[0]!, k.brokerTool, k.expect));
        if (missing) unavailable ??= `${b.name}: ${missing}`;
        else usable.push(b.child!);
      }
      if (unavailable) say(`gateway (${k.label}) not available: ${unavailable}`);
      const [g, g0] = unavailable ? [] : usable;
      // The direct call carries the user's token too (the auth: none upstream ignores it), so every target gets the same bytes.
      const targets: LoadTarget[] = [
        { name: 'direct', url: k.upstream.url, tool: k.tool, pid: k.upstream.pid, upstream: undefined, tokens: k.directTokens },
        { name: 'proxy', url: proxy.url, tool: k.tool, pid: proxy.pid, upstream: k.upstream.pid, tokens: k.directTokens },
        ...(g && g0
          ? [
              { name: 'broker', url: g.url, tool: k.brokerTool, pid: g.pid, upstream: k.upstream.pid },
              { name: 'limits off', url: g0.url, tool: k.brokerTool, pid: g0.pid, upstream: k.upstream.pid },
            ]
          : []),
      ];
      const loads: GatewayLoad[] = [];
      for (const c of CONCURRENCIES) {
        const [direct, viaProxy, viaBroker, viaOff] = await interleavedRounds(targets, c, tokens, DURATION);
        loads.push({
          connections: c,
          direct: direct!,
          proxy: viaProxy!,
          ...(viaBroker ? { broker: viaBroker } : {}),
          ...(viaOff ? { limitsOff: viaOff } : {}),
        });
        for (const r of [direct!, viaProxy!, ...(viaBroker ? [viaBroker] : []), ...(viaOff ? [viaOff] : [])])
          say(
            `gateway (${k.label}) ${r.target.padEnd(10)} c=${String(c).padStart(2)}: ${Math.round(r.rps)} req/s, p50 ${ms(r.p50)}, p99 ${ms(r.p99)}, CPU ${us(r.cpuPerRequestUs)}/req${errorCounts(r, ',')}`,
          );
      }
      results[k.key] = {
        ...(unavailable ? { unavailable } : {}),
        loads: loads.map((l) => ({
          connections: l.connections,
          direct: roundLoad(l.direct),
          proxy: roundLoad(l.proxy),
          ...(l.broker ? { broker: roundLoad(l.broker) } : {}),
          ...(l.limitsOff ? { limitsOff: roundLoad(l.limitsOff) } : {}),
        })),
      };
      for (const row of gatewayRows(k.label, loads, unavailable)) report.row(row);
    }
    report.results.gateway = results;
    await Promise.all([...proxies.map((p) => p.stop()), ...brokers.map((b) => b.child?.stop())]);
  },
});
