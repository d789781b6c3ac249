// /readyz and the identity provider: an IdP that cannot be reached at start-up is said loudly (an
// error-level line naming OIDC_ISSUER and what failed), /readyz answers 503 naming it, and once the
// IdP comes up the background retries turn /readyz 200 without a restart. A probe is answered from
// that cached check: it never makes a request to the IdP.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../src/config/env.js';
import { createLogger } from '../src/log.js';
import { startBroker, type RunningBroker } from '../src/server.js';
import { startGitHubStandIn } from './support/github-standin.js';
import { freePort, startIdp, type StartedIdp } from './support/idp.js';
import { envelope, rawCall } from './support/mcp.js';
import { bindLoopback, portOf } from './support/listen.js';
import { brokerIdpClient, testBrokerEnv } from './support/stack.js';
import { closeInOrder, useSuite } from './support/suite.js';
import { makeTempDir } from './support/temp-dir.js';

async function readyz(
  url: string,
): Promise<{ status: number; body: { status: string; reason?: string; checks?: Record<string, string> } }> {
  const res = await fetch(`${url}/readyz`);
  return { status: res.status, body: (await res.json()) as { status: string; checks?: Record<string, string> } };
}

interface BrokerWithIdp {
  broker: RunningBroker;
  publicUrl: string;
  /** Every line it logged, from start-up on. */
  logs: string[];
  close(): Promise<void>;
}

/**
 * For the enclosing `describe`: a broker on a free loopback port whose IdP is `issuer()` (asked for
 * once the suite starts), with its own directory and GitHub stand-in, every log line kept.
 */
function useBrokerWithIdp(issuer: () => Promise<string>): BrokerWithIdp {
  return useSuite('the broker', async () => {
    const dir = makeTempDir('broker-readiness-');
    const github = await startGitHubStandIn();
    const listening = await bindLoopback();
    const port = portOf(listening);
    const publicUrl = `http://127.0.0.1:${port}`;
    const env = { PORT: String(port), ...testBrokerEnv({ publicUrl, dir: dir.path, github, idp: { issuer: await issuer() } }) };
    const logs: string[] = [];
    const broker = await startBroker(
      loadConfig(env),
      createLogger('debug', (line) => logs.push(line)),
      { listening },
    );
    return { broker, publicUrl, logs, close: () => closeInOrder(broker, github, dir) };
  });
}

/** The start-up line saying the IdP cannot be reached: at error level, naming OIDC_ISSUER. */
function unreachableAtStartUp(logs: string[]): Record<string, unknown> {
  const line = logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.event === 'identity_provider_unreachable');
  assert.ok(line, `a start-up line about the IdP: ${logs.join('\n')}`);
  assert.equal(line.level, 'error');
  assert.equal(line.variable, 'OIDC_ISSUER');
  return line;
}

describe('readiness and the identity provider', () => {
  let idp: StartedIdp | undefined;
  // A well-formed issuer on a loopback port nobody listens on (yet).
  let idpPort: number;
  const started = useBrokerWithIdp(async () => {
    idpPort = await freePort();
    return `http://127.0.0.1:${idpPort}`;
  });
  after(async () => {
    await idp?.close();
  });

  it('says at start-up, at error level and naming OIDC_ISSUER, that the IdP cannot be reached, and /readyz answers 503 naming it', async () => {
    const line = unreachableAtStartUp(started.logs);
    assert.equal(line.issuer, `http://127.0.0.1:${idpPort}`);
    assert.match(String(line.failed), /^discovery/);
    assert.match(String(line.message), /ECONNREFUSED/);
    assert.equal(typeof line.retryInSeconds, 'number');

    const { status, body } = await readyz(started.publicUrl);
    assert.equal(status, 503);
    assert.deepEqual(body, {
      status: 'not_ready',
      reason: 'identity_provider_unreachable',
      store: 'sqlite',
      checks: { database: 'ok', identity_provider: 'unreachable' },
    });
  });

  it('turns ready without a restart once the IdP comes up, and a probe never calls the IdP', async () => {
    idp = await startIdp({
      port: idpPort,
      clients: [brokerIdpClient(started.publicUrl)],
      resource: `${started.publicUrl}/mcp`,
    });
    let last = await readyz(started.publicUrl);
    for (const deadline = Date.now() + 20_000; last.status !== 200 && Date.now() < deadline; last = await readyz(started.publicUrl))
      await sleep(100);
    assert.equal(last.status, 200, JSON.stringify(last.body));
    assert.deepEqual(last.body, { status: 'ready', store: 'sqlite', checks: { database: 'ok', identity_provider: 'ok' } });
    assert.ok(
      started.logs.some((l) => /"event":"identity_provider_reachable"/.test(l)),
      'says it recovered',
    );
    assert.ok(idp.requests >= 2, `the background check fetched discovery and the JWKS (${idp.requests} requests)`);

    const before = idp.requests;
    for (let i = 0; i < 25; i++) assert.equal((await readyz(started.publicUrl)).status, 200);
    assert.equal(idp.requests, before, '25 probes, no request at the IdP');

    // And the broker works: an access token from the IdP is accepted.
    const token = await idp.mintAccessToken({ sub: 'ready-user' });
    const reply = await rawCall(`${started.publicUrl}/mcp`, token, { method: 'tools/list', params: { _meta: envelope() } });
    assert.equal(reply.status, 200, reply.text);
    assert.ok(Array.isArray(reply.json?.result?.tools), reply.text);
  });
});

describe('readiness when the IdP answers discovery but not its JWKS', () => {
  const idp = useSuite('the IdP without a JWKS', async () => {
    const server = createServer((req, res) => {
      const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      if (req.url === '/.well-known/openid-configuration') {
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            issuer,
            authorization_endpoint: `${issuer}/auth`,
            token_endpoint: `${issuer}/token`,
            jwks_uri: `${issuer}/jwks`,
          }),
        );
        return;
      }
      res.statusCode = 503;
      res.end('down for maintenance');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      issuer: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      async close() {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      },
    };
  });
  const started = useBrokerWithIdp(async () => idp.issuer);

  it('names the JWKS as what failed, and /readyz answers 503', async () => {
    const line = unreachableAtStartUp(started.logs);
    assert.match(String(line.failed), /^jwks/);
    assert.match(String(line.message), /200 OK/);
    const { status, body } = await readyz(started.publicUrl);
    assert.equal(status, 503);
    assert.deepEqual(body.checks, { database: 'ok', identity_provider: 'unreachable' });
  });
});
