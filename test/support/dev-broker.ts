import { startDevBroker, type DevBroker } from '../../src/dev/dev-broker.js';
import type { Logger } from '../../src/log.js';
import { freePort } from './idp.js';

/**
 * `npm run dev`'s broker on a free port. The development broker binds fixed ports (PORT, and the
 * example service's PORT + 1) that its URLs name, so a port is picked first and can be taken by
 * another quick shard before it binds: the bind is the check, and a taken port means new ones.
 */
const MAX_ATTEMPTS = 5;

export async function startDevBrokerOnFreePort(
  env: (port: number) => Record<string, string | undefined>,
  log: Logger,
): Promise<{ dev: DevBroker; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    try {
      return { dev: await startDevBroker(env(port), log), port };
    } catch (err) {
      // PORT taken: the listen error itself; PORT + 1 taken: startDevBroker's own error naming it.
      const taken = (err as NodeJS.ErrnoException).code === 'EADDRINUSE' || (err instanceof Error && /already in use/.test(err.message));
      if (!taken || attempt === MAX_ATTEMPTS) throw err;
    }
  }
}
