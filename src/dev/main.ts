import { ConfigError } from '../config/env.js';
import { createLogger } from '../log.js';
import { startDevBroker } from './dev-broker.js';
import { installProcessGuards } from '../observability/process-guards.js';

const log = createLogger();
// Before anything can fail unattended: what no caller handled is logged and counted, not the end of every user's broker.
installProcessGuards(log);

const dev = await startDevBroker(process.env, log).catch((err: unknown) => {
  process.stderr.write(
    err instanceof ConfigError
      ? err.problems.map((p) => `Configuration error: ${p}\n`).join('')
      : `Could not start: ${err instanceof Error ? err.message : String(err)}\n`,
  );
  process.exit(1);
});
process.stdout.write(dev.banner + '\n');
log.info('listening', {
  url: dev.running.url,
  mcp: dev.mcpUrl,
  ...(dev.example ? { example: dev.example.mcpUrl } : {}),
  mode: 'development',
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    log.info('shutting_down', { signal });
    dev.running.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}
