import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBroker, type Broker, type BrokerOptions } from './broker.js';
import type { Config } from './config/env.js';
import type { Logger } from './log.js';

export interface RunningBroker {
  broker: Broker;
  server: Server;
  /** The actual listen URL (useful with PORT=0). */
  url: string;
  close(): Promise<void>;
}

/** Starts the broker on HOST:PORT and returns once it is listening. */
export async function startBroker(config: Config, log: Logger, options: BrokerOptions = {}): Promise<RunningBroker> {
  const broker = createBroker(config, log, options);
  const server = broker.app.listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  // Held tool calls may wait up to the hold time; keep sockets alive past it.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = Math.max(120_000, config.repeatHoldMs + 30_000);
  const { port, address } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  let closing: Promise<void> | undefined;
  return {
    broker,
    server,
    url: `http://${host}:${port}`,
    close() {
      closing ??= (async () => {
        // Answer held calls first ("ask again" with the same link), then stop taking requests.
        broker.watcher.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
          // Held calls end within the hold time; after a grace period cut whatever is left.
          setTimeout(() => server.closeAllConnections(), 2000).unref();
        });
        await broker.close();
      })();
      return closing;
    },
  };
}
