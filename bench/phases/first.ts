// The first call to URL: github_whoami from users with no connection, ending in input_required
// with our connect link.
import { definePhase } from '../lib/phase.js';
import { FIRST_CALLS, say } from '../lib/settings.js';
import { ms, round, summary } from '../lib/stats.js';
import { connectRequest, firstCall } from '../lib/wire.js';

export const first = definePhase({
  name: 'first',
  sections: ['first call'],
  keys: ['firstCallToUrl'],
  async run({ stack, report }) {
    const { idp, brokerA } = stack;
    const fresh = await Promise.all(
      Array.from({ length: FIRST_CALLS + 20 }, (_, i) => idp.mintAccessToken({ sub: `bench-new-${i}`, expiresInSeconds: 3600 })),
    );
    const latencies: number[] = [];
    for (let i = 0; i < fresh.length; i++) {
      const t0 = performance.now();
      const reply = await firstCall(brokerA.url, fresh[i]!);
      const dt = performance.now() - t0;
      connectRequest(reply);
      if (i >= 20) latencies.push(dt); // the first 20 warm up
    }
    const s = summary(latencies);
    report.results.firstCallToUrl = { ...s, p50: round(s.p50), p99: round(s.p99), mean: round(s.mean), max: round(s.max) };
    report.row({
      section: 'first call',
      measure: `github_whoami → input_required (c=1, n=${s.n})`,
      value: `p50 ${ms(s.p50)}, p99 ${ms(s.p99)}`,
    });
    say(`first call to URL: p50 ${ms(s.p50)}, p99 ${ms(s.p99)}`);
  },
});
