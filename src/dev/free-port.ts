import { createServer } from 'node:net';

/** A port that is free on 127.0.0.1 right now (listen on 0, read it, close). Racy by nature. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
