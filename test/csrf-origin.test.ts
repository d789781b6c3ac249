import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Browser, parseForms } from './support/browser.js';
import { envelope, rawCall } from './support/mcp.js';
import { signIn } from './support/stack.js';
import { useStack } from './support/suite.js';

describe('form posts and the Origin header', () => {
  const stack = useStack({ env: { ALLOWED_ORIGINS: 'https://assistant.example,http://localhost:6274' } });

  async function logoutForm(): Promise<{ browser: Browser; csrf: string }> {
    const browser = new Browser();
    const page = await signIn(browser, stack, 'olivia');
    const form = parseForms(page.html).find((f) => f.action === '/auth/logout');
    assert.ok(form, 'the signed-in header carries a sign-out form');
    return { browser, csrf: form.fields.csrf! };
  }

  it('sends Referrer-Policy same-origin, so browsers send a real Origin on our own forms and none of our URLs to others', async () => {
    const res = await fetch(`${stack.publicUrl}/connections`, { redirect: 'manual' });
    assert.equal(res.headers.get('referrer-policy'), 'same-origin');
  });

  it('accepts `Origin: null` with `Sec-Fetch-Site: same-origin` and a valid CSRF token', async () => {
    const { browser, csrf } = await logoutForm();
    const res = await browser.request(`${stack.publicUrl}/auth/logout`, {
      method: 'POST',
      body: new URLSearchParams({ csrf }),
      headers: { origin: 'null', 'sec-fetch-site': 'same-origin' },
    });
    assert.equal(res.status, 303, 'accepted: on to the IdP to end its session too');
    assert.match(res.headers.get('location') ?? '', /\/session\/end\?/);
  });

  for (const site of ['cross-site', 'same-site', undefined]) {
    it(`refuses \`Origin: null\` with Sec-Fetch-Site ${site ?? 'absent'} with 403, even with a valid CSRF token`, async () => {
      const { browser, csrf } = await logoutForm();
      const res = await browser.request(`${stack.publicUrl}/auth/logout`, {
        method: 'POST',
        body: new URLSearchParams({ csrf }),
        headers: { origin: 'null', ...(site ? { 'sec-fetch-site': site } : {}) },
      });
      assert.equal(res.status, 403);
      const after = await browser.open(`${stack.publicUrl}/connections`);
      assert.match(after.html, /Signed in as/, 'the session survived the refused post');
    });
  }

  /** Origins that share something with ours (host name, scheme or port) but are other sites. */
  function lookalikes(): string[] {
    const ours = new URL(stack.publicUrl);
    const port = Number(ours.port);
    return [
      `http://127.0.0.1:${port + 1}`, // another port
      'http://localhost:8080',
      'http://127.0.0.1', // no port: 80
      `https://127.0.0.1:${port}`, // another scheme
      `https://localhost:${port}`,
      `http://evil.example:${port}`, // another host
      `http://127.0.0.2:${port}`,
      'https://assistant.example:8443', // a listed origin on another port
      'http://assistant.example', // ... or scheme
      'http://localhost:6275',
      `${stack.publicUrl}/`, // not an origin
      `${stack.publicUrl}.evil.example`,
    ];
  }

  /** Our own origin, its loopback aliases on the same scheme and port, and what ALLOWED_ORIGINS lists. */
  function accepted(): string[] {
    const { port } = new URL(stack.publicUrl);
    return [
      stack.publicUrl,
      `http://localhost:${port}`,
      `http://[::1]:${port}`,
      'https://assistant.example',
      'http://localhost:6274',
      stack.publicUrl.toUpperCase(),
    ];
  }

  it('refuses POST /mcp from an origin on another port, scheme or host with 403 and a JSON-RPC error', async () => {
    const token = await stack.token('origin-mcp');
    for (const origin of lookalikes()) {
      const res = await rawCall(stack.mcpUrl, token, { method: 'tools/list', params: { _meta: envelope() } }, { origin });
      assert.equal(res.status, 403, `${origin}: ${res.text.slice(0, 200)}`);
      assert.equal(res.json?.error?.code, -32000, origin);
    }
  });

  it('accepts POST /mcp from our exact origin, its loopback aliases, a listed ALLOWED_ORIGINS origin, and without Origin', async () => {
    const token = await stack.token('origin-mcp');
    for (const origin of [...accepted(), undefined]) {
      const res = await rawCall(stack.mcpUrl, token, { method: 'tools/list', params: { _meta: envelope() } }, origin ? { origin } : {});
      assert.equal(res.status, 200, `${origin}: ${res.text.slice(0, 200)}`);
    }
  });

  it('refuses a form post from an origin on another port, scheme or host with 403, even with a valid CSRF token', async () => {
    const { browser, csrf } = await logoutForm();
    for (const origin of lookalikes()) {
      const res = await browser.request(`${stack.publicUrl}/auth/logout`, {
        method: 'POST',
        body: new URLSearchParams({ csrf }),
        headers: { origin },
      });
      assert.equal(res.status, 403, origin);
      await res.body?.cancel();
    }
    const after = await browser.open(`${stack.publicUrl}/connections`);
    assert.match(after.html, /Signed in as/, 'the session survived every refused post');
  });

  it('accepts a form post from our exact origin, its loopback aliases and a listed ALLOWED_ORIGINS origin', async () => {
    for (const origin of accepted()) {
      const { browser, csrf } = await logoutForm();
      const res = await browser.request(`${stack.publicUrl}/auth/logout`, {
        method: 'POST',
        body: new URLSearchParams({ csrf }),
        headers: { origin },
      });
      // Accepted: the session ends here and the browser goes on to the IdP's end-session endpoint.
      assert.equal(res.status, 303, origin);
      assert.ok(res.headers.get('location')?.startsWith(`${stack.idp.issuer}/session/end?`), origin);
    }
  });

  it('refuses a foreign Origin on a form post with 403', async () => {
    const { browser, csrf } = await logoutForm();
    const res = await browser.request(`${stack.publicUrl}/auth/logout`, {
      method: 'POST',
      body: new URLSearchParams({ csrf }),
      headers: { origin: 'https://evil.example' },
    });
    assert.equal(res.status, 403);
  });
});
