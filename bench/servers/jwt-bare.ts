// The exchange phase's ceiling: a bare `node:http` endpoint that reads the same form POST as the
// broker's `POST /oauth/token` and only verifies the subject token with jose against the same JWKS
// (the IdP's, discovered once), the same issuer and the service's audience, then answers a
// constant JSON. No framework, no client authentication, no store: what verifying a token costs.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRemoteJWKSet, jwtVerify } from 'jose';

const issuer = process.env.OIDC_ISSUER!;
const audience = process.env.AUDIENCE!;
const MAX_BODY_BYTES = 16 * 1024;
const discovery = (await (await fetch(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`)).json()) as { jwks_uri: string };
const jwks = createRemoteJWKSet(new URL(discovery.jwks_uri));
const ANSWER = JSON.stringify({
  access_token: 'constant',
  issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
  token_type: 'Bearer',
});

const answer = (res: ServerResponse, status: number, body: string) =>
  void res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(body);

const server = createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== '/oauth/token') return answer(res, 404, '{"error":"not_found"}');
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) req.destroy();
    else chunks.push(chunk);
  });
  req.on('end', () => {
    const token = new URLSearchParams(Buffer.concat(chunks).toString('utf8')).get('subject_token');
    if (!token) return answer(res, 400, '{"error":"invalid_request"}');
    jwtVerify(token, jwks, { issuer, audience }).then(
      () => answer(res, 200, ANSWER),
      () => answer(res, 400, '{"error":"invalid_grant"}'),
    );
  });
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
