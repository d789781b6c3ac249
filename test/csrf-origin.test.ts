import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Browser, parseForms } from './support/browser.js';
import { signIn, startStack, type Stack } from './support/stack.js';

describe('form posts and the Origin header', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(() => stack.close());

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
    const res = await browser.request(`${stack.publicUrl}/auth/logout`, { method: 'POST', body: new URLSearchParams({ csrf }), headers: { origin: 'null', 'sec-fetch-site': 'same-origin' } });
    assert.equal(res.status, 303, 'accepted: on to the IdP to end its session too');
    assert.match(res.headers.get('location') ?? '', /\/session\/end\?/);
  });

  for (const site of ['cross-site', 'same-site', undefined]) {
    it(`refuses \`Origin: null\` with Sec-Fetch-Site ${site ?? 'absent'} with 403, even with a valid CSRF token`, async () => {
      const { browser, csrf } = await logoutForm();
      const res = await browser.request(`${stack.publicUrl}/auth/logout`, { method: 'POST', body: new URLSearchParams({ csrf }), headers: { origin: 'null', ...(site ? { 'sec-fetch-site': site } : {}) } });
      assert.equal(res.status, 403);
      const after = await browser.open(`${stack.publicUrl}/connections`);
      assert.match(after.html, /Signed in as/, 'the session survived the refused post');
    });
  }

  it('refuses a foreign Origin on a form post with 403', async () => {
    const { browser, csrf } = await logoutForm();
    const res = await browser.request(`${stack.publicUrl}/auth/logout`, { method: 'POST', body: new URLSearchParams({ csrf }), headers: { origin: 'https://evil.example' } });
    assert.equal(res.status, 403);
  });
});
