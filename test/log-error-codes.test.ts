// Error codes reach the operator's log: `code` is a redacted field name (an authorization code is
// one, src/log.ts), so lines that report a ProviderError's code name it `errorCode`. Real parts:
// the pino logger, a SQLite store, the ConnectionService, an `auth: mcp` provider against a
// loopback server that publishes no authorization metadata.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import { ConnectionService } from '../src/connections/index.js';
import { Sealer } from '../src/crypto/index.js';
import { createMcpAuthProvider } from '../src/providers/mcp-auth/index.js';
import { createLogger } from '../src/log.js';
import { ProviderError } from '../src/providers/provider.js';
import { openSqliteStore } from '../src/store/index.js';
import { scriptedProvider } from './support/scripted-provider.js';
import { LOOPBACK_EGRESS } from './support/egress.js';

function recordingLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger('debug', (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
  return { log, lines };
}

describe('log lines that report an error code', () => {
  test('revoke_failed names the provider error code as errorCode, not a redacted code', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'log-codes-'));
    const store = openSqliteStore(join(dir, 'broker.db'));
    const { log, lines } = recordingLogger();
    try {
      const connections = new ConnectionService(store, new Sealer([randomBytes(32)]), log);
      const owner = principalFromVerifiedClaims('https://idp.example', 'rosa');
      const provider = {
        ...scriptedProvider(() => Promise.reject(new Error('unused'))),
        revoke: () => Promise.reject(new ProviderError('unavailable', 'GitHub did not answer.', 'HTTP 503')),
      };
      await connections.save(
        owner,
        'github',
        { id: '7', login: 'rosa' },
        { accessToken: 'gho_x', tokenType: 'bearer', scopes: [] },
        {
          refuseShared: true,
        },
      );
      const outcome = await connections.disconnect(owner, provider);
      await connections.drain();
      assert.equal(outcome.deleted, true);
      const line = lines.find((l) => l.event === 'revoke_failed');
      assert.ok(line, 'a revoke_failed line');
      assert.equal(line.errorCode, 'unavailable');
      assert.equal(line.detail, 'HTTP 503');
      assert.ok(!JSON.stringify(lines).includes('gho_x'), 'no token in any line');
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('upstream_discovery_failed names the provider error code as errorCode, not a redacted code', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'log-codes-'));
    const store = openSqliteStore(join(dir, 'broker.db'));
    const { log, lines } = recordingLogger();
    // An upstream that answers 401 without resource_metadata and publishes no well-known metadata.
    const server = createServer((req, res) => {
      res.writeHead(req.url === '/mcp' ? 401 : 404, req.url === '/mcp' ? { 'www-authenticate': 'Bearer' } : {});
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const provider = createMcpAuthProvider({
        id: 'tracker',
        displayName: 'Tracker',
        upstreamUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
        publicUrl: new URL('http://127.0.0.1:9'),
        store,
        sealer: new Sealer([randomBytes(32)]),
        timeoutMs: 3_000,
        egress: LOOPBACK_EGRESS,
        log,
      });
      await assert.rejects(provider.prepare(), (err: unknown) => err instanceof ProviderError && err.code === 'misconfigured');
      const line = lines.find((l) => l.event === 'upstream_discovery_failed');
      assert.ok(line, 'an upstream_discovery_failed line');
      assert.equal(line.errorCode, 'misconfigured');
      assert.equal(line.upstream, 'tracker');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
