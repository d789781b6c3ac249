// The observability phase's table rows: the connected-path tools on a quiet broker (LOG_LEVEL=warn,
// /metrics off) and an observed one (LOG_LEVEL=info into a collector's pipe, /metrics scraped every
// second), with issue 14's target: observed ÷ quiet req/s at least 0.95, the median over the
// alternating pairs of runs.
import { dirty, errorsNote, type LoadsAt } from './load.js';
import type { Row } from './report.js';
import { median, round, us } from './stats.js';

export const OBSERVED_RATIO_TARGET = 0.95;
/**
 * Below this much log output per request the observed broker was not logging its access lines
 * (one is ≈ 225 bytes), so its figures say nothing about what logging costs.
 */
export const MIN_LOG_BYTES_PER_REQUEST = 100;

export type ObservedLoad = LoadsAt<'quiet' | 'observed'> & {
  tool: string;
  /** observed ÷ quiet req/s of each pair of runs, in the order they ran. */
  ratios: number[];
  /** What the collector read from the observed broker's stdout during its runs, per request. */
  logBytesPerRequest: number;
  /** The collector's CPU during the observed runs, per request, in µs. */
  collectorCpuPerRequestUs: number;
};

export interface ScrapeStats {
  scrapes: number;
  /** Answers other than a 200 carrying broker_http_requests_total, and failed requests. */
  failed: number;
  meanBytes: number;
  p50Ms: number;
}

const SECTION = 'observability';
const ratio = (n: number) => (Number.isFinite(n) ? round(n, 2).toFixed(2) : 'n/a');
const pct = (n: number) => `${n >= 0 ? '+' : '−'}${Math.abs(Math.round(n * 100))} %`;

export function observabilityRows(loads: readonly ObservedLoad[], scrapes: ScrapeStats): Row[] {
  const scraped = scrapes.scrapes > 0 && scrapes.failed === 0;
  const rows: Row[] = [];
  for (const l of loads) {
    const { quiet: q, observed: o } = l;
    const mid = median(l.ratios);
    const logged = l.logBytesPerRequest >= MIN_LOG_BYTES_PER_REQUEST;
    rows.push({
      section: SECTION,
      measure: `${l.tool}, c=${l.connections}`,
      value:
        `quiet ${Math.round(q.rps)} req/s, CPU ${us(q.cpuPerRequestUs)}/req${errorsNote(q)}; ` +
        `observed ${Math.round(o.rps)} req/s, CPU ${us(o.cpuPerRequestUs)}/req (${pct(o.cpuPerRequestUs / q.cpuPerRequestUs - 1)}) ` +
        `+ ${us(l.collectorCpuPerRequestUs)} collector, ${Math.round(l.logBytesPerRequest)} B of log/req${errorsNote(o)}; ` +
        `observed ÷ quiet ${ratio(mid)} (median of ${l.ratios.length}: ${l.ratios.map(ratio).join(' ')})` +
        (logged ? '' : ' — NOT LOGGING'),
      target: `≥ ${OBSERVED_RATIO_TARGET}`,
      met: dirty(q) + dirty(o) === 0 && scraped && logged && mid >= OBSERVED_RATIO_TARGET,
    });
  }
  rows.push({
    section: SECTION,
    measure: '/metrics scraped every second',
    value:
      scrapes.scrapes === 0
        ? 'NONE during the observed runs'
        : `${scrapes.scrapes} scrapes during the observed runs, ${scrapes.failed ? `${scrapes.failed} FAILED` : 'all 200'}, ` +
          `${round(scrapes.meanBytes / 1024, 1)} KB each, p50 ${round(scrapes.p50Ms, 2)} ms`,
  });
  return rows;
}
