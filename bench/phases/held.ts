// Memory and CPU with 10,000 held repeats, in a fresh broker process (C), and their release by a
// graceful stop.
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { definePhase } from '../lib/phase.js';
import { mainThreadCpuMs, preciseCpuMs, rssBytes } from '../lib/proc.js';
import { HELD, profiled, say } from '../lib/settings.js';
import { mb, round } from '../lib/stats.js';
import { connectRequest, firstCall, pool, repeatCall, type Reply } from '../lib/wire.js';

/**
 * The repeats arrive 400 a second (100 every 250 ms), as people's clients would over time. Sent all
 * at once, 10,000 connections overflow the broker's listen backlog (511) while it verifies the first
 * tokens, and the kernel resets some of them: that measures a SYN flood, not holding.
 */
const WAVE = 100;
const WAVE_MS = 250;
/** Longer than sending every repeat (25 s) and the measuring after it, so none expires before the release. */
const HOLD_SECONDS = '50';
const MEASURE_HALF_SECONDS = 16;

export const held = definePhase({
  name: 'held',
  sections: ['memory'],
  keys: ['heldRepeats'],
  async run({ stack, resources, report }) {
    const { idp, env } = stack;
    const heldDb = join(resources.dir, 'held.db');
    const brokerC = await resources.spawnBroker(
      'broker C',
      { ...env, PORT: '0', DATABASE_PATH: heldDb, REPEAT_HOLD_SECONDS: HOLD_SECONDS },
      profiled('held'),
    );
    const idleRss = rssBytes(brokerC.pid);
    const heldTokens = await Promise.all(
      Array.from({ length: HELD }, (_, i) => idp.mintAccessToken({ sub: `bench-held-${i}`, expiresInSeconds: 3600 })),
    );
    const states = await pool(heldTokens, 16, async (token) => connectRequest(await firstCall(brokerC.url, token)).requestState);
    await sleep(1000);
    const beforeRss = rssBytes(brokerC.pid);
    const idleCpu0 = preciseCpuMs(brokerC.pid);
    await sleep(3000);
    const idleCpuMs = preciseCpuMs(brokerC.pid) - idleCpu0;

    let answered = 0;
    const failures: string[] = [];
    const t0 = performance.now();
    const replies: Promise<Reply>[] = [];
    for (const [i, token] of heldTokens.entries()) {
      if (i > 0 && i % WAVE === 0) await sleep(WAVE_MS);
      const reply = repeatCall(brokerC.url, token, states[i]!).then(
        (r) => {
          answered++;
          return r;
        },
        (err: unknown) => {
          failures.push(String((err as Error).cause ?? err));
          throw err;
        },
      );
      reply.catch(() => undefined); // counted in `failures`; settled below
      replies.push(reply);
    }
    const sentInMs = performance.now() - t0;
    // Held once the broker has taken every request and gone quiet (three half-seconds under 2 % of a core).
    let last = preciseCpuMs(brokerC.pid);
    for (let quiet = 0, waited = 0; quiet < 3 && waited < 15_000; waited += 500) {
      await sleep(500);
      const now = preciseCpuMs(brokerC.pid);
      quiet = now - last <= 10 ? quiet + 1 : 0;
      last = now;
    }
    const settledAfterMs = performance.now() - t0;
    const samples: number[] = [];
    const cpu0 = preciseCpuMs(brokerC.pid);
    const main0 = mainThreadCpuMs(brokerC.pid);
    const wall0 = performance.now();
    const halfSecondsCpuMs: number[] = [];
    for (let i = 0, last = main0; i < MEASURE_HALF_SECONDS; i++) {
      await sleep(500);
      samples.push(rssBytes(brokerC.pid));
      const now = mainThreadCpuMs(brokerC.pid);
      halfSecondsCpuMs.push(round(now - last, 2));
      last = now;
    }
    const heldCpuMs = preciseCpuMs(brokerC.pid) - cpu0;
    const heldMainThreadCpuMs = mainThreadCpuMs(brokerC.pid) - main0;
    const heldWallMs = performance.now() - wall0;
    const heldRss = Math.max(...samples);
    // A repeat that failed before the release is not held; one cut at the release is counted there.
    const failedBeforeRelease = failures.length;
    const stillHeld = HELD - answered - failedBeforeRelease;
    // Release them all: a graceful stop answers each held call `input_required` with its link.
    const r0 = performance.now();
    await brokerC.stop();
    const finals = await Promise.allSettled(replies);
    const releasedMs = performance.now() - r0;
    const askedAgain = finals.filter((f) => f.status === 'fulfilled' && f.value.json?.result?.resultType === 'input_required').length;
    const cpuPercent = (heldCpuMs / heldWallMs) * 100;
    report.results.heldRepeats = {
      held: HELD,
      sentInMs: round(sentInMs),
      failedToSend: failures.length,
      failedBeforeRelease,
      firstFailure: failures[0],
      stillHeldWhileMeasuring: stillHeld,
      settledAfterMs: round(settledAfterMs),
      rssIdleAfterStartMB: round(idleRss / 2 ** 20),
      rssBeforeMB: round(beforeRss / 2 ** 20),
      rssWhileHeldMB: round(heldRss / 2 ** 20),
      rssPerHeldKB: round((heldRss - beforeRss) / 1024 / HELD),
      cpuWhileHeldMs: round(heldCpuMs, 1),
      cpuWhileHeldMainThreadMs: round(heldMainThreadCpuMs, 1),
      cpuWhileHeldMainThreadPerHalfSecondMs: halfSecondsCpuMs,
      cpuWhileHeldWindowMs: round(heldWallMs),
      cpuWhileHeldPercent: round(cpuPercent, 2),
      cpuIdleBeforeMsPer3s: round(idleCpuMs, 1),
      answeredInputRequiredOnStop: askedAgain,
      releasedInMs: round(releasedMs),
    };
    report.row({
      section: 'memory',
      measure: `RSS with ${stillHeld} of ${HELD} repeats held`,
      value: `${mb(heldRss)} (before ${mb(beforeRss)}, +${round((heldRss - beforeRss) / 1024 / HELD)} KB each)`,
      target: '< 1 GB, all held',
      met: heldRss < 2 ** 30 && stillHeld === HELD,
    });
    report.row({
      section: 'memory',
      measure: `CPU while holding (${round(heldWallMs / 1000, 1)} s)`,
      value: `${round(heldCpuMs)} ms = ${round(cpuPercent, 2)} % of a core (main thread ${round(heldMainThreadCpuMs)} ms); ${askedAgain}/${HELD} answered input_required on release`,
      target: '< 1 % of a core, all answered',
      met: cpuPercent < 1 && askedAgain === HELD,
    });
    say(`held: ${JSON.stringify(report.results.heldRepeats)}`);
  },
});
