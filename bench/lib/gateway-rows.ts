// The gateway phase's table rows: the same tools/call sent to the upstream directly, through a bare
// forwarding proxy and through the broker's gateway, with issue 13's targets (the broker adds at
// most 1.5 ms p50 more than the proxy at c=1; at c=16 at least 0.6× the direct throughput).
import { dirty, errorsNote, type LoadResult, type LoadsAt } from './load.js';
import type { Row } from './report.js';
import { ms, us } from './stats.js';

export const GATEWAY_ADDED_P50_TARGET_MS = 1.5;
export const GATEWAY_THROUGHPUT_TARGET = 0.6;

export type GatewayLoad = LoadsAt<'direct' | 'proxy'> & {
  /** Absent when the broker does not offer the upstream's tool (the gateway not merged yet, or not starting). */
  broker?: LoadResult;
};

const SECTION = 'gateway';
const plus = (n: number) => `${n >= 0 ? '+' : '−'}${ms(Math.abs(n))}`;

/** The rows; `unavailable` says why the broker rows could not be measured. */
export function gatewayRows(loads: readonly GatewayLoad[], unavailable?: string): Row[] {
  const rows: Row[] = [];
  const one = loads.find((l) => l.connections === 1);
  const sixteen = loads.find((l) => l.connections === 16);
  if (one) {
    const { direct: d, proxy: p, broker: b } = one;
    rows.push({
      section: SECTION,
      measure: 'direct to the upstream, c=1',
      value: `${Math.round(d.rps)} req/s, p50 ${ms(d.p50)}, p99 ${ms(d.p99)}; upstream CPU ${us(d.cpuPerRequestUs)}/req${errorsNote(d)}`,
    });
    rows.push({
      section: SECTION,
      measure: 'added by a bare proxy, c=1',
      value: `p50 ${plus(p.p50 - d.p50)}, p99 ${plus(p.p99 - d.p99)}; proxy CPU ${us(p.cpuPerRequestUs)}/req${errorsNote(p)}`,
    });
    if (b) {
      const clean = dirty(b) + dirty(p) + dirty(d) === 0;
      rows.push({
        section: SECTION,
        measure: 'added by the broker, c=1',
        value: `p50 ${plus(b.p50 - d.p50)}, p99 ${plus(b.p99 - d.p99)}; broker CPU ${us(b.cpuPerRequestUs)}/req${errorsNote(b)}`,
      });
      const extra = b.p50 - p.p50;
      rows.push({
        section: SECTION,
        measure: 'broker beyond the proxy, p50, c=1',
        value: `${plus(extra)} (p99 ${plus(b.p99 - p.p99)})`,
        target: `≤ ${GATEWAY_ADDED_P50_TARGET_MS} ms`,
        met: clean && extra <= GATEWAY_ADDED_P50_TARGET_MS,
      });
    }
  }
  if (sixteen) {
    const { direct: d, proxy: p, broker: b } = sixteen;
    const share = (x: LoadResult) => `${Math.round((x.rps / d.rps) * 100)} %`;
    rows.push({
      section: SECTION,
      measure: 'throughput direct / proxy, c=16',
      value: `${Math.round(d.rps)} / ${Math.round(p.rps)} req/s (proxy ${share(p)} of direct), p99 ${ms(d.p99)} / ${ms(p.p99)}${errorsNote(d, p)}`,
    });
    if (b) {
      const ratio = b.rps / d.rps;
      rows.push({
        section: SECTION,
        measure: 'throughput through the broker, c=16',
        value: `${Math.round(b.rps)} req/s = ${share(b)} of direct, p99 ${ms(b.p99)}; broker CPU ${us(b.cpuPerRequestUs)}/req${errorsNote(b)}`,
        target: `≥ ${GATEWAY_THROUGHPUT_TARGET}× direct`,
        met: dirty(b) + dirty(d) === 0 && ratio >= GATEWAY_THROUGHPUT_TARGET,
      });
    }
  }
  if (unavailable !== undefined) {
    rows.push({
      section: SECTION,
      measure: 'through the broker, c=1 and c=16',
      value: `gateway not available: ${unavailable}`,
      target: `≤ ${GATEWAY_ADDED_P50_TARGET_MS} ms; ≥ ${GATEWAY_THROUGHPUT_TARGET}×`,
    });
  }
  return rows;
}
