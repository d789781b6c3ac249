import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Waits, at most `timeoutMs`, for `probe` to return something other than `undefined` or `false`
 * (a probe that throws counts as not yet), and returns it: for tests that wait on the event itself
 * (a log line, a store row, a counter at a stand-in) instead of sleeping a guessed while.
 */
export async function eventually<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  { timeoutMs = 5_000, intervalMs = 10 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await Promise.resolve()
      .then(probe)
      .catch(() => undefined);
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** Lines of `output` (a process's stderr, or joined log lines) that log `event`. */
export function logged(output: string, event: string): number {
  return output.split('\n').filter((line) => line.includes(`"event":"${event}"`)).length;
}
