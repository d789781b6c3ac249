// `auth: mcp` discovery (src/gateway/mcp-auth/discovery.ts) never lets an upstream reached over
// https send the broker to plain http: not its 401's resource_metadata, not the authorization
// server its metadata names, not an endpoint of that server — least of all to a service on the
// broker's own loopback (a METRICS_PORT listener, a sidecar's admin port). Real parts: an https
// upstream on 127.0.0.1 with a self-signed certificate (openssl), and plain-http loopback servers
// that record every request reaching them.
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { discoverUpstreamAuthorization } from '../src/gateway/mcp-auth/index.js';
import { ProviderError } from '../src/providers/provider.js';
import { selfSignedCertificate } from './support/tls.js';

type Handler = (base: string, req: IncomingMessage, res: ServerResponse) => void;

interface Served {
  base: string;
  hits: string[];
  close(): Promise<void>;
}

async function serve(kind: 'http' | 'https', handler: Handler, certificate?: { key: Buffer; cert: Buffer }): Promise<Served> {
  const hits: string[] = [];
  let base = '';
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    hits.push(`${req.method} ${new URL(req.url ?? '/', base).pathname}`);
    handler(base, req, res);
  };
  const server = kind === 'https' ? createHttpsServer(certificate!, listener) : createHttpServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `${kind}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    hits,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const json = (res: ServerResponse, body: unknown) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

/** Authorization server metadata for `issuer` whose endpoints are under `endpoints`. */
const asMetadata = (issuer: string, endpoints: string) => ({
  issuer,
  authorization_endpoint: `${endpoints}/authorize`,
  token_endpoint: `${endpoints}/token`,
  code_challenge_methods_supported: ['S256'],
});

async function refusal(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ProviderError, `a ProviderError, not ${String(err)}`);
    return err;
  }
  assert.fail('discovery succeeded');
}

describe('auth: mcp discovery from an https upstream', () => {
  const certificate = selfSignedCertificate();
  const skip = certificate ? false : 'openssl is not available to make a certificate';
  let previous: string | undefined;
  before(() => {
    // The self-signed certificate of the test upstream: this process only, restored after.
    previous = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
  });
  after(() => {
    if (previous === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    else process.env.NODE_TLS_REJECT_UNAUTHORIZED = previous;
  });

  test('refuses a resource_metadata URL on plain http loopback, and fetches nothing there', { skip }, async () => {
    // What a local service would answer: its JSON must never be fetched, let alone echoed in an error.
    const local = await serve('http', (base, _req, res) => json(res, { resource: 'internal-secret-value', authorization_servers: [base] }));
    const upstream = await serve(
      'https',
      (_base, _req, res) => {
        res.writeHead(401, { 'www-authenticate': `Bearer resource_metadata="${local.base}/.well-known/oauth-protected-resource/mcp"` });
        res.end();
      },
      certificate,
    );
    try {
      const err = await refusal(discoverUpstreamAuthorization(new URL(`${upstream.base}/mcp`), { name: 'Tracker', timeoutMs: 5_000 }));
      assert.equal(err.code, 'misconfigured');
      assert.match(err.message, /its resource_metadata URL is not an https URL/);
      assert.doesNotMatch(err.message, /internal-secret-value/);
      assert.deepEqual(local.hits, [], 'nothing reached the plain-http loopback server');
    } finally {
      await Promise.all([upstream.close(), local.close()]);
    }
  });

  test('refuses an authorization server, or its endpoints, on plain http loopback, and sends nothing there', { skip }, async () => {
    const local = await serve('http', (base, _req, res) => json(res, asMetadata(base, base)));
    // Case 1: the upstream's own (https) metadata names a plain-http authorization server.
    // Case 2: an https authorization server whose token endpoint is plain http on loopback.
    const as = await serve(
      'https',
      (base, req, res) => {
        if (req.url?.startsWith('/.well-known/')) return json(res, asMetadata(base, local.base));
        res.writeHead(404).end();
      },
      certificate,
    );
    let names = '';
    const upstream = await serve(
      'https',
      (base, req, res) => {
        if (req.url === '/.well-known/oauth-protected-resource/mcp')
          return json(res, { resource: `${base}/mcp`, authorization_servers: [names] });
        res.writeHead(401, { 'www-authenticate': `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"` });
        res.end();
      },
      certificate,
    );
    try {
      names = local.base;
      const server = await refusal(discoverUpstreamAuthorization(new URL(`${upstream.base}/mcp`), { name: 'Tracker', timeoutMs: 5_000 }));
      assert.equal(server.code, 'misconfigured');
      assert.match(server.message, /its authorization server is not an https URL/);

      names = as.base;
      const endpoint = await refusal(discoverUpstreamAuthorization(new URL(`${upstream.base}/mcp`), { name: 'Tracker', timeoutMs: 5_000 }));
      assert.equal(endpoint.code, 'misconfigured');
      assert.match(endpoint.message, /its authorization endpoint is not an https URL/);
      assert.deepEqual(local.hits, [], 'nothing reached the plain-http loopback server');
    } finally {
      await Promise.all([upstream.close(), as.close(), local.close()]);
    }
  });
});
