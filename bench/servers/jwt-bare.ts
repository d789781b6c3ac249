// The exchange phase's ceiling: a bare `node:http` endpoint that reads the same form POST as the
// broker's `POST /oauth/token` and only verifies the subject token with jose against the same JWKS
// (the IdP's, discovered once), the same issuer and the service's audience, then answers a
// constant JSON. No framework, no client authentication, no store: what verifying a token costs.
import { createServer, type ServerResponse } from 'node:http';
import { jwtVerify } from 'jose';
import { EXCHANGE_ANSWER, serveOnLoopback, subjectTokenCheck } from './serve.js';

const { issuer, audience, jwks } = await subjectTokenCheck();
const MAX_BODY_BYTES = 16 * 1024;

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
      () => answer(res, 200, EXCHANGE_ANSWER),
      () => answer(res, 400, '{"error":"invalid_grant"}'),
    );
  });
});
serveOnLoopback(server);
