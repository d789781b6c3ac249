// End-to-end tests of the pages in a real headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core, which never downloads a browser). One browser for the file, a fresh context
// (cookie jar) per test. Screenshots of every distinct page land in test-artifacts/screenshots/.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import Database from 'better-sqlite3';
import { chromium, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { startDevBroker, type DevBroker } from '../../src/dev/dev-broker.js';
import { authorizeInBrowser, InMemoryOAuthClient } from '../../src/dev/oauth-client.js';
import { createLogger } from '../../src/log.js';
import { Browser } from '../support/browser.js';
import { freePort } from '../support/idp.js';
import { envelope, rawCall, resultText } from '../support/mcp.js';
import { startStack, type Stack } from '../support/stack.js';
import { clientAs } from '../support/suite.js';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = fileURLToPath(new URL('../../test-artifacts/screenshots/', import.meta.url));
const CONNECT_KEY = 'connect_account';
const GITHUB_TOKEN = /gh[opsu]_[A-Za-z0-9]{20,}/;
const ISSUE_ARGS = { owner: 'octo-org', repo: 'hello', title: 'Filed from a real browser', body: 'Through the broker' };

/** One main-frame document response (redirects included) seen by a tab. */
interface Visit {
  url: string;
  status: number;
  csp: string | undefined;
}

/** A page in its own context, recording every document response and every console problem. */
interface Tab {
  context: BrowserContext;
  page: Page;
  visits: Visit[];
  problems: string[];
}

function cspDirectives(header: string | undefined): Map<string, string> {
  const directives = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const [name, ...values] = part.trim().split(/\s+/);
    if (name) directives.set(name.toLowerCase(), values.join(' '));
  }
  return directives;
}

const squash = (s: string) => s.replace(/\s+/g, ' ').trim();

/**
 * Product bug (see the report): pages send `Referrer-Policy: no-referrer`, so Chrome sends
 * `Origin: null` with every form POST, and originGuardOk (src/app.ts) refuses `null`: every
 * POST (consent, cancel, disconnect, connect, sign-in switch) gets 403 "Form expired".
 */

describe('the pages in a real browser (headless Chromium)', { skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed` }, () => {
  let stack: Stack;
  let persistent: BrowserContext | undefined;
  let profileDir: string | undefined;
  const contexts = new Set<BrowserContext>();

  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    stack = await startStack({ holdSeconds: 2 });
    profileDir = mkdtempSync(join(tmpdir(), 'broker-chromium-'));
    persistent = await chromium.launchPersistentContext(profileDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
        '--disable-quic',
      ],
    });
  });

  after(async () => {
    await Promise.allSettled([...contexts].map((c) => c.close()));
    await persistent?.close().catch(() => undefined);
    if (profileDir) rmSync(profileDir, { recursive: true, force: true });
    await stack?.close();
  });

  /** The `npm run dev` broker of the last group of tests, started there. */
  let dev: DevBroker | undefined;
  const isBroker = (url: string) => [stack.publicUrl, dev?.publicUrl].includes(new URL(url).origin);
  // Like the stack's IdP, the dev IdP may show pages of its own on the way (an auto-submitting form).
  const isDevIdp = (url: string) => new URL(url).origin === dev?.publicUrl && new URL(url).pathname.startsWith('/idp/');

  /** A new isolated context (its own cookies) with one page that records visits and console problems. */
  async function openTab(viewport = { width: 1024, height: 768 }): Promise<Tab> {
    const context = await persistent!.browser()!.newContext({ viewport });
    contexts.add(context);
    context.setDefaultTimeout(10_000);
    context.setDefaultNavigationTimeout(15_000);
    const page = await context.newPage();
    const tab: Tab = { context, page, visits: [], problems: [] };
    page.on('response', (response) => {
      if (!response.request().isNavigationRequest() || response.frame() !== page.mainFrame()) return;
      tab.visits.push({ url: response.url(), status: response.status(), csp: response.headers()['content-security-policy'] });
    });
    page.on('console', (message) => {
      if (message.type() !== 'error' && message.type() !== 'warning') return;
      const where = message.location().url;
      // Chrome reports an HTTP error status of the document itself (our 403 and 410 pages) as a
      // console error; that is the status we assert, not a problem of the page.
      const status = /^Failed to load resource: the server responded with a status of (\d{3})\b/.exec(message.text());
      if (status && tab.visits.some((v) => v.url === where && String(v.status) === status[1])) return;
      // The IdP and the GitHub stand-in are not ours and declare no icon; Chrome's guess 404s there.
      if (status?.[1] === '404' && where.endsWith('/favicon.ico') && !isBroker(where)) return;
      tab.problems.push(`console.${message.type()}: ${message.text()} (${where})`);
    });
    page.on('pageerror', (err) => tab.problems.push(`pageerror: ${err.message}`));
    return tab;
  }

  /**
   * Clicks `control` and waits for the next document the main frame settles on (after redirects);
   * fails at once, naming what was shown instead, unless its URL is accepted by `arrived`.
   */
  async function clickTo(tab: Tab, control: Locator, arrived: (url: URL) => boolean): Promise<void> {
    await arriveAfter(tab, () => control.click(), arrived);
  }

  /** Like clickTo, for any user action (a key press) that submits or follows something. */
  async function arriveAfter(tab: Tab, act: () => Promise<void>, arrived: (url: URL) => boolean): Promise<void> {
    const { page } = tab;
    assert.ok(!arrived(new URL(page.url())), `already at the destination before the click: ${page.url()}`);
    // The next document that is not a redirect and is either the destination or one of ours (the
    // IdP may show an intermediate page of its own, e.g. when the signed-in account changes).
    const settled = page.waitForResponse((r) => {
      if (!r.request().isNavigationRequest() || r.frame() !== page.mainFrame() || (r.status() >= 300 && r.status() < 400)) return false;
      return arrived(new URL(r.url())) || (isBroker(r.url()) && !isDevIdp(r.url())) || r.status() >= 400;
    });
    await act();
    const response = await settled;
    if (!arrived(new URL(response.url()))) {
      await page.waitForLoadState('load');
      const shown = squash(
        await page
          .locator('body')
          .innerText()
          .catch(() => ''),
      );
      assert.fail(`expected to arrive elsewhere; got ${response.status()} ${response.url()} showing: ${shown.slice(0, 300)}`);
    }
    await page.waitForURL(arrived, { waitUntil: 'load' });
  }

  /**
   * Checks the page the tab is on: the status of its document, its <h1>, and for our own pages the
   * CSP header, the stylesheet actually applied, and no token anywhere; then saves a screenshot.
   * Returns the page's visible text.
   */
  async function checkPage(tab: Tab, expected: { status: number; heading: string; shot?: string }): Promise<string> {
    const { page } = tab;
    const last = tab.visits.at(-1);
    assert.ok(last, 'a document was loaded');
    assert.equal(last.url, page.url(), 'the last document response is the page shown');
    assert.equal(last.status, expected.status, `HTTP status of ${page.url()}`);
    assert.equal(squash(await page.getByRole('heading', { level: 1 }).innerText()), expected.heading);
    const text = squash(await page.locator('body').innerText());
    if (isBroker(page.url())) {
      const style = await page.evaluate(() => {
        const body = getComputedStyle(document.body);
        return {
          font: body.fontFamily,
          margin: body.margin,
          sheets: document.styleSheets.length,
          rules: document.styleSheets[0]?.cssRules.length ?? 0,
        };
      });
      assert.doesNotMatch(style.font, /Times New Roman/, 'the UA default font means the stylesheet did not apply');
      assert.match(style.font, /^system-ui\b/);
      assert.equal(style.margin, '0px');
      assert.equal(style.sheets, 1, 'exactly our one stylesheet');
      assert.ok(style.rules > 10, 'the stylesheet has its rules');
      // Our pages declare an icon that exists, so Chrome never logs a 404 for /favicon.ico.
      const icon = await page.locator('link[rel="icon"]').getAttribute('href');
      assert.ok(icon, 'the page declares an icon');
      const iconResponse = await page.request.get(new URL(icon, page.url()).href);
      assert.equal(iconResponse.status(), 200, `the icon ${icon} loads`);
      const html = await page.content();
      assert.doesNotMatch(html, GITHUB_TOKEN, 'no GitHub token in the page');
      assert.doesNotMatch(html, /\sstyle=/i, 'no inline style');
      // No script but /connections' one static file, never inline.
      const scripts = [...html.matchAll(/<script\b[^>]*>([^<]*)<\/script>/gi)];
      const allowed = new URL(page.url()).pathname === '/connections' ? 1 : 0;
      assert.equal((html.match(/<script\b/gi) ?? []).length, scripts.length, 'every script tag is a whole, empty element');
      assert.ok(scripts.length <= allowed, `${scripts.length} scripts on ${page.url()}`);
      for (const [tag, body] of scripts) {
        assert.match(tag, /src="\/static\/local-time\.js"/);
        assert.equal(body, '', 'no inline script');
      }
    }
    if (expected.shot) await page.screenshot({ path: join(SHOTS, `${expected.shot}.png`), fullPage: true });
    return text;
  }

  /** Every broker document the tab saw carried the strict CSP; the browser reported no problems. */
  function assertCleanVisits(tab: Tab): void {
    const ours = tab.visits.filter((v) => isBroker(v.url));
    assert.ok(ours.length > 0, 'at least one of our pages was visited');
    for (const visit of ours) {
      const csp = cspDirectives(visit.csp);
      const where = `${visit.status} ${new URL(visit.url).pathname}`;
      assert.equal(csp.get('default-src'), "'none'", `default-src on ${where}`);
      // /connections alone may run its one static script, by this response's nonce.
      if (new URL(visit.url).pathname === '/connections')
        assert.match(csp.get('script-src') ?? '', /^'(none|nonce-[A-Za-z0-9_-]{22,})'$/, `script-src on ${where}`);
      else assert.equal(csp.get('script-src'), "'none'", `script-src on ${where}`);
      assert.equal(csp.get('frame-ancestors'), "'none'", `frame-ancestors on ${where}`);
      assert.equal(csp.get('style-src'), "'self'", `style-src on ${where}`);
      assert.doesNotMatch(visit.url, GITHUB_TOKEN, 'no token in any URL');
    }
    assert.deepEqual(tab.problems, [], 'no console errors, CSP violations or page errors');
  }

  /** At the IdP's "Development sign-in" page: types the user name and signs in. */
  async function signInAtIdp(tab: Tab, user: string, arrived: (url: URL) => boolean, shot?: string): Promise<void> {
    assert.equal(new URL(tab.page.url()).origin, stack.idp.issuer, 'at the identity provider');
    await checkPage(tab, { status: 200, heading: 'Development sign-in', ...(shot ? { shot } : {}) });
    await tab.page.getByLabel('User name').fill(user);
    await clickTo(tab, tab.page.getByRole('button', { name: 'Sign in', exact: true }), arrived);
  }

  const at =
    (origin: () => string, pathname: string, query?: (params: URLSearchParams) => boolean) =>
    (url: URL): boolean =>
      url.origin === origin() && url.pathname === pathname && (query ? query(url.searchParams) : true);
  const broker = () => stack.publicUrl;
  const github = () => stack.github.webUrl;
  const consentPage = at(broker, '/connect/github', (q) => q.has('req'));
  const githubAuthorize = at(github, '/login/oauth/authorize');
  const callback = at(broker, '/connect/github/callback');
  const atIdpSignIn = (url: URL) => url.origin === stack.idp.issuer && url.pathname.startsWith('/interaction/');

  /** A link minted for `sub` by a raw first tools/call (so nothing else drives it). */
  async function linkFor(sub: string): Promise<string> {
    const r = await rawCall(stack.mcpUrl, await stack.token(sub), {
      method: 'tools/call',
      params: { name: 'github_create_issue', arguments: ISSUE_ARGS, _meta: envelope() },
    });
    assert.equal(r.json?.result?.resultType, 'input_required', r.text);
    return r.json.result.inputRequests[CONNECT_KEY].params.url as string;
  }

  /** Runs github_create_issue as `sub` with a 2026-07-28 client whose URL elicitation is driven in `tab`. */
  async function callToolDrivingBrowser(sub: string, drive: (url: string) => Promise<void>) {
    const urls: string[] = [];
    let failure: unknown;
    const client = await clientAs(stack, sub, {
      onUrl: async (url) => {
        urls.push(url);
        try {
          await drive(url);
          return { action: 'accept' };
        } catch (err) {
          failure ??= err;
          return { action: 'cancel' };
        }
      },
    });
    try {
      const result = await client.callTool({ name: 'github_create_issue', arguments: ISSUE_ARGS });
      if (failure) throw failure;
      return { result, urls };
    } finally {
      await client.close();
    }
  }

  it('connects from the elicitation URL through IdP sign-in, consent and GitHub, shows "Connected as @octocat", and the tool creates the issue', async () => {
    const tab = await openTab();
    const issuesBefore = stack.github.issues.length;
    const { result, urls } = await callToolDrivingBrowser('hana', async (url) => {
      const first = await tab.page.goto(url);
      assert.ok(first);
      assert.ok(atIdpSignIn(new URL(tab.page.url())), `an anonymous browser is sent to sign in: ${tab.page.url()}`);
      await signInAtIdp(tab, 'hana', consentPage, 'idp-sign-in');

      const consent = await checkPage(tab, { status: 200, heading: 'Connect your GitHub account', shot: 'consent' });
      assert.match(consent, /You are signed in here as hana/);
      assert.match(consent, /The access token stays on this server: your assistant never sees it\./);
      assert.equal(tab.page.url(), url, 'back on the very link after signing in');
      await clickTo(tab, tab.page.getByRole('button', { name: 'Continue to GitHub' }), githubAuthorize);

      const authorize = await checkPage(tab, { status: 200, heading: 'GitHub stand-in — Authorize application', shot: 'github-authorize' });
      assert.match(authorize, /requests access/);
      const query = new URL(tab.page.url()).searchParams;
      assert.equal(query.get('code_challenge_method'), 'S256');
      assert.ok(query.get('state'), 'an OAuth state');
      await tab.page.getByLabel('Sign in as').fill('octocat');
      await clickTo(tab, tab.page.getByRole('button', { name: 'Authorize' }), callback);

      const done = await checkPage(tab, { status: 200, heading: 'Connected as @octocat', shot: 'success' });
      assert.match(done, /Your GitHub account is connected\. You can close this tab and return to your assistant\./);
      assert.equal(await tab.page.getByRole('link', { name: 'Manage connected accounts' }).getAttribute('href'), '/connections');
    });

    assert.equal(urls.length, 1, 'exactly one elicitation');
    assert.equal(result.isError, undefined);
    assert.equal(resultText(result), `Created issue #1 in octo-org/hello as @octocat: ${stack.github.webUrl}/octo-org/hello/issues/1`);
    assert.deepEqual(result.structuredContent, {
      status: 'created',
      number: 1,
      url: `${stack.github.webUrl}/octo-org/hello/issues/1`,
      repository: 'octo-org/hello',
    });
    assert.equal(stack.github.issues.length, issuesBefore + 1);
    assert.equal(stack.github.issues.at(-1)!.author, 'octocat');
    assertCleanVisits(tab);
  });

  it('refuses a link opened by another signed-in principal with a 403 page naming the viewer, and "Sign in as a different user" returns to the IdP sign-in', async () => {
    const link = await linkFor('alice');
    const githubRequestsBefore = stack.github.requests.length;
    const tab = await openTab();
    await tab.page.goto(link);
    await signInAtIdp(tab, 'bob', consentPage);

    const wrong = await checkPage(tab, { status: 403, heading: 'This link is for a different account', shot: 'wrong-account' });
    assert.match(wrong, /You are signed in as bob, but this link was created for another account of this service\./);
    assert.match(wrong, /Nothing was sent to GitHub\./);
    assert.doesNotMatch(wrong, /alice/, 'the page does not reveal whose link it is');
    assert.equal(await tab.page.getByRole('button', { name: 'Continue to GitHub' }).count(), 0, 'no consent button for bob');
    assert.equal(stack.github.requests.length, githubRequestsBefore, 'nothing was sent to GitHub');

    await clickTo(tab, tab.page.getByRole('button', { name: 'Sign in as a different user' }), atIdpSignIn);
    assert.equal(new URL(tab.page.url()).origin, stack.idp.issuer);
    // Signing in as the right user lands on the consent page of the same link.
    await signInAtIdp(tab, 'alice', consentPage);
    const consent = await checkPage(tab, { status: 200, heading: 'Connect your GitHub account' });
    assert.match(consent, /You are signed in here as alice/);
    assert.equal(tab.page.url(), link);
    assertCleanVisits(tab);
  });

  it('ends the tool call with a normal "not connected" result when the user presses Cancel on our consent page', async () => {
    const tab = await openTab();
    const authorizeRequestsBefore = stack.github.requests.filter((r) => r.path === '/login/oauth/authorize').length;
    const issuesBefore = stack.github.issues.length;
    const { result } = await callToolDrivingBrowser('carol', async (url) => {
      await tab.page.goto(url);
      await signInAtIdp(tab, 'carol', consentPage);
      await checkPage(tab, { status: 200, heading: 'Connect your GitHub account' });
      await clickTo(
        tab,
        tab.page.getByRole('button', { name: 'Cancel' }),
        at(broker, '/connect/github', (q) => q.size === 0),
      );
      const text = await checkPage(tab, { status: 200, heading: 'Nothing was connected', shot: 'cancelled' });
      assert.match(text, /You cancelled, so your GitHub account was not connected\. You can close this tab\./);
    });

    assert.equal(result.isError, undefined, 'a cancel is not an error');
    assert.equal(resultText(result), 'GitHub was not connected (you cancelled on the connect page), so nothing was done.');
    assert.deepEqual(result.structuredContent, { status: 'not_connected', reason: 'cancelled' });
    assert.equal(
      stack.github.requests.filter((r) => r.path === '/login/oauth/authorize').length,
      authorizeRequestsBefore,
      'GitHub was never contacted',
    );
    assert.equal(stack.github.issues.length, issuesBefore);
    assertCleanVisits(tab);
  });

  it('ends the tool call with a normal "not connected" result when the user cancels at GitHub (access_denied)', async () => {
    const tab = await openTab();
    const issuesBefore = stack.github.issues.length;
    const { result } = await callToolDrivingBrowser('dave', async (url) => {
      await tab.page.goto(url);
      await signInAtIdp(tab, 'dave', consentPage);
      await clickTo(tab, tab.page.getByRole('button', { name: 'Continue to GitHub' }), githubAuthorize);
      await checkPage(tab, { status: 200, heading: 'GitHub stand-in — Authorize application' });
      await clickTo(tab, tab.page.getByRole('button', { name: 'Cancel' }), callback);
      assert.equal(new URL(tab.page.url()).searchParams.get('error'), 'access_denied');
      const text = await checkPage(tab, { status: 200, heading: 'Nothing was connected', shot: 'access-denied' });
      assert.match(text, /You cancelled at GitHub, so nothing was connected\. You can close this tab\./);
    });

    assert.equal(result.isError, undefined, 'a denial is not an error');
    assert.equal(resultText(result), 'GitHub was not connected (you cancelled at GitHub), so nothing was done.');
    assert.deepEqual(result.structuredContent, { status: 'not_connected', reason: 'denied' });
    assert.equal(stack.github.issues.length, issuesBefore);
    assertCleanVisits(tab);
  });

  it('shows the "expired" page with HTTP 410 for a link whose pending connection has expired', async () => {
    const link = await linkFor('erin');
    const handle = new URL(link).searchParams.get('req')!;
    const db = new Database(stack.env.DATABASE_PATH!);
    try {
      db.pragma('busy_timeout = 5000');
      const changed = db
        .prepare('UPDATE pending_connections SET expires_at = ? WHERE link_hash = ?')
        .run(Date.now() - 1000, createHash('sha256').update(handle).digest('hex')).changes;
      assert.equal(changed, 1, 'the link row was found');
    } finally {
      db.close();
    }

    const tab = await openTab();
    const response = await tab.page.goto(link);
    assert.equal(response?.status(), 410);
    const text = await checkPage(tab, { status: 410, heading: 'This link has expired', shot: 'expired' });
    assert.match(text, /This connect link has expired\. Ask your assistant to try again; it will give you a new link\./);
    assert.equal(await tab.page.getByRole('link', { name: 'See your connected accounts' }).getAttribute('href'), '/connections');
    assert.equal(await tab.page.getByRole('button', { name: 'Continue to GitHub' }).count(), 0);
    assertCleanVisits(tab);
  });

  it('lists the connected @octocat on /connections, and Disconnect removes it and revokes the grant at GitHub', async () => {
    const tab = await openTab();
    const { page } = tab;
    await page.goto(`${stack.publicUrl}/connections`);
    await signInAtIdp(tab, 'frank', at(broker, '/connections'));
    const empty = await checkPage(tab, { status: 200, heading: 'Connected accounts' });
    assert.match(empty, /No accounts are connected right now\./);
    assert.equal(await page.getByRole('heading', { name: 'Connect an account' }).count(), 1, 'not "another" when there is none');

    // Connect from the page itself: it makes a link for the signed-in user and sends the browser there.
    await clickTo(tab, page.getByRole('button', { name: 'Connect GitHub', exact: true }), consentPage);
    await clickTo(tab, page.getByRole('button', { name: 'Continue to GitHub' }), githubAuthorize);
    await page.getByLabel('Sign in as').fill('octocat');
    await clickTo(tab, page.getByRole('button', { name: 'Authorize' }), callback);
    await checkPage(tab, { status: 200, heading: 'Connected as @octocat' });
    await clickTo(tab, page.getByRole('link', { name: 'Manage connected accounts' }), at(broker, '/connections'));

    const listed = await checkPage(tab, { status: 200, heading: 'Connected accounts', shot: 'connections' });
    const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'GitHub @octocat' }) });
    assert.equal(await card.count(), 1, `one GitHub card for @octocat: ${listed}`);
    assert.match(squash(await card.innerText()), /Permissions/);
    assert.equal(await page.getByRole('button', { name: 'Connect GitHub', exact: true }).count(), 0, 'no "Connect GitHub" while connected');

    // Dates in the reader's own locale and time zone (the page's one static script, allowed by its nonce); UTC in the title.
    const connectedAt = card.locator('time').first();
    assert.match((await connectedAt.getAttribute('title')) ?? '', /GMT$/);
    assert.doesNotMatch(await connectedAt.innerText(), /UTC$/, "formatted in the browser, not the server's UTC fallback");

    // Disconnect asks first, saying what will happen; nothing is revoked until the person confirms.
    const grantsBefore = stack.github.revokedGrants.length;
    await clickTo(tab, card.getByRole('link', { name: 'Disconnect GitHub' }), at(broker, '/connections/github/disconnect'));
    const question = await checkPage(tab, { status: 200, heading: 'Disconnect GitHub @octocat?', shot: 'disconnect-confirm' });
    assert.match(question, /asks GitHub to revoke the access you granted/);
    assert.equal(stack.github.revokedGrants.length, grantsBefore, 'nothing revoked by showing the question');
    // The answer comes back at the same address (the POST): wait for that document, not for a new URL.
    const answered = page.waitForResponse((r) => r.request().isNavigationRequest() && r.request().method() === 'POST');
    await page.getByRole('button', { name: 'Disconnect and revoke access' }).click();
    assert.equal((await answered).status(), 200);
    await page.waitForLoadState('load');
    const gone = await checkPage(tab, { status: 200, heading: 'GitHub disconnected', shot: 'disconnected' });
    assert.match(gone, /Your GitHub account is disconnected and the access was revoked at GitHub\./);
    assert.deepEqual(stack.github.revokedGrants.slice(grantsBefore), [{ clientId: stack.github.clientId, login: 'octocat' }]);
    assert.equal(stack.github.activeTokenCount('octocat'), 0);

    await clickTo(tab, page.getByRole('link', { name: 'Back to connected accounts' }), at(broker, '/connections'));
    const after = await checkPage(tab, { status: 200, heading: 'Connected accounts' });
    assert.match(after, /No accounts are connected right now\./);
    assertCleanVisits(tab);
  });

  it('lets a keyboard user on a 375 px wide phone screen Tab to "Continue to GitHub", see it whole with a focus ring, and press Enter', async () => {
    const width = 375;
    const link = await linkFor('grace');
    const tab = await openTab({ width, height: 740 });
    const { page } = tab;
    await page.goto(link);
    // The IdP's user name field has autofocus: type and press Enter, no mouse. Keys pressed before
    // the browser has applied autofocus would go nowhere, so wait for it (as a person would see it).
    await page.waitForFunction(() => document.activeElement?.id === 'login');
    await page.keyboard.type('grace');
    await arriveAfter(tab, () => page.keyboard.press('Enter'), consentPage);
    await checkPage(tab, { status: 200, heading: 'Connect your GitHub account' });

    const primary = page.getByRole('button', { name: 'Continue to GitHub' });
    const focused: string[] = [];
    for (let i = 0; i < 10 && !(await primary.evaluate((el) => el === document.activeElement)); i++) {
      await page.keyboard.press('Tab');
      focused.push(squash(await page.evaluate(() => document.activeElement?.textContent ?? '')));
    }
    assert.ok(
      await primary.evaluate((el) => el === document.activeElement),
      `Tab reaches the primary button; focus went through: ${focused.join(' | ')}`,
    );
    assert.ok(focused.length <= 5, `within a few Tab presses: ${focused.join(' | ')}`);

    assert.ok(await primary.isVisible());
    const box = await primary.boundingBox();
    assert.ok(box, 'the button has a box');
    assert.ok(box.x >= 0 && box.x + box.width <= width, `the button fits the width: ${JSON.stringify(box)}`);
    assert.ok(box.height >= 44, `a comfortable touch target: ${box.height}px`);
    const layout = await primary.evaluate((el) => ({
      outline: getComputedStyle(el).outlineStyle,
      scrollWidth: document.documentElement.scrollWidth,
    }));
    assert.equal(layout.outline, 'solid', 'keyboard focus is visible');
    assert.ok(layout.scrollWidth <= width, `no horizontal scrolling: ${layout.scrollWidth}px`);
    await page.screenshot({ path: join(SHOTS, 'consent-phone.png'), fullPage: true });

    await arriveAfter(tab, () => page.keyboard.press('Enter'), githubAuthorize);
    await checkPage(tab, { status: 200, heading: 'GitHub stand-in — Authorize application' });
    assertCleanVisits(tab);
  });
  // `npm run dev` mounts its IdP at /idp on the broker's own origin, which the stack above (an IdP
  // on its own port) cannot show: the same steps against the very set-up a developer runs.
  describe('against npm run dev itself (the IdP at /idp on the broker origin)', () => {
    let dir: string;
    const REDIRECT = 'http://127.0.0.1:9/oauth/callback';

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'broker-dev-browser-'));
      const port = await freePort();
      dev = await startDevBroker(
        { PATH: process.env.PATH, PORT: String(port), DATABASE_PATH: join(dir, 'data', 'broker.db') },
        createLogger('error'),
      );
    });
    after(async () => {
      await dev?.running.close();
      dev = undefined;
      rmSync(dir, { recursive: true, force: true });
    });

    const devBroker = () => dev!.publicUrl;
    const atDevIdpSignIn = (url: URL) => url.origin === devBroker() && url.pathname.startsWith('/idp/interaction/');
    const devConsent = at(devBroker, '/connect/github', (q) => q.has('req'));

    /** An access token for `user` from the dev IdP, the way an MCP client gets one (DCR, PKCE, sign-in). */
    async function devAccessToken(user: string): Promise<string> {
      const oauth = new InMemoryOAuthClient(REDIRECT, 'Browser test assistant');
      const client = new Client(
        { name: 'dev-browser-test', version: '1.0.0' },
        { capabilities: {}, versionNegotiation: { mode: { pin: '2026-07-28' } } },
      );
      await assert.rejects(
        client.connect(new StreamableHTTPClientTransport(new URL(dev!.mcpUrl), { authProvider: oauth })),
        UnauthorizedError,
      );
      assert.ok(oauth.authorizationUrl, 'the client was sent to the IdP');
      const transport = new StreamableHTTPClientTransport(new URL(dev!.mcpUrl), { authProvider: oauth });
      await transport.finishAuth(await authorizeInBrowser(new Browser(), oauth.authorizationUrl, REDIRECT, user));
      const token = oauth.tokens()?.access_token;
      assert.ok(token, 'an access token');
      return token;
    }

    async function devSignIn(tab: Tab, user: string, arrived: (url: URL) => boolean): Promise<void> {
      assert.ok(atDevIdpSignIn(new URL(tab.page.url())), `at the dev IdP's sign-in: ${tab.page.url()}`);
      const text = await checkPage(tab, { status: 200, heading: 'Development sign-in' });
      assert.match(
        text,
        /MCP Connect Broker \(the name it gives itself\) asks you to sign in\./,
        'names who is signing in: the client_name, not its client_id',
      );
      await tab.page.getByLabel('User name').fill(user);
      await clickTo(tab, tab.page.getByRole('button', { name: 'Sign in', exact: true }), arrived);
    }

    it("opens Alice's link as Bob, gets the wrong-account page, switches, signs in as Alice and reaches the consent page", async () => {
      const r = await rawCall(dev!.mcpUrl, await devAccessToken('alice'), {
        method: 'tools/call',
        params: { name: 'github_create_issue', arguments: ISSUE_ARGS, _meta: envelope() },
      });
      assert.equal(r.json?.result?.resultType, 'input_required', r.text);
      const link = r.json.result.inputRequests[CONNECT_KEY].params.url as string;

      const tab = await openTab();
      await tab.page.goto(link);
      await devSignIn(tab, 'bob', (url) => url.href === link);
      const wrong = await checkPage(tab, { status: 403, heading: 'This link is for a different account' });
      assert.match(wrong, /You are signed in as bob/);

      await clickTo(tab, tab.page.getByRole('button', { name: 'Sign in as a different user' }), atDevIdpSignIn);
      await devSignIn(tab, 'alice', devConsent);
      const consent = await checkPage(tab, {
        status: 200,
        heading: 'Connect your GitHub (sandbox) account',
        shot: 'dev-consent-after-switch',
      });
      assert.match(consent, /You are signed in here as alice/);
      assert.equal(tab.page.url(), link, 'back on the very link');
    });

    it('signs out for real: the IdP asks to confirm, the broker says so, and the next visit asks to sign in (never silently)', async () => {
      const tab = await openTab();
      const { page } = tab;
      await page.goto(`${devBroker()}/connections`);
      await devSignIn(tab, 'carol', at(devBroker, '/connections'));
      await checkPage(tab, { status: 200, heading: 'Connected accounts' });

      await clickTo(tab, page.getByRole('button', { name: 'Sign out' }), at(devBroker, '/idp/session/end'));
      await checkPage(tab, { status: 200, heading: 'Sign out of the development sign-in?', shot: 'dev-idp-sign-out' });
      await clickTo(tab, page.getByRole('button', { name: 'Sign out' }), at(devBroker, '/auth/signed-out'));
      const done = await checkPage(tab, { status: 200, heading: 'Signed out', shot: 'signed-out' });
      assert.match(done, /You are signed out of this service and of your identity provider/);
      assert.ok(
        tab.visits.every((v) => !/id_token_hint=/.test(v.url) || new URL(v.url).pathname === '/idp/session/end'),
        'the ID token travels only to the IdP logout endpoint',
      );

      // The next visit says "Signed out" with a Sign in button, instead of signing in silently.
      await page.goto(`${devBroker()}/connections`);
      assert.equal(new URL(page.url()).pathname, '/auth/login', `the broker asks first: ${page.url()}`);
      const asked = await checkPage(tab, { status: 200, heading: 'Signed out' });
      assert.doesNotMatch(asked, /Signed in as/);
      await clickTo(tab, page.getByRole('link', { name: 'Sign in' }), atDevIdpSignIn);
      await checkPage(tab, { status: 200, heading: 'Development sign-in' });
    });
  });
});
