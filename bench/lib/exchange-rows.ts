// The exchange phase's table rows, from its pooled load results: the two JWT-verifying baselines
// (the bare `node:http` one, the ceiling, and the Express one) and the exchange at each
// concurrency, on a broker with every limit at its default (the row with the target: ≥ 80 % of
// the `node:http` baseline's throughput; p50 under 2 ms at c=1) and with the limits off beside it.
import { dirty, errorsNote, type LoadResult } from './load.js';
import type { Row } from './report.js';
import { ms, us } from './stats.js';

export interface ExchangeLoad {
  connections: number;
  /** The Express endpoint that verifies the subject token (bench/servers/jwt-baseline.ts). */
  baseline: LoadResult;
  /** The bare `node:http` endpoint that only verifies it (bench/servers/jwt-bare.ts): the target's ceiling. */
  bare: LoadResult;
  /** The broker with every limit at its default (the per-service one at `serviceLimitPerMinute`). */
  exchange: LoadResult;
  /** The broker with every limit off. */
  limitsOff?: LoadResult;
}

export const EXCHANGE_RATIO_TARGET = 0.8;
export const EXCHANGE_P50_TARGET_MS = 2;

const figures = (r: LoadResult) => `p50 ${ms(r.p50)}, p99 ${ms(r.p99)}; CPU ${us(r.cpuPerRequestUs)}/req`;

/** The rows; `serviceLimitPerMinute` is the per-service limit the defaults broker ran with. */
export function exchangeRows(loads: readonly ExchangeLoad[], serviceLimitPerMinute: number): Row[] {
  const rows: Row[] = [];
  for (const { connections: c, baseline: b, bare: n, exchange: x, limitsOff: off } of loads) {
    rows.push({
      section: 'exchange',
      measure: `JWT baseline, node:http, c=${c}`,
      value: `${Math.round(n.rps)} req/s, ${figures(n)}${errorsNote(n)}`,
    });
    rows.push({
      section: 'exchange',
      measure: `JWT baseline, Express, c=${c}`,
      value: `${Math.round(b.rps)} req/s, ${figures(b)}${errorsNote(b)}`,
    });
    const share = (r: LoadResult) =>
      `${Math.round(r.rps)} req/s = ${Math.round((r.rps / n.rps) * 100)} % of node:http, ${Math.round((r.rps / b.rps) * 100)} % of Express`;
    const clean = dirty(x) === 0 && dirty(n) === 0;
    const perMinute = Math.round(x.rps * 60);
    rows.push({
      section: 'exchange',
      measure: `exchange, default limits, c=${c}`,
      value:
        `${share(x)}, ${figures(x)}; the one service ${perMinute}/min ` +
        `(its limit set to ${serviceLimitPerMinute}${perMinute >= serviceLimitPerMinute ? ', REACHED' : ''})` +
        errorsNote(x, n),
      target: `≥ ${EXCHANGE_RATIO_TARGET * 100} % of node:http`,
      met: clean && x.rps >= EXCHANGE_RATIO_TARGET * n.rps,
    });
    if (off)
      rows.push({
        section: 'exchange',
        measure: `exchange, limits off, c=${c}`,
        value: `${share(off)}, ${figures(off)}${errorsNote(off)}`,
      });
    if (c === 1)
      rows.push({
        section: 'exchange',
        measure: 'exchange p50, default limits, c=1',
        value: `${ms(x.p50)} (node:http baseline ${ms(n.p50)})`,
        target: `< ${EXCHANGE_P50_TARGET_MS} ms`,
        met: clean && x.p50 < EXCHANGE_P50_TARGET_MS,
      });
  }
  return rows;
}
