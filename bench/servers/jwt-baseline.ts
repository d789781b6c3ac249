// The exchange phase's baseline: a bare Express 5 endpoint that takes the same form POST as the
// broker's `POST /oauth/token`, verifies the subject token with jose against the same JWKS (the
// IdP's, discovered once), the same issuer and the service's audience, and answers a constant
// JSON. Whatever the exchange costs beyond this is the broker's own: client authentication, the
// store, decryption, the audit row, the usage record.
import express from 'express';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import type { AddressInfo } from 'node:net';

const issuer = process.env.OIDC_ISSUER!;
const audience = process.env.AUDIENCE!;
const discovery = (await (await fetch(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`)).json()) as { jwks_uri: string };
const jwks = createRemoteJWKSet(new URL(discovery.jwks_uri));
const ANSWER = JSON.stringify({
  access_token: 'constant',
  issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
  token_type: 'Bearer',
});

const app = express();
app.disable('x-powered-by');
app.post('/oauth/token', express.urlencoded({ extended: false, limit: '16kb' }), async (req, res) => {
  const token = (req.body as Record<string, unknown> | undefined)?.subject_token;
  if (typeof token !== 'string') return void res.status(400).json({ error: 'invalid_request' });
  try {
    await jwtVerify(token, jwks, { issuer, audience });
  } catch {
    return void res.status(400).json({ error: 'invalid_grant' });
  }
  res.set('cache-control', 'no-store').type('application/json').send(ANSWER);
});

const server = app.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  server.keepAliveTimeout = 65_000;
  process.stderr.write(`${JSON.stringify({ event: 'listening', url: `http://127.0.0.1:${port}` })}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
