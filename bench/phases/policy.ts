// Policy (PROVIDERS_FILE `policy:`, docs/policy.md) with 500 rules: what one decision costs in this
// process (p50 over many decisions of the same compiled policy), and the connected path's
// throughput (`github_whoami`) on a broker with that policy against broker A without one, in the
// same interleaved rounds. The rules are the expensive kind for a call: 450 are indexed by another
// tool's name (skipped), 50 are evaluated on every call, one of them reading `account` (a store read).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { policyFromSection } from '../../src/config/policy.js';
import type { PolicyInput } from '../../src/policy/index.js';
import { freePort } from '../../test/support/idp.js';
import { errorCounts, interleavedRounds, roundLoad, type LoadTarget } from '../lib/load.js';
import { definePhase } from '../lib/phase.js';
import { CONCURRENCY, DURATION, profiled, say } from '../lib/settings.js';
import { ms, round, us } from '../lib/stats.js';

/** 500 rules, none of which matches the bench's calls. */
export function benchPolicy(): { default: 'allow'; rules: Array<Record<string, unknown>> } {
  const rules: Array<Record<string, unknown>> = [];
  for (let i = 0; i < 450; i++)
    rules.push({ id: `tool-${i}`, when: `tool.name == "tool_${i}" && !("maintainers" in principal.claims.groups)`, effect: 'deny' });
  for (let i = 0; i < 48; i++) rules.push({ id: `service-${i}`, when: `service.id == "svc-${i}"`, effect: 'deny' });
  rules.push({ id: 'blocked', when: 'has(principal.claims.blocked) && principal.claims.blocked == true', effect: 'deny' });
  rules.push({ id: 'blocked-account', when: 'account.login == "blocked-login"', effect: 'deny' });
  return { default: 'allow', rules };
}

const DECISIONS = 20_000;

/** p50 and p99 of one decision, in ms, of `policy` for a github_whoami call. */
function decisionCost(): { p50: number; p99: number } {
  const policy = policyFromSection(benchPolicy())!;
  const input: PolicyInput = {
    principal: { iss: 'https://idp.example', sub: 'bench-user-0', claims: { sub: 'bench-user-0', scope: 'mcp', groups: ['eng'] } },
    client: { id: 'bench', name: 'bench' },
    tool: { name: 'github_whoami', upstream: '', annotations: { readOnlyHint: true } },
    args: {},
    provider: 'github',
    account: { login: 'bench-gh-0', scopes: ['repo'] },
    service: { id: '' },
    now: new Date(),
  };
  for (let i = 0; i < 2_000; i++) policy.decide(input);
  const times: number[] = [];
  for (let i = 0; i < DECISIONS; i++) {
    const t = performance.now();
    const d = policy.decide({ ...input, now: new Date() });
    times.push(performance.now() - t);
    if (d.effect !== 'allow') throw new Error(`the bench policy decided ${JSON.stringify(d)}`);
  }
  times.sort((a, b) => a - b);
  return { p50: times[Math.floor(times.length / 2)]!, p99: times[Math.floor(times.length * 0.99)]! };
}

export const policy = definePhase({
  name: 'policy',
  async run({ stack, resources, report }) {
    const cost = decisionCost();
    say(`policy decision, 500 rules: p50 ${us(cost.p50 * 1000)}, p99 ${us(cost.p99 * 1000)}`);
    report.row({
      section: 'policy',
      measure: 'policy, 500 rules: one decision (in process)',
      value: `p50 ${us(cost.p50 * 1000)}, p99 ${us(cost.p99 * 1000)} (${DECISIONS} decisions)`,
      target: '≤ 0.1 ms p50',
      met: cost.p50 <= 0.1,
    });

    const file = join(resources.dir, 'policy.yaml');
    writeFileSync(file, stringify({ policy: benchPolicy() }));
    // Two brokers started together, alike but for the policy: broker A has served the earlier
    // phases (warm, its caches full), so measured against a fresh process it flatters "no policy".
    const [brokerN, brokerP] = await Promise.all([
      freePort().then((port) => resources.spawnBroker('broker N', { ...stack.env, PORT: String(port) }, profiled('policy-none'))),
      freePort().then((port) =>
        resources.spawnBroker('broker P', { ...stack.env, PROVIDERS_FILE: file, PORT: String(port) }, profiled('policy-500')),
      ),
    ]);
    const targets: LoadTarget[] = [
      { name: 'no policy', url: brokerN.url, tool: 'github_whoami', pid: brokerN.pid, upstream: stack.gh.pid },
      { name: 'policy, 500 rules', url: brokerP.url, tool: 'github_whoami', pid: brokerP.pid, upstream: stack.gh.pid },
    ];
    const loads: Array<{ connections: number; without: ReturnType<typeof roundLoad>; with: ReturnType<typeof roundLoad> }> = [];
    for (const c of CONCURRENCY) {
      const [without, withPolicy] = await interleavedRounds(targets, c, stack.tokens, DURATION);
      for (const r of [without!, withPolicy!])
        say(
          `${r.target.padEnd(18)} c=${String(c).padStart(2)}: ${Math.round(r.rps)} req/s, p50 ${ms(r.p50)}, p99 ${ms(r.p99)}, CPU ${us(r.cpuPerRequestUs)}/req${errorCounts(r, ',')}`,
        );
      const ratio = withPolicy!.rps / without!.rps;
      const clean = without!.errors + without!.non2xx + withPolicy!.errors + withPolicy!.non2xx === 0;
      report.row({
        section: 'policy',
        measure: `policy, 500 rules: github_whoami, c=${c}`,
        value: `${Math.round(withPolicy!.rps)} req/s = ${round(ratio * 100, 1)} % of no policy (${Math.round(without!.rps)} req/s), p50 ${ms(withPolicy!.p50)} vs ${ms(without!.p50)}; CPU ${us(withPolicy!.cpuPerRequestUs)}/req vs ${us(without!.cpuPerRequestUs)}${clean ? '' : ' — ERRORS'}`,
        target: '≥ 95 % of no policy',
        met: clean && ratio >= 0.95,
      });
      loads.push({ connections: c, without: roundLoad(without!), with: roundLoad(withPolicy!) });
    }
    report.results.policy = { decision: { p50Ms: round(cost.p50, 4), p99Ms: round(cost.p99, 4), decisions: DECISIONS }, loads };
    await Promise.all([brokerN.stop(), brokerP.stop()]);
  },
});
