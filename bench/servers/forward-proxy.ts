// The gateway phase's baseline for "one more hop": a bare HTTP forwarding proxy, every request
// piped as it is to UPSTREAM (an origin) over a keep-alive connection pool, the answer piped back.
// No parsing, no auth, no MCP: whatever the broker's gateway costs beyond this is its own.
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

const upstream = new URL(process.env.UPSTREAM ?? '');
const agent = new Agent({ keepAlive: true, maxSockets: 256 });
const server = createServer((req, res) => {
  const out = request(
    { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers, agent },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  out.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
  req.pipe(out);
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stderr.write(`${JSON.stringify({ event: 'listening', url: `http://127.0.0.1:${port}` })}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
