import type { RequestListener, Server } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Listening {
  server: Server;
  port: number;
  /** Stops listening and ends every open connection (requests a fault parked included). */
  close(): Promise<void>;
}

/**
 * An HTTP server listening on 127.0.0.1 at `port` (default: one the system picks), with no handler
 * yet: bound first, so its port can go into a URL before what serves it is built.
 */
export async function bindLoopback(port = 0): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

/** The port `server` listens on. */
export const portOf = (server: Server): number => (server.address() as AddressInfo).port;

/** Serves `handler` (an Express app, say) on 127.0.0.1 at a free port. */
export async function listenLoopback(handler: RequestListener): Promise<Listening> {
  const server = await bindLoopback();
  server.on('request', handler);
  return {
    server,
    port: portOf(server),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
