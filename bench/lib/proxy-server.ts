// The round-robin load balancer of test/support/round-robin-proxy.ts in a process of its own, for
// the bench's `postgres` phase: in the bench process it would share an event loop with the load
// generator. PROXY_BACKENDS (comma-separated origins), PORT (0: any free one). Prints the
// `{"event":"listening","url":...}` line that bench/lib/proc.ts waits for and, on SIGUSR2, a line
// `{"event":"hits","seq":n,"counts":[...]}` with the requests each backend answered since the last
// such line.
import { startRoundRobinProxy } from '../../test/support/round-robin-proxy.js';

const backends = (process.env.PROXY_BACKENDS ?? '').split(',').filter(Boolean);
if (backends.length === 0) throw new Error('PROXY_BACKENDS is empty');
const proxy = await startRoundRobinProxy(Number(process.env.PORT ?? 0), backends);

let seq = 0;
process.on('SIGUSR2', () => {
  const counts = backends.map(() => 0);
  for (const hit of proxy.hits) counts[hit.backend]!++;
  proxy.hits.length = 0;
  process.stdout.write(`${JSON.stringify({ event: 'hits', seq: ++seq, counts })}\n`);
});
const stop = () => void proxy.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdout.write(`${JSON.stringify({ event: 'listening', url: proxy.url })}\n`);
