// Issue 19 point 3, through the whole broker: an `auth: mcp` upstream's 401 and documents cannot
// aim the broker at another host on its network, and the connect page never shows their text.
// Real parts: the broker in-process (its pages, its discovery), a hostile upstream MCP server on
// loopback (test/support/hostile-upstream.ts) and an "internal" loopback service on another port
// that records every request and holds text that must never reach a page.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Browser, textOf, type Page } from './support/browser.js';
import { providersFile } from './support/gateway.js';
import { startHostileUpstream, type HostileUpstream } from './support/hostile-upstream.js';
import { asMetadata, json, serve, type Served } from './support/mcp-auth-bench.js';
import { signIn, startStack, type Stack } from './support/stack.js';

const SECRET_TEXT = 'internal-only-resource-text';

interface World {
  upstream: HostileUpstream;
  /** Another loopback port: what an internal service would be. */
  inner: Served;
  stack: Stack;
  close(): Promise<void>;
}

/**
 * The hostile upstream as `tracker` (`auth: mcp`, named "Tracker" by the operator), the inner
 * service beside it, and a broker whose EGRESS_ALLOW is `egressAllow` (nothing: the production default).
 */
async function world(egressAllow = ''): Promise<World> {
  const upstream = await startHostileUpstream();
  const inner = await serve((base, req, res) => {
    if (req.url?.startsWith('/.well-known/oauth-authorization-server')) return json(res, asMetadata(base));
    json(res, { resource: SECRET_TEXT, authorization_servers: [base] });
  });
  const file = providersFile({ upstreams: [{ id: 'tracker', url: upstream.url, auth: 'mcp', name: 'Tracker' }] });
  let stack: Stack;
  try {
    stack = await startStack({ env: { PROVIDERS_FILE: file.path, EGRESS_ALLOW: egressAllow } });
  } catch (err) {
    file.remove();
    await Promise.all([upstream.close(), inner.close()]);
    throw err;
  }
  return {
    upstream,
    inner,
    stack,
    async close() {
      await stack.close();
      await Promise.all([upstream.close(), inner.close()]);
      file.remove();
    },
  };
}

/** The upstream's 401 points its resource_metadata at `url`. */
function challengeTo(upstream: HostileUpstream, url: string): void {
  upstream.on('ping', () => ({ status: 401, headers: { 'www-authenticate': `Bearer resource_metadata="${url}"` }, json: {} }));
}

/** What a person sees after starting the upstream's connection from /connections. */
async function connectPage(stack: Stack, user: string): Promise<Page> {
  const browser = new Browser();
  await signIn(browser, stack, user);
  const list = await browser.open(`${stack.publicUrl}/connections`);
  return browser.submit(list, { match: /^\/connections\/tracker\/connect$/ });
}

describe('auth: mcp discovery under the egress rule', () => {
  test("a 401 whose resource_metadata points at another loopback port is refused without fetching it; the page names the upstream, not the document's text", async () => {
    const w = await world();
    try {
      challengeTo(w.upstream, `${w.inner.base}/prm`);
      const page = await connectPage(w.stack, 'erin');
      assert.equal(page.status, 503);
      assert.match(textOf(page.html), /Tracker is not set up correctly: it sends this service to an address it does not connect to/);
      assert.deepEqual(w.inner.hits, [], 'nothing reached the inner service');
      assert.ok(!page.html.includes(w.inner.base) && !page.html.includes(SECRET_TEXT), 'no address or text of the document on the page');
      assert.ok(
        w.stack.logs.some((l) => l.includes('"event":"upstream_discovery_failed"') && l.includes('refused by the egress rule')),
        'the log says why',
      );
    } finally {
      await w.close();
    }
  });

  test('the same upstream with the inner service allowed (EGRESS_ALLOW): the broker does fetch it, so the refusal above is the rule', async () => {
    const w = await world('127.0.0.0/8');
    try {
      challengeTo(w.upstream, `${w.inner.base}/prm`);
      const page = await connectPage(w.stack, 'erin');
      assert.deepEqual(w.inner.hits, ['GET /prm']);
      // Its metadata is for another resource: still refused, and its text still never shown.
      assert.match(
        textOf(page.html),
        /Tracker is not set up correctly: its protected resource metadata is not for http:\/\/127\.0\.0\.1:\d+\/mcp\./,
      );
      assert.ok(!page.html.includes(SECRET_TEXT), "the document's resource is never shown");
    } finally {
      await w.close();
    }
  });

  test('protected resource metadata for another resource refuses the upstream (RFC 9728 §3.3), sending nothing to its authorization server', async () => {
    // Loopback allowed: the only thing standing between the broker and the named server is the check.
    const w = await world('127.0.0.0/8');
    try {
      w.upstream.onPath('/.well-known/oauth-protected-resource/mcp', () => ({
        json: { resource: `https://${SECRET_TEXT}.example/mcp`, authorization_servers: [w.inner.base] },
      }));
      const page = await connectPage(w.stack, 'erin');
      assert.equal(page.status, 503);
      assert.match(textOf(page.html), /Tracker is not set up correctly: its protected resource metadata is not for /);
      assert.ok(!page.html.includes(SECRET_TEXT), "the document's resource is never shown");
      assert.deepEqual(w.inner.hits, [], 'the authorization server it names was never contacted');
    } finally {
      await w.close();
    }
  });

  test("an authorization server on another loopback port, named by the upstream's own metadata, is refused without fetching it", async () => {
    const w = await world();
    try {
      w.upstream.onPath('/.well-known/oauth-protected-resource/mcp', () => ({
        json: { resource: w.upstream.url, authorization_servers: [w.inner.base] },
      }));
      const page = await connectPage(w.stack, 'erin');
      assert.equal(page.status, 503);
      assert.match(textOf(page.html), /Tracker is not set up correctly: it sends this service to an address it does not connect to/);
      assert.deepEqual(w.inner.hits, [], 'nothing reached the inner service');
    } finally {
      await w.close();
    }
  });
});
