// Sign-out ends the identity provider's session too (RP-initiated logout), so the next visit asks
// to sign in again; an IdP without end_session_endpoint gets a page that says its session remains.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { decodeJwt } from 'jose';
import { Browser, parseForms, textOf, type Page } from './support/browser.js';
import { BROKER_CLIENT, signIn, type Stack } from './support/stack.js';
import { useStack } from './support/suite.js';
import { JWT_IN_CLEAR } from './support/token-checks.js';

async function signedIn(stack: Stack, user: string): Promise<{ browser: Browser; page: Page; csrf: string }> {
  const browser = new Browser();
  const page = await signIn(browser, stack, user);
  assert.match(textOf(page.html), new RegExp(`Signed in as ${user}`));
  const form = parseForms(page.html).find((f) => f.action === '/auth/logout');
  assert.ok(form, 'the signed-in header carries a sign-out form');
  return { browser, page, csrf: form.fields.csrf! };
}

/** The href of the link labelled `label` on a page. */
function linkHref(html: string, label: string): string {
  const m = new RegExp(`<a [^>]*href="([^"]+)"[^>]*>${label}</a>`).exec(html);
  assert.ok(m, `a "${label}" link`);
  return m[1]!.replace(/&amp;/g, '&');
}

const postLogout = (stack: Stack, browser: Browser, fields: Record<string, string>) =>
  browser.request(`${stack.publicUrl}/auth/logout`, {
    method: 'POST',
    body: new URLSearchParams(fields),
    headers: { origin: stack.publicUrl },
  });

describe('sign-out at an IdP with RP-initiated logout', () => {
  const stack = useStack();

  it('keeps the ID token sealed with the session, never in clear', async () => {
    await signedIn(stack, 'sealy');
    const db = new Database(stack.env.DATABASE_PATH!, { readonly: true });
    try {
      const rows = db.prepare('SELECT id_token FROM browser_sessions WHERE subject = ?').all('sealy') as Array<{ id_token: string | null }>;
      assert.equal(rows.length, 1);
      assert.match(rows[0]!.id_token ?? '', /^v1\./, 'sealed like the other secrets');
      assert.doesNotMatch(rows[0]!.id_token ?? '', JWT_IN_CLEAR, 'no JWT in clear');
    } finally {
      db.close();
    }
  });

  it("ends the IdP's session with id_token_hint and a registered post_logout_redirect_uri, and the next visit shows the IdP's sign-in page", async () => {
    const { browser, csrf } = await signedIn(stack, 'sally');

    const refused = await postLogout(stack, browser, {});
    assert.equal(refused.status, 403, 'the sign-out POST keeps its CSRF check');
    await refused.body?.cancel();

    const res = await postLogout(stack, browser, { csrf });
    assert.equal(res.status, 303);
    await res.body?.cancel();
    const location = new URL(res.headers.get('location') ?? '');
    assert.equal(`${location.origin}${location.pathname}`, `${stack.idp.issuer}/session/end`);
    assert.equal(location.searchParams.get('post_logout_redirect_uri'), `${stack.publicUrl}/auth/signed-out`);
    assert.equal(location.searchParams.get('client_id'), BROKER_CLIENT.id);
    const hint = decodeJwt(location.searchParams.get('id_token_hint') ?? '');
    assert.equal(hint.sub, 'sally');
    assert.equal(hint.aud, BROKER_CLIENT.id);

    const confirm = await browser.open(location.href);
    assert.equal(confirm.status, 200);
    assert.match(textOf(confirm.html), /Sign out of the development sign-in\? You are signed in as sally \./);
    const done = await browser.submit(confirm, { fields: { logout: 'yes' } });
    assert.equal(done.url, `${stack.publicUrl}/auth/signed-out`);
    assert.equal(done.status, 200);
    assert.match(textOf(done.html), /You are signed out of this service and of your identity provider/);
    assert.doesNotMatch(done.html, /Signed in as/);

    // Signed out here: the next visit says so and waits for the person's own click.
    const next = await browser.open(`${stack.publicUrl}/connections`);
    assert.equal(next.status, 200);
    assert.match(textOf(next.html), /Signed out You signed out of this service in this browser/, next.trail.join(' -> '));
    const signInPage = await browser.open(new URL(linkHref(next.html, 'Sign in'), stack.publicUrl).href);
    assert.equal(new URL(signInPage.url).origin, stack.idp.issuer, `sent to the IdP: ${signInPage.trail.join(' -> ')}`);
    assert.match(signInPage.html, /Development sign-in/);
    assert.doesNotMatch(stack.logs.join('\n'), /eyJ[A-Za-z0-9_-]{20,}\./, 'no token in the logs');
  });

  it('ends the broker session first: with the IdP\'s "Sign out?" page left unanswered, the next visit shows "Signed out — sign in", never a silent sign-in', async () => {
    const { browser, csrf } = await signedIn(stack, 'leaver');
    const res = await postLogout(stack, browser, { csrf });
    assert.equal(res.status, 303);
    await res.body?.cancel();
    // The person never answers the IdP's "Sign out?" page: its session stays.
    const next = await browser.open(`${stack.publicUrl}/connections`);
    assert.equal(next.status, 200);
    assert.equal(new URL(next.url).origin, stack.publicUrl, `not sent to the IdP: ${next.trail.join(' -> ')}`);
    assert.match(
      textOf(next.html),
      /Signed out You signed out of this service in this browser, so it does not sign you back in by itself\./,
    );
    assert.doesNotMatch(next.html, /Signed in as/);
    // The person's own click signs in, and the IdP is told to ask again (prompt=login): its form, not a silent pass.
    const href = linkHref(next.html, 'Sign in');
    assert.equal(href, '/auth/login?again=1&returnTo=%2Fconnections');
    const form = await browser.open(new URL(href, stack.publicUrl).href);
    assert.equal(new URL(form.url).origin, stack.idp.issuer, form.trail.join(' -> '));
    assert.match(form.html, /Development sign-in/);
    const back = await browser.submit(form, { fields: { login: 'leaver' } });
    assert.equal(back.url, `${stack.publicUrl}/connections`, back.trail.join(' -> '));
    assert.match(textOf(back.html), /Signed in as leaver/);
    // Signed in again, the "signed out" mark is gone.
    assert.doesNotMatch(browser.cookieHeader(stack.publicUrl), /broker_signed_out/);
  });
});

describe('sign-out at an IdP without end_session_endpoint', () => {
  const stack = useStack({ idpEndSession: false });

  it("says truthfully that the identity provider's session remains", async () => {
    const { browser, csrf } = await signedIn(stack, 'tess');
    const page = await browser.open(`${stack.publicUrl}/auth/logout`, {
      method: 'POST',
      body: new URLSearchParams({ csrf }),
      headers: { origin: stack.publicUrl },
    });
    assert.equal(page.status, 200);
    assert.equal(page.url, `${stack.publicUrl}/auth/logout`, 'no redirect: there is no logout endpoint to send the browser to');
    const text = textOf(page.html);
    assert.match(
      text,
      /You are signed out of this service, but not of your identity provider: it offers no sign-out to this service, so its session remains/,
    );
    assert.doesNotMatch(text, /Signed in as/);
    // Its session is not used to sign the next visit straight back in: that visit asks first.
    const next = await browser.open(`${stack.publicUrl}/connections`);
    assert.doesNotMatch(textOf(next.html), /Signed in as tess/);
    assert.match(textOf(next.html), /Signed out You signed out of this service in this browser/);
  });
});
