// Memory and CPU with 1,000 held repeats, in a fresh broker process (C), and their release by a
// graceful stop.
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { definePhase } from '../lib/phase.js';
import { cpuMs, rssBytes } from '../lib/proc.js';
import { HELD, say } from '../lib/settings.js';
import { mb, round } from '../lib/stats.js';
import { connectRequest, firstCall, pool, repeatCall } from '../lib/wire.js';

export const held = definePhase({
  name: 'held',
  sections: ['memory'],
  keys: ['heldRepeats'],
  async run({ stack, resources, report }) {
    const { idp, env } = stack;
    const heldDb = join(resources.dir, 'held.db');
    const brokerC = await resources.spawnBroker('broker C', { ...env, PORT: '0', DATABASE_PATH: heldDb, REPEAT_HOLD_SECONDS: '30' });
    const idleRss = rssBytes(brokerC.pid);
    const heldTokens = await Promise.all(
      Array.from({ length: HELD }, (_, i) => idp.mintAccessToken({ sub: `bench-held-${i}`, expiresInSeconds: 3600 })),
    );
    const states = await pool(heldTokens, 16, async (token) => connectRequest(await firstCall(brokerC.url, token)).requestState);
    await sleep(1000);
    const beforeRss = rssBytes(brokerC.pid);
    const idleCpu0 = cpuMs(brokerC.pid);
    await sleep(3000);
    const idleCpuMs = cpuMs(brokerC.pid) - idleCpu0;

    let answered = 0;
    const t0 = performance.now();
    const replies = heldTokens.map((token, i) =>
      repeatCall(brokerC.url, token, states[i]!).then((r) => {
        answered++;
        return r;
      }),
    );
    // Held once the broker has taken every request and gone quiet.
    let last = cpuMs(brokerC.pid);
    for (let quiet = 0, waited = 0; quiet < 2 && waited < 15_000; waited += 500) {
      await sleep(500);
      const now = cpuMs(brokerC.pid);
      quiet = now - last < 30 ? quiet + 1 : 0;
      last = now;
    }
    const settledAfterMs = performance.now() - t0;
    const samples: number[] = [];
    const cpu0 = cpuMs(brokerC.pid);
    const wall0 = performance.now();
    for (let i = 0; i < 16; i++) {
      await sleep(500);
      samples.push(rssBytes(brokerC.pid));
    }
    const heldCpuMs = cpuMs(brokerC.pid) - cpu0;
    const heldWallMs = performance.now() - wall0;
    const heldRss = Math.max(...samples);
    const stillHeld = HELD - answered;
    // Release them all: a graceful stop answers each held call `input_required` with its link.
    const r0 = performance.now();
    await brokerC.stop();
    const finals = await Promise.allSettled(replies);
    const releasedMs = performance.now() - r0;
    const askedAgain = finals.filter((f) => f.status === 'fulfilled' && f.value.json?.result?.resultType === 'input_required').length;
    const cpuPercent = (heldCpuMs / heldWallMs) * 100;
    report.results.heldRepeats = {
      held: HELD,
      stillHeldWhileMeasuring: stillHeld,
      settledAfterMs: round(settledAfterMs),
      rssIdleAfterStartMB: round(idleRss / 2 ** 20),
      rssBeforeMB: round(beforeRss / 2 ** 20),
      rssWhileHeldMB: round(heldRss / 2 ** 20),
      rssPerHeldKB: round((heldRss - beforeRss) / 1024 / HELD),
      cpuWhileHeldMs: round(heldCpuMs),
      cpuWhileHeldWindowMs: round(heldWallMs),
      cpuWhileHeldPercent: round(cpuPercent),
      cpuIdleBeforeMsPer3s: round(idleCpuMs),
      answeredInputRequiredOnStop: askedAgain,
      releasedInMs: round(releasedMs),
    };
    report.row({
      section: 'memory',
      measure: `RSS with ${stillHeld} repeats held`,
      value: `${mb(heldRss)} (before ${mb(beforeRss)}, +${round((heldRss - beforeRss) / 1024 / HELD)} KB each)`,
      target: '< 300 MB',
      met: heldRss < 300 * 2 ** 20 && stillHeld === HELD,
    });
    report.row({
      section: 'memory',
      measure: `CPU while holding (${round(heldWallMs / 1000, 1)} s)`,
      value: `${round(heldCpuMs)} ms = ${round(cpuPercent, 2)} % of a core; ${askedAgain}/${HELD} answered input_required on release`,
      target: 'no spin (≈ 0)',
      met: cpuPercent < 2 && askedAgain === HELD,
    });
    say(`held: ${JSON.stringify(report.results.heldRepeats)}`);
  },
});
