// The gateway phase's baseline for "one more hop": a bare HTTP forwarding proxy, every request
// piped as it is to UPSTREAM (an origin) over a keep-alive connection pool, the answer piped back.
// No parsing, no auth, no MCP: whatever the broker's gateway costs beyond this is its own.
import { Agent, createServer, request } from 'node:http';
import { serveOnLoopback } from './serve.js';

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
serveOnLoopback(server);
