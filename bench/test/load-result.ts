import type { LoadResult } from '../lib/load.js';

/** A made-up load result for the row tests: ten seconds at `rps` spread over 256 users, p99 four times p50, `dirt` non-2xx answers. */
export function loadResult(
  target: string,
  connections: number,
  rps: number,
  p50: number,
  dirt = 0,
  upstreamCpuPerRequestUs = 0,
): LoadResult {
  return {
    target,
    connections,
    seconds: 10,
    requests: rps * 10,
    rps,
    p50,
    p99: p50 * 4,
    mean: p50,
    errors: 0,
    non2xx: dirt,
    badBodies: 0,
    busiestUserPerMinute: Math.ceil(rps / 256) * 60,
    cpuPerRequestUs: 500,
    upstreamCpuPerRequestUs,
  };
}
