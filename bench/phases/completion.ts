// Completion detection: from the provider callback to the held repeat's result, with the callback
// on broker A itself (woken by `watcher.notify`) and on broker B (woken by A's poll).
import { freePort } from '../../test/support/idp.js';
import { completionFigures, completionSamples } from '../lib/browser.js';
import { definePhase } from '../lib/phase.js';
import { say } from '../lib/settings.js';
import { ms } from '../lib/stats.js';

export const completion = definePhase({
  name: 'completion',
  keys: ['completionDetection'],
  async run({ stack, resources, report }) {
    const { idp, publicUrl, env, brokerA } = stack;
    const portB = await freePort();
    const brokerB = await resources.spawnBroker('broker B', { ...env, PORT: String(portB) });
    const detection: Record<string, unknown> = {};
    for (const mode of ['same process', 'across processes'] as const) {
      const callbackOn = mode === 'same process' ? brokerA.url : brokerB.url;
      const { s, record, value } = completionFigures(
        await completionSamples(idp, publicUrl, brokerA.url, callbackOn, `bench-cd-${mode === 'same process' ? 's' : 'x'}`),
      );
      detection[mode] = record;
      report.row({ section: 'completion', measure: `${mode} (n=${s.n})`, value, target: 'p50 < 250 ms', met: s.p50 < 250 });
      say(`completion detection, ${mode}: p50 ${ms(s.p50)}, p99 ${ms(s.p99)}`);
    }
    report.results.completionDetection = detection;
    await brokerB.stop();
  },
});
