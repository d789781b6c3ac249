/** Nearest-rank percentile of `values` (need not be sorted); NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

/** The middle value (the mean of the two middle ones for an even count); NaN when empty. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function mean(values: readonly number[]): number {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : NaN;
}

export function summary(values: readonly number[]): { n: number; p50: number; p99: number; mean: number; max: number } {
  return {
    n: values.length,
    p50: percentile(values, 50),
    p99: percentile(values, 99),
    mean: mean(values),
    max: values.length ? Math.max(...values) : NaN,
  };
}

/** Rounds for JSON output: 3 significant decimals below 10, 1 above. */
export function round(n: number, digits = n !== 0 && Math.abs(n) < 10 ? 3 : 1): number {
  if (!Number.isFinite(n)) return n;
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

export const ms = (n: number) => (Number.isFinite(n) ? `${round(n, Math.abs(n) < 10 ? 2 : 1)} ms` : 'n/a');
export const us = (n: number) => (Number.isFinite(n) ? `${round(n, 1)} µs` : 'n/a');
export const mb = (bytes: number) => `${round(bytes / (1024 * 1024), 1)} MB`;
