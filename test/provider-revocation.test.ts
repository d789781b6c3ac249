// RFC 7009 revocation by a configured provider: a disconnect revokes the grant (the refresh token),
// a token the broker decided not to keep is revoked alone (its access token), so a grant another
// connection may share stays alive.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { acmeProvider } from './support/acme-provider.js';

describe('OAuthProvider: RFC 7009 revocation', () => {
  let server: Server;
  let base = '';
  const revoked: URLSearchParams[] = [];

  before(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        if (req.method === 'POST' && req.url === '/revoke') revoked.push(new URLSearchParams(body));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const provider = () => acmeProvider(base, { source: 'token_response', idField: 'user_id', loginField: 'user_name' });
  const tokens = { accessToken: 'at-kept-apart', refreshToken: 'rt-of-the-grant', tokenType: 'bearer', scopes: [] };

  /** Revokes `tokens` as `what` and returns the one revocation request the provider received (its form). */
  async function revokedOnce(what: 'grant' | 'token'): Promise<URLSearchParams> {
    revoked.length = 0;
    assert.deepEqual(await provider().revoke(tokens, what), { revoked: true });
    assert.equal(revoked.length, 1);
    return revoked[0]!;
  }

  it('revokes the grant through its refresh token on a disconnect', async () => {
    const form = await revokedOnce('grant');
    assert.equal(form.get('token'), 'rt-of-the-grant');
    assert.equal(form.get('token_type_hint'), 'refresh_token');
  });

  it('revokes only the access token of a token it does not keep, never the refresh token of the grant', async () => {
    const form = await revokedOnce('token');
    assert.equal(form.get('token'), 'at-kept-apart');
    assert.equal(form.get('token_type_hint'), 'access_token');
    assert.ok(![...form.values()].includes('rt-of-the-grant'), 'the refresh token is never sent');
  });
});
