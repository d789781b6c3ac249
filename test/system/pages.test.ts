// Every page a person meets, in a real headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core, which never downloads a browser), at a desktop and a phone width, in the light
// and the dark colour scheme: what a person would notice. No sideways scrolling, one heading, a
// label on every field, the primary action as wide as the column on a phone, readable colours, and
// the same page shell (header, content column, our stylesheet) everywhere.
//
// One browser for the file and one context per person, reused from page to page; each page is
// reached once and looked at four ways by resizing and re-emulating, not by reloading. Screenshots
// of every page at every width and scheme go to PAGE_SCREENSHOTS_DIR (test-artifacts/pages/ is
// git-ignored; CI keeps it as an artifact); without it, two a page go to a temporary folder that
// is deleted at the end (a screenshot is the slowest step: the run stays well under 90 s).
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { writeYamlLines } from '../support/config-file.js';
import { envelope, rawCall } from '../support/mcp.js';
import { startStack, type Stack } from '../support/stack.js';
import { postTokenExchange } from '../support/token-exchange.js';

const CHROMIUM = '/usr/bin/chromium';
const CONNECT_KEY = 'connect_account';
const ISSUE_ARGS = { owner: 'octo-org', repo: 'hello', title: 'From the page test', body: 'x' };
const SERVICE = { id: 'issue-bot', secret: 'issue-bot-secret-for-the-page-test-01', audience: 'https://bot.example.com/mcp' };
/** A client of the IdP that is neither the broker nor on loopback: the IdP asks the person to allow it. */
const WEB_APP = { client_name: 'Notes web app', redirect_uri: 'https://notes.example/callback' };

const WIDTHS = [1280, 390] as const;
const SCHEMES = ['light', 'dark'] as const;
const PHONE = 30 * 16; // the stylesheet's phone breakpoint (30rem)

/** Every page this suite must have looked at; the last test checks none was skipped. */
const EXPECTED = [
  'landing',
  'landing-signed-in',
  'idp-sign-in',
  'idp-sign-in-error',
  'connections-empty',
  'consent-assistant',
  'consent-service',
  'connected',
  'connections-with-connection',
  'cancelled',
  'wrong-account',
  'declined-other-user',
  'expired-or-unknown-link',
  'unknown-provider',
  'page-not-found',
  'idp-consent',
  'idp-problem',
  'idp-sign-out',
  'signed-out',
];

/** What one look at a page measured in the browser. */
interface Measure {
  viewport: number;
  scrollWidth: number;
  h1: string[];
  shell: { headers: number; brands: number; mains: number; stylesheet: boolean; font: string };
  column: number;
  unlabelled: string[];
  primaries: Array<{ text: string; width: number }>;
  inputs: Array<{ id: string; width: number }>;
  repeatsHeading: string[];
  background: number[];
  text: number[];
  primaryColours: Array<{ text: string; fg: number[]; bg: number[] }>;
}

/** WCAG relative luminance of an sRGB colour given as [r, g, b] in 0–255. */
function luminance([r = 0, g = 0, b = 0]: number[]): number {
  const lin = (c: number) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

function contrast(a: number[], b: number[]): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

/** Runs in the page: everything the assertions need, in one round trip. */
function measure(): Measure {
  const rgb = (value: string) => (/rgba?\(([^)]+)\)/.exec(value)?.[1] ?? '0,0,0').split(',').slice(0, 3).map(Number);
  const visible = (el: Element) => {
    const box = el.getBoundingClientRect();
    return box.width > 0 && box.height > 0 && getComputedStyle(el).visibility !== 'hidden';
  };
  const main = document.querySelector('main');
  const mainStyle = main ? getComputedStyle(main) : undefined;
  const column = main && mainStyle ? main.clientWidth - parseFloat(mainStyle.paddingLeft) - parseFloat(mainStyle.paddingRight) : 0;
  const h1 = Array.from(document.querySelectorAll('h1')).map((h) => (h.textContent ?? '').replace(/\s+/g, ' ').trim());
  const controls = Array.from(document.querySelectorAll('input, select, textarea')).filter(
    (el) => !(el instanceof HTMLInputElement && el.type === 'hidden'),
  ) as Array<HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement>;
  const unlabelled = controls
    .filter((el) => !(el.labels && Array.from(el.labels).some((l) => (l.textContent ?? '').trim())) && !el.getAttribute('aria-label'))
    .map((el) => el.outerHTML.slice(0, 120));
  const primaries = Array.from(main?.querySelectorAll('.button.primary') ?? [])
    .filter(visible)
    .map((el) => ({ text: (el.textContent ?? '').trim(), width: el.getBoundingClientRect().width }));
  const inputs = Array.from(main?.querySelectorAll('input:not([type=hidden]), textarea, select') ?? [])
    .filter(visible)
    .map((el) => ({ id: el.id, width: el.getBoundingClientRect().width }));
  const heading = h1[0] ?? '';
  const repeatsHeading = heading
    ? Array.from(main?.querySelectorAll('p, li') ?? [])
        .map((el) => (el.textContent ?? '').replace(/\s+/g, ' ').trim())
        .filter((text) => text.startsWith(heading))
    : [];
  const body = getComputedStyle(document.body);
  return {
    viewport: window.innerWidth,
    scrollWidth: Math.max(document.documentElement.scrollWidth, document.body.scrollWidth),
    h1,
    shell: {
      headers: document.querySelectorAll('header.site-header').length,
      brands: document.querySelectorAll('header.site-header .brand').length,
      mains: document.querySelectorAll('main.content').length,
      stylesheet: Array.from(document.styleSheets).some((s) => (s.href ?? '').endsWith('/static/style.css') && s.cssRules.length > 10),
      font: body.fontFamily,
    },
    column,
    unlabelled,
    primaries,
    inputs,
    repeatsHeading,
    background: rgb(body.backgroundColor),
    text: rgb(body.color),
    primaryColours: Array.from(main?.querySelectorAll('.button.primary') ?? [])
      .filter(visible)
      .map((el) => {
        const style = getComputedStyle(el);
        return { text: (el.textContent ?? '').trim(), fg: rgb(style.color), bg: rgb(style.backgroundColor) };
      }),
  };
}

describe(
  'every page at 1280 and 390 px, light and dark (headless Chromium)',
  { skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed` },
  () => {
    let stack: Stack;
    let dir: string;
    let browser: Browser;
    let shots: string;
    let shotsAreTemporary = false;
    /** Screenshots kept for people take every width and scheme; thrown away, two a page (desktop light, phone dark). */
    let everyShot = false;
    const looked = new Set<string>();
    const people = new Map<string, { context: BrowserContext; page: Page; problems: string[] }>();

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'pages-test-'));
      const file = writeYamlLines(join(dir, 'services.yaml'), [
        'services:',
        `  - id: ${SERVICE.id}`,
        '    displayName: Example issue service',
        `    audiences: [${SERVICE.audience}]`,
        '    auth: client_secret_basic',
        '    allow: { github: [public_repo, repo] }',
      ]);
      const [started, launched] = await Promise.all([
        startStack({
          env: { PROVIDERS_FILE: file, SERVICE_ISSUE_BOT_SECRET: SERVICE.secret },
          holdSeconds: 1,
        }),
        chromium.launch({
          executablePath: CHROMIUM,
          headless: true,
          args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
        }),
      ]);
      stack = started;
      browser = launched;
      if (process.env.PAGE_SCREENSHOTS_DIR) {
        shots = resolve(process.env.PAGE_SCREENSHOTS_DIR);
        everyShot = true;
        mkdirSync(shots, { recursive: true });
      } else {
        shots = mkdtempSync(join(tmpdir(), 'page-screenshots-'));
        shotsAreTemporary = true;
      }
    });

    after(async () => {
      await browser?.close().catch(() => undefined);
      await stack?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
      if (shotsAreTemporary) rmSync(shots, { recursive: true, force: true });
    });

    /** The one context (cookie jar) and tab of `who`, made on first use. */
    async function tabOf(who: string): Promise<Page> {
      const known = people.get(who);
      if (known) return known.page;
      const context = await browser.newContext({ viewport: { width: WIDTHS[0], height: 800 } });
      context.setDefaultTimeout(10_000);
      context.setDefaultNavigationTimeout(15_000);
      // tsx (esbuild keepNames) wraps the named functions inside `measure` in `__name(...)`, which
      // the page does not have. Evaluated through DevTools, so the pages' CSP is not involved.
      await context.addInitScript('globalThis.__name = globalThis.__name || ((f) => f);');
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('console', (m) => {
        if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text());
      });
      page.on('pageerror', (err) => problems.push(err.message));
      people.set(who, { context, page, problems });
      return page;
    }

    const ours = (page: Page) => [stack.publicUrl, stack.idp.issuer].includes(new URL(page.url()).origin);

    /**
     * Looks at the page `page` shows as `name`, at each width and colour scheme: asserts what a
     * person would notice and saves a screenshot of each. Returns the page's h1.
     */
    async function look(page: Page, name: string, heading?: RegExp | string): Promise<string> {
      assert.ok(ours(page), `${name}: one of our pages (${page.url()})`);
      for (const width of WIDTHS) {
        await page.setViewportSize({ width, height: 800 });
        for (const colorScheme of SCHEMES) {
          await page.emulateMedia({ colorScheme });
          const m = await page.evaluate(measure);
          const where = `${name} at ${width} px, ${colorScheme}`;
          assert.equal(m.viewport, width, `${where}: the viewport`);
          assert.ok(m.scrollWidth <= width, `${where}: no sideways scrolling (document is ${m.scrollWidth} px wide)`);
          assert.equal(m.h1.length, 1, `${where}: exactly one h1 (${JSON.stringify(m.h1)})`);
          if (typeof heading === 'string') assert.equal(m.h1[0], heading, `${where}: the heading`);
          else if (heading) assert.match(m.h1[0] ?? '', heading, `${where}: the heading`);
          assert.deepEqual(m.repeatsHeading, [], `${where}: no paragraph repeats the heading word for word`);
          assert.deepEqual(
            { ...m.shell, font: /^system-ui\b/.test(m.shell.font) },
            { headers: 1, brands: 1, mains: 1, stylesheet: true, font: true },
            `${where}: the shared page shell (header with the brand, one content column, our stylesheet applied)`,
          );
          assert.deepEqual(m.unlabelled, [], `${where}: every field has a label`);
          for (const input of m.inputs)
            assert.ok(input.width >= 0.9 * m.column, `${where}: field #${input.id} spans the column (${input.width} of ${m.column} px)`);
          if (width <= PHONE)
            for (const button of m.primaries)
              assert.ok(
                button.width >= 0.9 * m.column,
                `${where}: the primary action "${button.text}" is as wide as the column on a phone (${button.width} of ${m.column} px)`,
              );
          const dark = luminance(m.background) < 0.2;
          assert.equal(
            dark,
            colorScheme === 'dark',
            `${where}: the page follows the colour scheme (background rgb(${m.background.join(',')}))`,
          );
          assert.ok(
            contrast(m.text, m.background) >= 7,
            `${where}: body text is readable (${contrast(m.text, m.background).toFixed(1)}:1)`,
          );
          for (const b of m.primaryColours)
            assert.ok(contrast(b.fg, b.bg) >= 4.5, `${where}: "${b.text}" is readable (${contrast(b.fg, b.bg).toFixed(1)}:1)`);
          if (everyShot || (width === WIDTHS[0]) === (colorScheme === 'light'))
            await page.screenshot({ path: join(shots, `${name}-${width}-${colorScheme}.png`), fullPage: true });
        }
      }
      await page.setViewportSize({ width: WIDTHS[0], height: 800 });
      await page.emulateMedia({ colorScheme: null });
      looked.add(name);
      return (await page.locator('h1').innerText()).trim();
    }

    /** Clicks `name` (a button, else a link) and waits until the page is at a URL `arrived` accepts. */
    async function clickTo(page: Page, name: string, arrived: (url: URL) => boolean): Promise<void> {
      const button = page.getByRole('button', { name, exact: true });
      const control = (await button.count()) > 0 ? button.first() : page.getByRole('link', { name, exact: true }).first();
      await Promise.all([page.waitForURL(arrived, { waitUntil: 'load' }), control.click()]);
    }

    const atBroker = (path: string) => (url: URL) => url.origin === stack.publicUrl && url.pathname === path;
    const atIdp = (url: URL) => url.origin === stack.idp.issuer;

    /** Signs `page` in at the IdP's sign-in page as `user`, landing where `arrived` says. */
    async function signIn(page: Page, user: string, arrived: (url: URL) => boolean): Promise<void> {
      assert.ok(atIdp(new URL(page.url())), `at the IdP: ${page.url()}`);
      await page.getByLabel('User name').fill(user);
      await clickTo(page, 'Sign in', arrived);
    }

    /** A connect link minted for `sub` by a first tools/call, and the requestState to answer it with. */
    async function linkFor(sub: string): Promise<{ link: string; requestState: string; token: string }> {
      const token = await stack.token(sub);
      const r = await rawCall(stack.mcpUrl, token, {
        method: 'tools/call',
        params: { name: 'github_create_issue', arguments: ISSUE_ARGS, _meta: envelope() },
      });
      assert.equal(r.json?.result?.resultType, 'input_required', r.text);
      return { link: r.json.result.inputRequests[CONNECT_KEY].params.url as string, requestState: r.json.result.requestState, token };
    }

    it('the landing page says what this is and offers sign-in; the sign-in form is laid out like every other page', async () => {
      const page = await tabOf('alice');
      const landing = await page.goto(`${stack.publicUrl}/`);
      assert.equal(landing?.status(), 200, 'the start page is a page, not a redirect to sign-in');
      assert.equal(new URL(page.url()).pathname, '/');
      await look(page, 'landing', /accounts/);
      const text = await page.locator('main').innerText();
      assert.match(text, /never sees your password or token/);
      assert.match(text, new RegExp(`${stack.mcpUrl.replace(/[.:/]/g, '\\$&')}`), 'names the MCP URL to add to an assistant');
      assert.equal(await page.getByRole('link', { name: 'Your connected accounts' }).getAttribute('href'), '/connections');

      await clickTo(page, 'Sign in', atIdp);
      await look(page, 'idp-sign-in', 'Development sign-in');
      // Label above the field, the actions below it: not side by side.
      const label = (await page.locator('label[for="login"]').boundingBox())!;
      const input = (await page.locator('#login').boundingBox())!;
      const signInButton = (await page.getByRole('button', { name: 'Sign in', exact: true }).boundingBox())!;
      assert.ok(label.y + label.height <= input.y + 1, `the label sits above the field: ${JSON.stringify({ label, input })}`);
      assert.ok(signInButton.y >= input.y + input.height, `the actions sit below the field: ${JSON.stringify({ input, signInButton })}`);
      assert.ok(input.height >= 40, `the field is a comfortable touch target: ${input.height}px`);

      // A name of only spaces is refused by the server, with the message in the same layout.
      await page.getByLabel('User name').fill('   ');
      await Promise.all([
        page.waitForResponse((r) => r.request().method() === 'POST'),
        page.getByRole('button', { name: 'Sign in', exact: true }).click(),
      ]);
      await page.waitForLoadState('load');
      assert.match(await page.getByRole('alert').innerText(), /Enter a user name\./);
      await look(page, 'idp-sign-in-error', 'Development sign-in');

      await signIn(page, 'alice', atBroker('/connections'));
      await look(page, 'connections-empty', 'Connected accounts');
      await page.goto(`${stack.publicUrl}/`);
      await look(page, 'landing-signed-in', /accounts/);
      assert.equal(await page.getByRole('link', { name: 'Sign in', exact: true }).count(), 0, 'no "Sign in" for a signed-in person');
    });

    it('the consent pages (an assistant, a service), the connected page, the accounts page with a connection, and a cancel', async () => {
      const page = await tabOf('alice');
      const { link } = await linkFor('alice');
      await page.goto(link);
      await look(page, 'consent-assistant', 'Connect your GitHub account');
      const consent = await page.locator('main').innerText();
      assert.match(consent, /You are signed in here as alice\./, 'the name once when the subject is the same');
      assert.doesNotMatch(consent, /alice \(alice\)/);
      assert.doesNotMatch(consent, /It is asking for permission/);
      // Who receives the token besides this server, from the configuration: the service allowed to exchange for it.
      assert.match(consent, /your AI assistant never sees it\.\s*This server sends it to:\s*Example issue service, when it acts for you/);

      const exchange = await postTokenExchange(stack.publicUrl, SERVICE, {
        subject_token: await stack.token('alice', { aud: SERVICE.audience }),
      });
      assert.equal(exchange.json.error, 'interaction_required', JSON.stringify(exchange.json));
      await page.goto(String(exchange.json.connect_uri));
      await look(page, 'consent-service', /GitHub/);
      assert.match(await page.locator('main').innerText(), /Example issue service/);
      await clickTo(page, 'Cancel', (url) => url.origin === stack.publicUrl && url.pathname === '/connect/github' && !url.search);
      await look(page, 'cancelled', 'Nothing was connected');

      await page.goto(link);
      await clickTo(page, 'Continue to GitHub', (url) => url.origin === stack.github.webUrl);
      await page.getByLabel('Sign in as').fill('octocat');
      await clickTo(page, 'Authorize', atBroker('/connect/github/callback'));
      await look(page, 'connected', 'Connected as @octocat');
      await clickTo(page, 'Manage connected accounts', atBroker('/connections'));
      await look(page, 'connections-with-connection', 'Connected accounts');
      assert.match(await page.locator('main').innerText(), /@octocat/);
    });

    it('the refusals: another person’s link, a link declined in its owner’s assistant, a bad link, an unknown provider, no such page', async () => {
      const page = await tabOf('bob');
      const { link } = await linkFor('carol');
      await page.goto(link);
      await signIn(page, 'bob', (url) => url.href === link);
      await look(page, 'wrong-account', 'This link is for a different account');

      // Carol declines in her assistant; Bob opening her link is not told it happened "in your AI assistant".
      const declined = await linkFor('carol');
      const answer = await rawCall(stack.mcpUrl, declined.token, {
        method: 'tools/call',
        params: {
          name: 'github_create_issue',
          arguments: ISSUE_ARGS,
          _meta: envelope(),
          inputResponses: { [CONNECT_KEY]: { action: 'decline' } },
          requestState: declined.requestState,
        },
      });
      assert.equal(answer.json?.result?.resultType, 'complete', answer.text);
      await page.goto(declined.link);
      const heading = await look(page, 'declined-other-user');
      const text = await page.locator('main').innerText();
      assert.match(heading, /cancelled/i);
      assert.doesNotMatch(text, /your AI assistant/, 'said neutrally to whoever opens it');
      assert.equal(await page.getByRole('link', { name: 'See your connected accounts' }).count(), 1, 'a way on');

      const pages: Array<[string, string, number, string]> = [
        ['expired-or-unknown-link', '/connect/github?req=not-a-real-link', 404, 'Link not found'],
        ['unknown-provider', '/connect/nowhere?req=x', 404, 'Unknown provider'],
        ['page-not-found', '/no/such/page', 404, 'Page not found'],
      ];
      for (const [name, path, status, title] of pages) {
        const response = await page.goto(`${stack.publicUrl}${path}`);
        assert.equal(response?.status(), status, `${path}: the status`);
        await look(page, name, title);
        // Every error page offers a way on, as the others do.
        const action = page.locator('main .actions .button');
        assert.equal(await action.count(), 1, `${name}: one button`);
        assert.equal(await action.getAttribute('href'), '/connections', `${name}: to the accounts page for a signed-in person`);
      }
      const anonymous = await tabOf('anonymous');
      const response = await anonymous.goto(`${stack.publicUrl}/no/such/page`);
      assert.equal(response?.status(), 404);
      assert.equal(await anonymous.locator('main .actions .button').getAttribute('href'), '/', 'to the start page for anyone else');
    });

    it("the identity provider's own pages: consent for a web client, a sign-in problem, sign-out, and the signed-out page", async () => {
      const page = await tabOf('alice');
      // Registered dynamically, as a web page would: the IdP's own clients are never asked about.
      const registration = await fetch(`${stack.idp.issuer}/reg`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          client_name: WEB_APP.client_name,
          redirect_uris: [WEB_APP.redirect_uri],
          token_endpoint_auth_method: 'none',
          grant_types: ['authorization_code'],
          response_types: ['code'],
        }),
      });
      const { client_id: clientId } = (await registration.json()) as { client_id: string };
      assert.equal(registration.status, 201);
      const authorize = new URL(`${stack.idp.issuer}/auth`);
      authorize.search = new URLSearchParams({
        client_id: clientId,
        redirect_uri: WEB_APP.redirect_uri,
        response_type: 'code',
        scope: 'openid mcp',
        resource: stack.mcpUrl,
        state: 'st',
        code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
        code_challenge_method: 'S256',
      }).toString();
      await page.goto(authorize.href);
      if (await page.getByLabel('User name').count())
        await signIn(page, 'alice', (url) => atIdp(url) && url.pathname.startsWith('/interaction/'));
      await look(page, 'idp-consent', `Allow ${WEB_APP.client_name} to act as you?`);

      const problem = await page.goto(`${stack.idp.issuer}/interaction/not-a-real-attempt`);
      assert.equal(problem?.status(), 400);
      await look(page, 'idp-problem', 'Sign-in problem');

      await page.goto(`${stack.publicUrl}/connections`);
      await clickTo(page, 'Sign out', atIdp);
      await look(page, 'idp-sign-out');
      await clickTo(page, 'Sign out', atBroker('/auth/signed-out'));
      await look(page, 'signed-out', /^Signed out/);
    });

    it('looked at every page, with no CSP violation or script error on the way', () => {
      assert.deepEqual(
        EXPECTED.filter((name) => !looked.has(name)),
        [],
        'pages not looked at (an earlier test failed before reaching them)',
      );
      for (const [who, { problems }] of people) assert.deepEqual(problems, [], `${who}: problems the browser reported`);
    });
  },
);
