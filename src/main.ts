import { loadConfigOrExit } from './config/env.js';
import { createLogger } from './log.js';
import { startTracing } from './observability/tracing.js';
import { startBroker } from './server.js';
import { installProcessGuards } from './observability/process-guards.js';

const log = createLogger();
// Before anything can fail unattended: what no caller handled is logged and counted, not the end of every user's broker.
installProcessGuards(log);

const config = loadConfigOrExit();

// Before the broker, so its store and providers are opened traced (a no-op that loads nothing unless OTEL_* configure an exporter).
const tracing = await startTracing(config.tracing, { warn: (event, fields) => log.warn(event, fields) }).catch((err: unknown) => {
  process.stderr.write(`Could not start tracing: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});

const running = await startBroker(config, log).catch((err: unknown) => {
  process.stderr.write(`Could not start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});

log.info('listening', { url: running.url, mcp: config.mcpUrl.href, public: config.publicUrl.href });

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    log.info('shutting_down', { signal });
    // Whatever hangs (a database that stopped answering), the process must still go.
    const deadline = config.providerTimeoutMs + 10_000;
    setTimeout(() => {
      log.error('shutdown_timed_out', { afterMs: deadline });
      process.exit(1);
    }, deadline).unref();
    running
      .close()
      .then(() => tracing.shutdown())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          log.error('shutdown_failed', { message: err instanceof Error ? err.message : String(err) });
          process.exit(1);
        },
      );
  });
}
