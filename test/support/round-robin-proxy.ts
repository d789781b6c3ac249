// A plain round-robin load balancer on loopback, as an operator would put in front of several
// broker instances: no sticky sessions, every request (not every connection) goes to the next
// backend, and a backend that refuses the connection is skipped for the next one.
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ProxyHit {
  method: string;
  path: string;
  /** Index into `backends` of the instance that answered. */
  backend: number;
}

export interface RoundRobinProxy {
  url: string;
  port: number;
  /** Every request answered, in order, with the instance that answered it. */
  hits: ProxyHit[];
  close(): Promise<void>;
}

/** Listens on `port` (PUBLIC_URL's port) and spreads requests over `backends` (origins). */
export async function startRoundRobinProxy(port: number, backends: string[]): Promise<RoundRobinProxy> {
  const hits: ProxyHit[] = [];
  let next = 0;

  const forward = (req: IncomingMessage, res: ServerResponse, body: Buffer, attempt: number): void => {
    const index = next++ % backends.length;
    const target = new URL(req.url ?? '/', backends[index]);
    const upstream = request(target, { method: req.method, headers: req.headers }, (answer) => {
      hits.push({ method: req.method ?? 'GET', path: (req.url ?? '/').split('?')[0]!, backend: index });
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      // A stopped instance: try the next one, as a load balancer's retry on connect failure would.
      if (!res.headersSent && attempt < backends.length && (err.code === 'ECONNREFUSED' || err.code === 'ECONNRESET'))
        return forward(req, res, body, attempt + 1);
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end('bad gateway');
      else res.destroy();
    });
    upstream.end(body);
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => forward(req, res, Buffer.concat(chunks), 1));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}`,
    port: bound,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
