// The exchange phase's baseline: a bare Express 5 endpoint that takes the same form POST as the
// broker's `POST /oauth/token`, verifies the subject token with jose against the same JWKS (the
// IdP's, discovered once), the same issuer and the service's audience, and answers a constant
// JSON. Whatever the exchange costs beyond this is the broker's own: client authentication, the
// store, decryption, the audit row, the usage record.
import express from 'express';
import { jwtVerify } from 'jose';
import { createServer } from 'node:http';
import { EXCHANGE_ANSWER, serveOnLoopback, subjectTokenCheck } from './serve.js';

const { issuer, audience, jwks } = await subjectTokenCheck();

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
  res.set('cache-control', 'no-store').type('application/json').send(EXCHANGE_ANSWER);
});

serveOnLoopback(createServer(app));
