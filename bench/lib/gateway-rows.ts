// The gateway phase's table rows, per upstream case (`auth: none`, and `provider: github` with the
// user's token): the same tools/call sent to the upstream directly, through a bare forwarding proxy
// and through the broker's gateway (with every limit at its default; the limits-off broker beside
// it), with issue 23's targets: the broker adds at most 1.0 ms p50 beyond the proxy at c=1, and
// reaches at least 0.8× the direct throughput at c=16.
import { dirty, errorsNote, type LoadResult } from './load.js';
import type { Row } from './report.js';
import { ms, us } from './stats.js';

export const GATEWAY_ADDED_P50_TARGET_MS = 1.0;
export const GATEWAY_THROUGHPUT_TARGET = 0.8;

export interface GatewayLoad {
  connections: number;
  direct: LoadResult;
  proxy: LoadResult;
  /** The broker with every limit at its default; absent when the broker does not offer the upstream's tool. */
  broker?: LoadResult;
  /** The broker with the limits off. */
  limitsOff?: LoadResult;
}

const SECTION = 'gateway';
const plus = (n: number) => `${n >= 0 ? '+' : '−'}${ms(Math.abs(n))}`;

/** The rows of one upstream case (`label` heads each measure); `unavailable` says why the broker rows could not be measured. */
export function gatewayRows(label: string, loads: readonly GatewayLoad[], unavailable?: string): Row[] {
  const rows: Row[] = [];
  const one = loads.find((l) => l.connections === 1);
  const sixteen = loads.find((l) => l.connections === 16);
  if (one) {
    const { direct: d, proxy: p, broker: b, limitsOff: off } = one;
    rows.push({
      section: SECTION,
      measure: `${label}: direct, c=1`,
      value: `${Math.round(d.rps)} req/s, p50 ${ms(d.p50)}, p99 ${ms(d.p99)}; upstream CPU ${us(d.cpuPerRequestUs)}/req${errorsNote(d)}`,
    });
    rows.push({
      section: SECTION,
      measure: `${label}: added by a bare proxy, c=1`,
      value: `p50 ${plus(p.p50 - d.p50)}, p99 ${plus(p.p99 - d.p99)}; proxy CPU ${us(p.cpuPerRequestUs)}/req${errorsNote(p)}`,
    });
    if (b) {
      const clean = dirty(b) + dirty(p) + dirty(d) === 0;
      rows.push({
        section: SECTION,
        measure: `${label}: added by the broker, c=1`,
        value: `p50 ${plus(b.p50 - d.p50)}, p99 ${plus(b.p99 - d.p99)}; broker CPU ${us(b.cpuPerRequestUs)}/req${errorsNote(b)}`,
      });
      const extra = b.p50 - p.p50;
      rows.push({
        section: SECTION,
        measure: `${label}: beyond the proxy, p50, c=1`,
        value: `${plus(extra)} (p99 ${plus(b.p99 - p.p99)}); limits off ${off ? plus(off.p50 - p.p50) : 'not run'}${off ? errorsNote(off) : ''}`,
        target: `≤ ${GATEWAY_ADDED_P50_TARGET_MS.toFixed(1)} ms`,
        met: clean && extra <= GATEWAY_ADDED_P50_TARGET_MS,
      });
    }
  }
  if (sixteen) {
    const { direct: d, proxy: p, broker: b, limitsOff: off } = sixteen;
    const share = (x: LoadResult) => `${Math.round((x.rps / d.rps) * 100)} %`;
    rows.push({
      section: SECTION,
      measure: `${label}: direct / proxy, c=16`,
      value: `${Math.round(d.rps)} / ${Math.round(p.rps)} req/s (proxy ${share(p)} of direct), p99 ${ms(d.p99)} / ${ms(p.p99)}${errorsNote(d, p)}`,
    });
    if (b) {
      const ratio = b.rps / d.rps;
      rows.push({
        section: SECTION,
        measure: `${label}: through the broker, c=16`,
        value:
          `${Math.round(b.rps)} req/s = ${share(b)} of direct, p99 ${ms(b.p99)}; broker CPU ${us(b.cpuPerRequestUs)}/req` +
          `; limits off ${off ? `${share(off)}${errorsNote(off)}` : 'not run'}${errorsNote(b)}`,
        target: `≥ ${GATEWAY_THROUGHPUT_TARGET}× direct`,
        met: dirty(b) + dirty(d) === 0 && ratio >= GATEWAY_THROUGHPUT_TARGET,
      });
    }
  }
  if (unavailable !== undefined) {
    rows.push({
      section: SECTION,
      measure: `${label}: through the broker`,
      value: `gateway not available: ${unavailable}`,
      target: `≤ ${GATEWAY_ADDED_P50_TARGET_MS.toFixed(1)} ms; ≥ ${GATEWAY_THROUGHPUT_TARGET}×`,
    });
  }
  return rows;
}
