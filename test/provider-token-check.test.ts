// Provider.checkAccessToken (issue 19 point 2): what a provider says of a token an upstream refused.
// Real parts: OAuthProvider (openid-client) against a loopback OpenID provider of a few routes whose
// userinfo endpoint accepts one token, refuses another and fails on a third, and an `oauth2`
// provider whose identity API answers the same way.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { providerDefinitionSchema } from '../src/providers/definition.js';
import { OAuthProvider } from '../src/providers/oauth-provider.js';
import { acmeProvider } from './support/acme-provider.js';

/** Answers a bearer the way a provider's user endpoint does: `good` 200, `flaky` 503, anything else 401. */
function userAnswer(authorization: string | undefined): { status: number; body: unknown; headers?: Record<string, string> } {
  const token = authorization?.replace(/^Bearer /, '');
  if (token === 'good') return { status: 200, body: { sub: 'u-1', preferred_username: 'una', id: 1, login: 'una' } };
  if (token === 'flaky') return { status: 503, body: { message: 'down' } };
  return { status: 401, body: { error: 'invalid_token' }, headers: { 'www-authenticate': 'Bearer error="invalid_token"' } };
}

describe('Provider.checkAccessToken: the provider’s own word on a token', () => {
  let server: Server;
  let base = '';
  let userinfoRequests = 0;
  before(async () => {
    server = createServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(body));
      };
      if (path.startsWith('/oidc/.well-known/openid-configuration'))
        return send(200, {
          issuer: `${base}/oidc`,
          authorization_endpoint: `${base}/oidc/authorize`,
          token_endpoint: `${base}/oidc/token`,
          userinfo_endpoint: `${base}/oidc/userinfo`,
          jwks_uri: `${base}/oidc/jwks`,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
        });
      if (path === '/oidc/userinfo' || path === '/api/user') {
        if (path === '/oidc/userinfo') userinfoRequests++;
        const answer = userAnswer(req.headers.authorization);
        return send(answer.status, answer.body, answer.headers);
      }
      send(404, { error: 'not_found' });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('asks an OpenID provider’s userinfo endpoint: 200 accepted, 401 refused, anything else unknown', async () => {
    const provider = new OAuthProvider({
      definition: providerDefinitionSchema.parse({
        id: 'corp',
        displayName: 'Corp',
        kind: 'oidc',
        issuer: `${base}/oidc`,
        identity: { source: 'id_token' },
      }),
      clientId: 'corp-client',
      clientSecret: 'corp-secret',
      timeoutMs: 2000,
    });
    assert.equal(await provider.checkAccessToken('good'), 'accepted');
    assert.equal(await provider.checkAccessToken('revoked'), 'refused');
    assert.equal(await provider.checkAccessToken('flaky'), 'unknown');
    assert.equal(userinfoRequests, 3);
  });

  it('asks the identity API an oauth2 provider reads accounts from (GitHub’s GET /user), and says unknown where there is nothing to ask', async () => {
    const api = acmeProvider(base, { source: 'api', url: `${base}/api/user`, idField: 'id', loginField: 'login' });
    assert.equal(await api.checkAccessToken('good'), 'accepted');
    assert.equal(await api.checkAccessToken('revoked'), 'refused');
    assert.equal(await api.checkAccessToken('flaky'), 'unknown');
    const none = acmeProvider(base, { source: 'token_response', idField: 'user_id', loginField: 'user_id' });
    assert.equal(await none.checkAccessToken('revoked'), 'unknown', 'no endpoint to ask: keep the connection');
  });

  it('says unknown, never throws, when the provider cannot be reached', async () => {
    const gone = acmeProvider('http://127.0.0.1:9', {
      source: 'api',
      url: 'http://127.0.0.1:9/api/user',
      idField: 'id',
      loginField: 'login',
    });
    assert.equal(await gone.checkAccessToken('good'), 'unknown');
  });
});
