// A registration the upstream's authorization server lost (issue 19, point 8): an in-memory server
// that restarted no longer knows the broker's client and strands every user on its own
// invalid_client page, never sending the browser back. The broker takes flows that never come back
// as the sign and registers anew; an operator can also reset it with `npm run admin`.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runAdmin } from '../src/cli/admin.js';
import { RegistrationWatch } from '../src/providers/mcp-auth/registration-watch.js';
import { Browser } from './support/browser.js';
import { providersFile } from './support/gateway.js';
import { authorizeAt, onBench } from './support/mcp-auth-bench.js';
import { connectUpstream } from './support/mcp-auth-connect.js';
import { startProtectedUpstream } from './support/mcp-auth-upstream.js';
import { startStack } from './support/stack.js';

const CALLBACK = 'http://127.0.0.1:9/connect/tracker/callback';

/** An in-memory stream for runAdmin in this process. */
function sink(): NodeJS.WritableStream & { text: () => string } {
  let text = '';
  return {
    write(chunk: string | Uint8Array) {
      text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
      return true;
    },
    text: () => text,
  } as unknown as NodeJS.WritableStream & { text: () => string };
}

describe('RegistrationWatch', () => {
  test('takes a registration as lost once enough flows went long enough without a browser coming back', () => {
    let now = 0;
    const watch = new RegistrationWatch({ flows: 2, afterMs: 60_000 }, () => now);
    assert.equal(watch.started('c1'), false);
    now = 1_000;
    assert.equal(watch.started('c1'), false);
    now = 60_500;
    assert.equal(watch.started('c1'), false, 'only one flow is old enough yet');
    now = 61_000;
    assert.equal(watch.started('c1'), true, 'two flows a minute old, none back');
    assert.equal(watch.started('c2'), false, 'a new registration starts afresh');
  });

  test('one browser coming back shows the server knows the registration', () => {
    let now = 0;
    const watch = new RegistrationWatch({ flows: 2, afterMs: 1_000 }, () => now);
    watch.started('c1');
    watch.started('c1');
    watch.returned();
    now = 10_000;
    assert.equal(watch.started('c1'), false);
    assert.equal(watch.started('c1'), false);
  });

  test('many users starting at once at a slow server are not a lost registration', () => {
    let now = 0;
    const watch = new RegistrationWatch({ flows: 2, afterMs: 60_000 }, () => now);
    for (let i = 0; i < 100; i++) assert.equal(watch.started('c1'), false);
    now = 59_999;
    assert.equal(watch.started('c1'), false);
  });
});

describe('a registration the authorization server lost', () => {
  test('flows that never come back make the next connect register anew, and that one completes', () =>
    onBench(async (b, upstream) => {
      const store = b.store();
      await b.provider(upstream.url, { store }).prepare();
      const first = (await store.upstreamClients.find(upstream.issuer, CALLBACK))!;
      // The server restarted and forgot it: it is stored here under an id the server does not know.
      await store.upstreamClients.delete(upstream.issuer, CALLBACK, first.client_id);
      await store.upstreamClients.putIfAbsent({ ...first, client_id: 'forgotten-by-the-server' });

      let now = Date.now();
      const provider = b.provider(upstream.url, { store, now: () => now });
      const registrations = () => upstream.asRequests.filter((r) => r.path === '/reg').length;
      const before = registrations();
      for (let i = 0; i < 2; i++) {
        const stranded = await authorizeAt(provider, 'judy').then(
          () => assert.fail('the server sent the browser back'),
          (err: Error) => err.message,
        );
        assert.match(stranded, /invalid_client|client is invalid|400/i, 'the server’s own error page, no way back');
      }
      assert.equal(registrations(), before, 'nothing re-registered while the flows may still come back');
      now += 61_000;
      const again = await authorizeAt(provider, 'judy');
      assert.equal(registrations(), before + 1, 'registered anew');
      const second = (await store.upstreamClients.find(upstream.issuer, CALLBACK))!;
      assert.notEqual(second.client_id, 'forgotten-by-the-server');
      assert.equal(again.authorizationUrl.searchParams.get('client_id'), second.client_id);
      const done = await provider.completeAuthorization({ ...again, expectedState: again.state, requestedScopes: [] });
      assert.equal(done.account.id, 'judy');
    }));

  test('a registration whose flows come back is kept, however long users take', () =>
    onBench(async (b, upstream) => {
      const store = b.store();
      let now = Date.now();
      const provider = b.provider(upstream.url, { store, now: () => now });
      const registrations = () => upstream.asRequests.filter((r) => r.path === '/reg').length;
      await authorizeAt(provider, 'kim');
      provider.authorizationReturned();
      const after = registrations();
      for (let i = 0; i < 3; i++) {
        now += 120_000;
        await authorizeAt(provider, 'kim');
      }
      assert.equal(registrations(), after);
    }));

  test('npm run admin -- upstreams reset-registration forgets it, and the running broker registers anew on the next connect', async () => {
    // The upstream first, on a port of its own (it needs nothing of the broker's beforehand).
    const upstream = await startProtectedUpstream();
    const file = providersFile({ upstreams: [{ id: 'tracker', url: upstream.url, auth: 'mcp', displayName: 'Tracker' }] });
    const stack = await startStack({ env: { PROVIDERS_FILE: file.path, EGRESS_ALLOW: '127.0.0.1,::1' } }).catch(async (err: unknown) => {
      await upstream.close();
      file.remove();
      throw err;
    });
    try {
      const done = await connectUpstream(new Browser(), stack, upstream.issuer, 'alice', 'alice-at-tracker');
      assert.match(done.html, /Connected as @alice-at-tracker/);
      const callback = `${stack.publicUrl}/connect/tracker/callback`;
      const first = (await stack.broker.broker.store.upstreamClients.find(upstream.issuer, callback))!;

      const out = sink();
      const err = sink();
      assert.equal(
        await runAdmin(['upstreams', 'reset-registration', 'tracker', '--json'], { stdout: out, stderr: err, env: stack.env }),
        0,
        err.text(),
      );
      assert.deepEqual(JSON.parse(out.text()), { upstream: 'tracker', forgotten: 1 });
      assert.equal(await stack.broker.broker.store.upstreamClients.find(upstream.issuer, callback), undefined);

      const bob = await connectUpstream(new Browser(), stack, upstream.issuer, 'bob', 'bob-at-tracker');
      assert.match(bob.html, /Connected as @bob-at-tracker/);
      const second = (await stack.broker.broker.store.upstreamClients.find(upstream.issuer, callback))!;
      assert.notEqual(second.client_id, first.client_id, 'the running broker registered anew');
      assert.equal(upstream.asRequests.filter((r) => r.path === '/reg').length, 2);

      const unknown = sink();
      assert.equal(await runAdmin(['upstreams', 'reset-registration', 'github'], { stdout: sink(), stderr: unknown, env: stack.env }), 1);
      assert.match(unknown.text(), /"github" is not an auth: mcp upstream in this configuration: nothing was changed/);
    } finally {
      await stack.close();
      await upstream.close();
      file.remove();
    }
  });
});
