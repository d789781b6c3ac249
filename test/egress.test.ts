// The egress rule (issue 19 point 3): every address the configuration does not name itself — what
// an upstream's documents point to, webhook receivers — is https to a public address unless the
// operator allows it (EGRESS_ALLOW), checked on what the connection actually reaches; redirects are
// never followed. Real parts: loopback http and https servers (a self-signed certificate) that
// record every request, node's own DNS for `localhost`, the broker's configuration loader and its
// webhook delivery over a SQLite outbox.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { describe, test } from 'node:test';
import { writeFileSync } from 'node:fs';
import { ConfigError, loadConfig } from '../src/config/env.js';
import { parseEgressAllow } from '../src/config/egress.js';
import { classifyAddress } from '../src/net/addresses.js';
import { EgressRefused, egressFetch, ResponseTooLarge } from '../src/net/egress-fetch.js';
import { EgressRule } from '../src/net/egress-rule.js';
import { createLogger } from '../src/log.js';
import { openSqliteStore } from '../src/store/index.js';
import { transactionWithEvents } from '../src/events/index.js';
import { createWebhooks } from '../src/webhooks/index.js';
import { LOOPBACK_EGRESS } from './support/egress.js';
import { eventually } from './support/eventually.js';
import { json, serve } from './support/mcp-auth-bench.js';
import { productionEnv } from './support/production-env.js';
import { makeTempDir } from './support/temp-dir.js';
import { acceptSelfSignedCertificates, selfSignedCertificate } from './support/tls.js';
import { startWebhookReceiver } from './support/webhook-receiver.js';

const FETCH = { maxBytes: 64 * 1024, timeoutMs: 5_000 };

/** The error `p` fails with, which must be an EgressRefused. */
async function refusedBy(p: Promise<unknown>): Promise<EgressRefused> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof EgressRefused, `an EgressRefused, not ${String(err)}`);
    return err;
  }
  assert.fail('expected the egress rule to refuse, and the request went through');
}

describe('address classes', () => {
  test('names loopback, private, link-local, CGNAT, ULA, multicast and unspecified addresses, v4, v6 and v4 inside v6', () => {
    const cases: Array<[string, string | undefined]> = [
      ['127.0.0.1', 'loopback'],
      ['127.8.9.10', 'loopback'],
      ['::1', 'loopback'],
      ['[::1]', 'loopback'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['::ffff:7f00:1', 'loopback'],
      ['10.0.0.5', 'private'],
      ['172.16.0.1', 'private'],
      ['172.31.255.255', 'private'],
      ['192.168.1.1', 'private'],
      ['::ffff:10.0.0.5', 'private'],
      ['169.254.169.254', 'link-local'],
      ['fe80::1', 'link-local'],
      ['fe80::1%eth0', 'link-local'],
      ['100.64.0.1', 'cgnat'],
      ['100.127.255.255', 'cgnat'],
      ['fd00::1', 'ula'],
      ['fc00::1', 'ula'],
      ['224.0.0.1', 'multicast'],
      ['ff02::1', 'multicast'],
      ['0.0.0.0', 'unspecified'],
      ['::', 'unspecified'],
      ['8.8.8.8', 'public'],
      ['172.32.0.1', 'public'],
      ['100.128.0.1', 'public'],
      ['2606:4700::1111', 'public'],
      ['example.com', undefined],
    ];
    for (const [address, expected] of cases) assert.equal(classifyAddress(address), expected, address);
  });
});

describe('EGRESS_ALLOW', () => {
  test('reads host names, addresses and networks', () => {
    assert.deepEqual(parseEgressAllow(' Auth.Internal.example , 10.20.0.0/16,fd12::/48, 192.168.1.7 '), {
      hosts: ['auth.internal.example'],
      cidrs: [
        { network: '10.20.0.0', prefix: 16, family: 'ipv4' },
        { network: 'fd12::', prefix: 48, family: 'ipv6' },
        { network: '192.168.1.7', prefix: 32, family: 'ipv4' },
      ],
    });
    assert.deepEqual(parseEgressAllow(undefined), { hosts: [], cidrs: [] });
  });

  test('stops start-up naming every bad entry', () => {
    try {
      loadConfig(productionEnv({ EGRESS_ALLOW: 'ok.example,10.0.0.0/33,*.example,https://x.example' }));
      assert.fail('loaded');
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      assert.deepEqual(err.problems, [
        'EGRESS_ALLOW must be a comma-separated list of host names, addresses and networks such as 10.20.0.0/16 (not "10.0.0.0/33", "*.example", "https://x.example")',
      ]);
    }
  });

  test('a webhook URL whose address or scheme the rule refuses stops start-up, unless EGRESS_ALLOW lists it', () => {
    const dir = makeTempDir('egress-config-');
    try {
      const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
      const webhookAt = (url: string, extra: Record<string, string> = {}) => {
        const file = dir.file(`webhooks-${Math.random().toString(36).slice(2)}.yaml`);
        writeFileSync(file, ['webhooks:', '  - id: sink', `    url: ${url}`].join('\n'));
        return productionEnv({ PROVIDERS_FILE: file, WEBHOOK_SINK_SECRET: secret, ...extra });
      };
      const refusal = (env: NodeJS.ProcessEnv) => {
        try {
          loadConfig(env);
        } catch (err) {
          assert.ok(err instanceof ConfigError);
          return err.problems.join('\n');
        }
        return undefined;
      };
      for (const [url, kind] of [
        ['https://10.0.0.5/hooks', 'private'],
        ['https://169.254.169.254/latest', 'link-local'],
        ['https://[fd00::5]/hooks', 'ula'],
        ['https://100.64.0.9/hooks', 'cgnat'],
        ['https://127.0.0.1/hooks', 'loopback'],
      ] as const)
        assert.equal(
          refusal(webhookAt(url)),
          `PROVIDERS_FILE webhooks.sink.url: is an address the broker does not send to (${kind}); list it in EGRESS_ALLOW for an internal receiver`,
          url,
        );
      assert.match(refusal(webhookAt('http://127.0.0.1:9/hooks')) ?? '', /webhooks\.sink\.url: uses plain http/);
      assert.equal(refusal(webhookAt('https://10.0.0.5/hooks', { EGRESS_ALLOW: '10.0.0.0/8' })), undefined);
      assert.equal(refusal(webhookAt('http://127.0.0.1:9/hooks', { EGRESS_ALLOW: '127.0.0.1' })), undefined);
      assert.equal(refusal(webhookAt('https://hooks.example.com/broker')), undefined);
    } finally {
      dir.close();
    }
  });
});

describe("an upstream's name on pages", () => {
  test("is the operator's name: (or its old spelling displayName:), else the id; both at once stop start-up", () => {
    const dir = makeTempDir('egress-names-');
    try {
      const load = (entry: Record<string, unknown>) => {
        const file = dir.file(`providers-${Math.random().toString(36).slice(2)}.json`);
        writeFileSync(file, JSON.stringify({ upstreams: [{ id: 'tracker', url: 'https://tracker.example/mcp', auth: 'none', ...entry }] }));
        return loadConfig(productionEnv({ PROVIDERS_FILE: file })).upstreams[0]!.displayName;
      };
      assert.equal(load({ name: 'Issue tracker' }), 'Issue tracker');
      assert.equal(load({ displayName: 'Old spelling' }), 'Old spelling');
      assert.equal(load({}), 'tracker');
      assert.throws(
        () => load({ name: 'A', displayName: 'B' }),
        (err: unknown) =>
          err instanceof ConfigError && /upstreams\.tracker\.name: set name or its old spelling displayName, not both/.test(err.message),
      );
    } finally {
      dir.close();
    }
  });
});

describe('the rule', () => {
  const none = new EgressRule();
  test('https to a public address only, by default', () => {
    assert.equal(none.refuseUrl(new URL('https://example.com/x')), undefined, 'a name is checked when it resolves');
    assert.equal(none.refuseUrl(new URL('https://8.8.8.8/x')), undefined);
    assert.equal(none.refuseUrl(new URL('http://example.com/x')), 'plain-http');
    assert.equal(none.refuseUrl(new URL('https://10.1.2.3/x')), 'private-address');
    assert.equal(none.refuseUrl(new URL('https://[::ffff:169.254.169.254]/x')), 'link-local-address');
    const target = { protocol: 'https:', hostname: 'example.com', port: '' };
    assert.equal(none.refuseConnection(target, '93.184.216.34'), undefined);
    assert.equal(none.refuseConnection(target, '127.0.0.1'), 'loopback-address');
    assert.equal(none.refuseConnection(target, '::ffff:10.0.0.1'), 'private-address');
  });

  test('what the operator allows, by host or network; loopback in development mode; a configured origin', () => {
    const allowed = new EgressRule(parseEgressAllow('auth.internal.example,10.20.0.0/16'));
    assert.equal(allowed.refuseConnection({ protocol: 'https:', hostname: 'auth.internal.example', port: '' }, '10.9.9.9'), undefined);
    assert.equal(allowed.refuseConnection({ protocol: 'https:', hostname: 'other.example', port: '' }, '10.20.1.1'), undefined);
    assert.equal(allowed.refuseConnection({ protocol: 'https:', hostname: 'other.example', port: '' }, '10.21.1.1'), 'private-address');
    assert.equal(allowed.refuseUrl(new URL('http://auth.internal.example/x')), undefined);
    assert.equal(allowed.refuseUrl(new URL('http://10.20.0.7/x')), undefined);
    assert.equal(allowed.refuseUrl(new URL('http://8.8.8.8/x')), 'plain-http', 'plain http never goes to the internet');

    const dev = new EgressRule(undefined, { loopback: true });
    assert.equal(dev.refuseUrl(new URL('http://localhost:3001/x')), undefined);
    assert.equal(dev.refuseUrl(new URL('http://127.0.0.1:3001/x')), undefined);
    assert.equal(dev.refuseUrl(new URL('https://10.0.0.1/x')), 'private-address');

    const upstream = none.withOrigin('http://127.0.0.1:4000');
    assert.equal(upstream.refuseUrl(new URL('http://127.0.0.1:4000/.well-known/x')), undefined);
    assert.equal(upstream.refuseUrl(new URL('http://127.0.0.1:4001/x')), 'plain-http', 'another port is another origin');
  });
});

describe('egressFetch', () => {
  const certificate = selfSignedCertificate();
  acceptSelfSignedCertificates();

  test('refuses a loopback https server, by address and by a name resolving to it, and connects to nothing', async () => {
    const local = await serve((_base, _req, res) => json(res, { secret: 'internal' }), certificate);
    const port = new URL(local.base).port;
    try {
      const send = egressFetch(new EgressRule(), FETCH);
      assert.equal((await refusedBy(send(`${local.base}/a`))).reason, 'loopback-address');
      // `localhost` resolves to 127.0.0.1 (or ::1): the name passes the URL check, its address does not.
      assert.equal((await refusedBy(send(`https://localhost:${port}/b`))).reason, 'loopback-address');
      assert.equal((await refusedBy(send(`https://[::ffff:127.0.0.1]:${port}/c`))).reason, 'loopback-address');
      assert.deepEqual(local.hits, [], 'nothing reached the loopback server');

      // The same server, once the operator allows loopback: reached, answer read.
      const allowed = egressFetch(LOOPBACK_EGRESS, FETCH);
      const res = await allowed(`${local.base}/d`, { method: 'POST', body: new URLSearchParams({ a: 'b' }) });
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { secret: 'internal' });
      assert.deepEqual(local.hits, ['POST /d']);
    } finally {
      await local.close();
    }
  });

  test('checks the address of every name it connects to (a name resolving to loopback is refused before connecting)', async () => {
    const connections: string[] = [];
    const tcp = connectionCounter(connections);
    const port = await tcp.port;
    try {
      const send = egressFetch(new EgressRule(parseEgressAllow('10.0.0.0/8')), FETCH);
      await refusedBy(send(`https://localhost:${port}/x`));
      assert.deepEqual(connections, [], 'no connection was opened');
    } finally {
      await tcp.close();
    }
  });

  test('never follows a redirect, even to an allowed host, and bounds the answer', async () => {
    const target = await serve((_base, _req, res) => json(res, { reached: true }));
    const redirecting = await serve((_base, req, res) => {
      if (req.url === '/big') return json(res, { padding: 'x'.repeat(200_000) });
      res.writeHead(302, { location: `${target.base}/landing` }).end();
    });
    try {
      const send = egressFetch(LOOPBACK_EGRESS, FETCH);
      const res = await send(`${redirecting.base}/start`);
      assert.equal(res.status, 302, 'the redirect comes back as it is');
      assert.deepEqual(target.hits, [], 'the redirect target was never fetched');
      await assert.rejects(send(`${redirecting.base}/big`), ResponseTooLarge);
    } finally {
      await Promise.all([target.close(), redirecting.close()]);
    }
  });
});

describe('webhook deliveries', () => {
  test('a receiver on loopback gets nothing unless the operator allows it: the attempt fails as refused', async () => {
    const receiver = await startWebhookReceiver();
    const dir = makeTempDir('egress-webhooks-');
    const store = openSqliteStore(dir.file('broker.db'));
    const logs: string[] = [];
    const endpoint = {
      id: 'local',
      url: new URL(receiver.url),
      events: ['connection.created' as const],
      secret: Buffer.from(receiver.secret.slice('whsec_'.length), 'base64'),
    };
    // No `egress`: the delivery's own default, https to public addresses only.
    const { events, delivery } = createWebhooks(
      store,
      [endpoint],
      createLogger('debug', (l) => logs.push(l)),
      { pollMs: 20, firstRetryMs: 3_600_000 },
    );
    delivery.start();
    try {
      await transactionWithEvents(store, events, (_tx, emit) =>
        emit('connection.created', { issuer: 'https://idp.example.com', subject: 'ann', provider: 'github', login: 'ann', scopes: [] }),
      );
      await eventually('a failed attempt', () => logs.some((l) => l.includes('"event":"webhook_attempt_failed"')));
      assert.ok(
        logs.some((l) => l.includes('"error":"egress_refused_plain-http"')),
        logs.join('\n'),
      );
      assert.deepEqual(receiver.requests, [], 'the receiver was never reached');
    } finally {
      await delivery.close();
      await store.close();
      await receiver.close();
      dir.close();
    }
  });
});

/** A bare TCP listener on loopback counting connections (a refused request must not even connect). */
function connectionCounter(connections: string[]): { port: Promise<number>; close(): Promise<void> } {
  const server: Server = createServer((socket) => {
    connections.push(String(socket.remotePort));
    socket.destroy();
  });
  const port = new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
