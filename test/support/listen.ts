import type { RequestListener, Server } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Listening {
  server: Server;
  port: number;
  /** Stops listening and ends every open connection (requests a fault parked included). */
  close(): Promise<void>;
}

/** Serves `handler` (an Express app, say) on 127.0.0.1 at a free port. */
export async function listenLoopback(handler: RequestListener): Promise<Listening> {
  const server = createServer(handler);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
