// The exchange phase's table rows, from its pooled load results: the JWT baseline and the
// exchange at each concurrency, with the targets (≥ 80 % of the baseline's throughput; p50 under
// 2 ms at c=1).
import { dirty, errorsNote, type LoadsAt } from './load.js';
import type { Row } from './report.js';
import { ms, us } from './stats.js';

export type ExchangeLoad = LoadsAt<'baseline' | 'exchange'>;

export const EXCHANGE_RATIO_TARGET = 0.8;
export const EXCHANGE_P50_TARGET_MS = 2;

export function exchangeRows(loads: readonly ExchangeLoad[]): Row[] {
  const rows: Row[] = [];
  for (const { connections: c, baseline: b, exchange: x } of loads) {
    rows.push({
      section: 'exchange',
      measure: `JWT baseline, c=${c}`,
      value: `${Math.round(b.rps)} req/s, p50 ${ms(b.p50)}, p99 ${ms(b.p99)}; CPU ${us(b.cpuPerRequestUs)}/req` + errorsNote(b),
    });
    const ratio = x.rps / b.rps;
    const clean = dirty(x) === 0 && dirty(b) === 0;
    rows.push({
      section: 'exchange',
      measure: `exchange, c=${c}`,
      value:
        `${Math.round(x.rps)} req/s = ${Math.round(ratio * 100)} % of JWT baseline, p50 ${ms(x.p50)}, p99 ${ms(x.p99)}; ` +
        `CPU ${us(x.cpuPerRequestUs)}/req` +
        errorsNote(x, b),
      target: `≥ ${EXCHANGE_RATIO_TARGET * 100} % of baseline`,
      met: clean && ratio >= EXCHANGE_RATIO_TARGET,
    });
    if (c === 1)
      rows.push({
        section: 'exchange',
        measure: 'exchange p50, c=1',
        value: `${ms(x.p50)} (JWT baseline ${ms(b.p50)})`,
        target: `< ${EXCHANGE_P50_TARGET_MS} ms`,
        met: clean && x.p50 < EXCHANGE_P50_TARGET_MS,
      });
  }
  return rows;
}
