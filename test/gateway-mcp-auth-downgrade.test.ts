// `auth: mcp` discovery (src/providers/mcp-auth/discovery.ts) never lets an upstream reached over
// https send the broker to plain http: not its 401's resource_metadata, not the authorization
// server its metadata names, not an endpoint of that server — least of all to a service on the
// broker's own loopback (a METRICS_PORT listener, a sidecar's admin port). Real parts: an https
// upstream on 127.0.0.1 with a self-signed certificate (test/fixtures/tls), and plain-http loopback servers
// that record every request reaching them.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { discoverUpstreamAuthorization } from '../src/providers/mcp-auth/index.js';
import { asMetadata, json, metadataChallenge, refusal, serve, staticUpstream } from './support/mcp-auth-bench.js';
import { acceptSelfSignedCertificates, selfSignedCertificate } from './support/tls.js';
import { LOOPBACK_EGRESS } from './support/egress.js';

describe('auth: mcp discovery from an https upstream', () => {
  const certificate = selfSignedCertificate();
  acceptSelfSignedCertificates();

  test('refuses a resource_metadata URL on plain http loopback, and fetches nothing there', async () => {
    // What a local service would answer: its JSON must never be fetched, let alone echoed in an error.
    const local = await serve((base, _req, res) => json(res, { resource: 'internal-secret-value', authorization_servers: [base] }));
    const upstream = await staticUpstream(() => ({}), { challenge: () => metadataChallenge(local.base), certificate });
    try {
      const err = await refusal(
        discoverUpstreamAuthorization(new URL(`${upstream.base}/mcp`), { name: 'Tracker', timeoutMs: 5_000, egress: LOOPBACK_EGRESS }),
      );
      assert.equal(err.code, 'misconfigured');
      assert.match(err.message, /its resource_metadata URL is not an https URL/);
      assert.doesNotMatch(err.message, /internal-secret-value/);
      assert.deepEqual(local.hits, [], 'nothing reached the plain-http loopback server');
    } finally {
      await Promise.all([upstream.close(), local.close()]);
    }
  });

  test('refuses an authorization server, or its endpoints, on plain http loopback, and sends nothing there', async () => {
    const local = await serve((base, _req, res) => json(res, asMetadata(base)));
    // Case 1: the upstream's own (https) metadata names a plain-http authorization server.
    // Case 2: an https authorization server whose token endpoint is plain http on loopback.
    const as = await serve((base, req, res) => {
      if (req.url?.startsWith('/.well-known/')) return json(res, asMetadata(base, local.base));
      res.writeHead(404).end();
    }, certificate);
    let names = '';
    const upstream = await staticUpstream(
      (base) => ({ '/.well-known/oauth-protected-resource/mcp': { resource: `${base}/mcp`, authorization_servers: [names] } }),
      { certificate },
    );
    try {
      names = local.base;
      const server = await refusal(
        discoverUpstreamAuthorization(new URL(`${upstream.base}/mcp`), { name: 'Tracker', timeoutMs: 5_000, egress: LOOPBACK_EGRESS }),
      );
      assert.equal(server.code, 'misconfigured');
      assert.match(server.message, /its authorization server is not an https URL/);

      names = as.base;
      const endpoint = await refusal(
        discoverUpstreamAuthorization(new URL(`${upstream.base}/mcp`), { name: 'Tracker', timeoutMs: 5_000, egress: LOOPBACK_EGRESS }),
      );
      assert.equal(endpoint.code, 'misconfigured');
      assert.match(endpoint.message, /its authorization endpoint is not an https URL/);
      assert.deepEqual(local.hits, [], 'nothing reached the plain-http loopback server');
    } finally {
      await Promise.all([upstream.close(), as.close(), local.close()]);
    }
  });
});
