import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { useStack } from './support/suite.js';

describe('operator branding', () => {
  const stack = useStack({ env: { PRODUCT_NAME: 'Acme Assistant Accounts', LOGO_URL: 'https://cdn.acme.example/logo.png' } });

  it('shows the product name and logo on pages and allows exactly the logo origin for images', async () => {
    const res = await fetch(`${stack.publicUrl}/connect/github?req=${'A'.repeat(43)}`, { headers: { accept: 'text/html' } });
    const html = await res.text();
    assert.equal(res.status, 404);
    assert.match(html, /<title>Link not found · Acme Assistant Accounts<\/title>/);
    assert.match(html, /<img class="logo" src="https:\/\/cdn.acme.example\/logo.png" alt=""/);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /img-src 'self' https:\/\/cdn.acme.example(;|$)/);
    assert.match(csp, /script-src 'none'/);
  });

  it('serves a start page at / under the product name, with sign-in and the accounts page, instead of redirecting', async () => {
    const res = await fetch(`${stack.publicUrl}/`, { redirect: 'manual' });
    const html = await res.text();
    assert.equal(res.status, 200);
    assert.match(html, /<title>Welcome · Acme Assistant Accounts<\/title>/);
    assert.match(html, /your accounts at <strong>GitHub<\/strong>/);
    assert.match(html, /<a class="button primary" href="\/auth\/login\?returnTo=%2Fconnections">Sign in<\/a>/);
    assert.match(html, /href="\/connections">Your connected accounts</);
    assert.match(html, new RegExp(`<code>${stack.mcpUrl.replace(/[.:/]/g, '\\$&')}</code>`), 'the MCP URL to add to an assistant');
  });

  it('refuses a plain-http logo on a non-loopback host at start-up', async () => {
    const { loadConfig, ConfigError } = await import('../src/config/env.js');
    assert.throws(
      () => loadConfig({ ...stack.env, LOGO_URL: 'http://cdn.acme.example/logo.png' }),
      (err: unknown) => err instanceof ConfigError && /^LOGO_URL must use https/.test(err.message),
    );
  });
});
