// The gateway (issue 13): the same `tools/call` of a small 2026-07-28 upstream's tool (the
// baseline server's `ping`, a fixed small result) sent to the upstream directly with the user's
// token, through a bare forwarding proxy (bench/servers/forward-proxy.ts: the cost of one more
// hop) and through broker G, whose PROVIDERS_FILE declares the upstream as
// `upstreams: [{ id: bench, url, auth: none }]` (so the tool is `bench_ping`), in the same
// interleaved rounds at c=1 and c=16. Without the gateway in the broker (it does not start with
// that file, or does not offer `bench_ping`), the broker rows say "gateway not available".
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../test/support/idp.js';
import { envelope, rawCall } from '../../test/support/mcp.js';
import { gatewayRows, type GatewayLoad } from '../lib/gateway-rows.js';
import { errorCounts, interleavedRounds, roundLoad, type LoadTarget } from '../lib/load.js';
import { definePhase } from '../lib/phase.js';
import type { Child } from '../lib/proc.js';
import { BENCH_DIR, DURATION, PROFILE, say } from '../lib/settings.js';
import { ms, us } from '../lib/stats.js';

export const UPSTREAM_ID = 'bench';
/** The upstream's tool as the broker lists it (the default prefix is `<id>_`). */
export const GATEWAY_TOOL = `${UPSTREAM_ID}_ping`;
const CONCURRENCIES = [1, 16] as const;

/** The broker's PROVIDERS_FILE: one upstream without credentials (still only for signed-in MCP users). */
export function upstreamsYaml(mcpUrl: string): string {
  return ['upstreams:', `  - id: ${UPSTREAM_ID}`, `    url: ${mcpUrl}`, '    auth: none', ''].join('\n');
}

/** Why the broker cannot be measured, or undefined when it lists and answers the upstream's tool. */
async function gatewayMissing(url: string, token: string): Promise<string | undefined> {
  const listed = await rawCall(`${url}/mcp`, token, { method: 'tools/list', params: { _meta: envelope() } });
  const names = ((listed.json?.result?.tools ?? []) as Array<{ name?: string }>).map((t) => t.name);
  if (!names.includes(GATEWAY_TOOL)) return `the broker does not list ${GATEWAY_TOOL} (tools/list: ${names.join(', ') || listed.status})`;
  const called = await rawCall(`${url}/mcp`, token, {
    method: 'tools/call',
    params: { name: GATEWAY_TOOL, arguments: {}, _meta: envelope() },
  });
  const text = JSON.stringify(called.json?.result?.content ?? null);
  if (called.json?.result?.resultType !== 'complete' || !text.includes('pong'))
    return `${GATEWAY_TOOL} did not answer pong (${called.status} ${called.text.slice(0, 120)})`;
  return undefined;
}

export const gateway = definePhase({
  name: 'gateway',
  async run({ stack, resources, report }) {
    const { baseline, env, tokens } = stack;
    const file = join(resources.dir, 'upstreams.yaml');
    writeFileSync(file, upstreamsYaml(`${baseline.url}/mcp`));
    const proxy = await resources.start('forward proxy', 'bench/servers/forward-proxy.ts', { UPSTREAM: baseline.url });
    let broker: Child | undefined;
    let unavailable: string | undefined;
    try {
      broker = await resources.spawnBroker(
        'broker G',
        { ...env, PROVIDERS_FILE: file, PORT: String(await freePort()) },
        PROFILE ? ['--cpu-prof', '--cpu-prof-dir', join(BENCH_DIR, 'profiles', 'gateway')] : [],
      );
      unavailable = await gatewayMissing(broker.url, tokens[0]!);
    } catch (err) {
      const exited = err instanceof Error ? /(?:Configuration error|Could not start): ([^\n]+)/.exec(err.message)?.[1] : undefined;
      unavailable = `the broker did not start with upstreams: in PROVIDERS_FILE${exited ? ` (${exited.slice(0, 160)})` : ''}`;
    }
    if (unavailable) say(`gateway not available: ${unavailable}`);

    // The direct call carries the user's token too (the upstream ignores it), so every target gets the same bytes.
    const targets: LoadTarget[] = [
      { name: 'direct', url: baseline.url, tool: 'ping', pid: baseline.pid, upstream: undefined },
      { name: 'proxy', url: proxy.url, tool: 'ping', pid: proxy.pid, upstream: baseline.pid },
      ...(broker && !unavailable ? [{ name: 'broker', url: broker.url, tool: GATEWAY_TOOL, pid: broker.pid, upstream: baseline.pid }] : []),
    ];
    const loads: GatewayLoad[] = [];
    for (const c of CONCURRENCIES) {
      const [direct, viaProxy, viaBroker] = await interleavedRounds(targets, c, tokens, DURATION);
      loads.push({ connections: c, direct: direct!, proxy: viaProxy!, ...(viaBroker ? { broker: viaBroker } : {}) });
      for (const r of [direct!, viaProxy!, ...(viaBroker ? [viaBroker] : [])])
        say(
          `gateway ${r.target.padEnd(6)} c=${String(c).padStart(2)}: ${Math.round(r.rps)} req/s, p50 ${ms(r.p50)}, p99 ${ms(r.p99)}, CPU ${us(r.cpuPerRequestUs)}/req${errorCounts(r, ',')}`,
        );
    }
    report.results.gateway = {
      ...(unavailable ? { unavailable } : {}),
      loads: loads.map((l) => ({
        connections: l.connections,
        direct: roundLoad(l.direct),
        proxy: roundLoad(l.proxy),
        ...(l.broker ? { broker: roundLoad(l.broker) } : {}),
      })),
    };
    for (const row of gatewayRows(loads, unavailable)) report.row(row);
    await Promise.all([proxy.stop(), broker?.stop()]);
  },
});
