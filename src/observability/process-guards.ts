/**
 * The process's last line of defence: what no caller handled is logged and counted, never the end
 * of the broker. Every promise in src/ is awaited or carries its own `.catch` (typescript-eslint
 * `no-floating-promises`, in `npm run check`); these guards are for what slips through anyway — a
 * library's own floating promise, a bug — so one bad answer from one upstream cannot take every
 * user's broker down with it.
 *
 * - `unhandledRejection`: logged, counted, and the broker keeps serving. A promise nobody awaited
 *   left nothing half-done that another request depends on.
 * - `uncaughtException`: logged and counted, then the process exits (code 1) for its supervisor to
 *   restart it. A synchronous throw out of an event handler can leave a socket, a lock or a
 *   transaction half-done, and Node documents that resuming after it is not safe.
 */
import type { Logger } from '../log.js';
import { metrics } from './metrics.js';

let sink: Logger | undefined;

function describe(err: unknown): Record<string, string> {
  if (err instanceof Error) return { errorName: err.name, message: err.message.slice(0, 300) };
  return { message: String(err).slice(0, 300) };
}

/** Where background failures are logged (the process-wide logger), and what ends the process. */
export interface ProcessGuardOptions {
  exit?: (code: number) => void;
}

/**
 * Installs the process-level handlers once per process (later calls only change the logger) and
 * makes `log` the sink of {@link backgroundFailure}. Returns a function that removes them (tests).
 */
export function installProcessGuards(log: Logger, options: ProcessGuardOptions = {}): () => void {
  sink = log;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const onRejection = (reason: unknown) => {
    metrics.unhandledError('rejection');
    log.error('unhandled_rejection', describe(reason));
  };
  const onException = (err: unknown) => {
    metrics.unhandledError('exception');
    log.error('uncaught_exception', describe(err));
    exit(1);
  };
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return () => {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
    if (sink === log) sink = undefined;
  };
}

/**
 * The `.catch` of work the broker starts and does not wait for (a cache write, a wake-up, a timer's
 * task): its failure is logged as `background_task_failed` naming `task`, and counted, instead of
 * becoming an unhandled rejection.
 */
export function backgroundFailure(task: string): (err: unknown) => void {
  return (err) => {
    metrics.unhandledError('background');
    if (sink) sink.warn('background_task_failed', { task, ...describe(err) });
    else process.stderr.write(`background task ${task} failed: ${describe(err).message}\n`);
  };
}
