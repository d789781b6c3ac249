// "Another device" in a real headless Chromium (Debian's /usr/bin/chromium driven by playwright-core):
// a tool call asks for a connection, and a person on a second browser context (its own cookies, a
// phone-sized screen) opens /activate, signs in, types the link's code, consents and connects; the
// original call then succeeds. Screenshots land in test-artifacts/screenshots/.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { resultText } from '../support/mcp.js';
import { startStack, type Stack } from '../support/stack.js';
import { clientAs } from '../support/suite.js';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = fileURLToPath(new URL('../../test-artifacts/screenshots/', import.meta.url));
const ISSUE_ARGS = { owner: 'octo-org', repo: 'hello', title: 'Filed from another device', body: 'Through /activate' };
const sha256Hex = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');
const squash = (s: string) => s.replace(/\s+/g, ' ').trim();

describe('/activate on another device (headless Chromium)', { skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed` }, () => {
  let stack: Stack;
  let browser: Browser;

  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    stack = await startStack({ holdSeconds: 2 });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
    });
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    await stack?.close();
  });

  async function heading(page: Page): Promise<string> {
    return squash(await page.getByRole('heading', { level: 1 }).innerText());
  }

  it('a person on a second browser context signs in at /activate, types the code, connects, and the original call succeeds', async () => {
    // The first device: signed in at the broker already (its own cookies), never opens the link.
    const desk = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    for (const c of [desk, phone]) c.setDefaultTimeout(15_000);
    try {
      const deskPage = await desk.newPage();
      await deskPage.goto(`${stack.publicUrl}/connections`);
      await deskPage.getByLabel('User name').fill('ivy');
      await deskPage.getByRole('button', { name: 'Sign in', exact: true }).click();
      await deskPage.waitForURL(`${stack.publicUrl}/connections`);

      const issuesBefore = stack.github.issues.length;
      let clientName: string | null | undefined;
      let failure: unknown;
      const client = await clientAs(stack, 'ivy', {
        onUrl: async (url) => {
          try {
            // What the assistant shows beside the link: /activate and the link's code.
            const handle = new URL(url).searchParams.get('req')!;
            const pending = (await stack.broker.broker.store.pending.byLinkHash(sha256Hex(handle)))!;
            clientName = pending.client_name;
            const links = stack.broker.broker.toolDeps.links;
            const code = links.activationCode(pending);
            assert.equal(links.activateUrl(), `${stack.publicUrl}/activate`);

            const page = await phone.newPage();
            await page.goto(links.activateUrl());
            assert.equal(new URL(page.url()).origin, stack.idp.issuer, 'the phone has no session: it signs in first');
            await page.getByLabel('User name').fill('ivy');
            await page.getByRole('button', { name: 'Sign in', exact: true }).click();
            await page.waitForURL(`${stack.publicUrl}/activate`);
            assert.equal(await heading(page), 'Enter your code');
            await page.screenshot({ path: join(SHOTS, 'activate-phone.png'), fullPage: true });

            // One labelled input and a full-width button, on a phone.
            const input = page.getByLabel('Code');
            const button = page.getByRole('button', { name: 'Continue' });
            const [inputBox, buttonBox, formBox] = await Promise.all([
              input.boundingBox(),
              button.boundingBox(),
              page.locator('form.code-form').boundingBox(),
            ]);
            assert.ok(inputBox && buttonBox && formBox);
            assert.ok(Math.abs(buttonBox.width - formBox.width) < 1, `button ${buttonBox.width} px of ${formBox.width}`);
            assert.ok(Math.abs(inputBox.width - formBox.width) < 1, `input ${inputBox.width} px of ${formBox.width}`);
            assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no horizontal overflow');

            // Typed as a person would on a phone: lower case, no dash.
            await input.fill(code.replace('-', '').toLowerCase());
            await button.click();
            await page.waitForLoadState('load');
            assert.equal(await heading(page), 'Connect your GitHub account');
            assert.equal(page.url(), `${stack.publicUrl}/activate`, 'no link secret in the phone’s address bar');
            await page.getByRole('button', { name: 'Continue to GitHub' }).click();
            await page.waitForURL((u) => u.origin === stack.github.webUrl && u.pathname === '/login/oauth/authorize');
            await page.getByLabel('Sign in as').fill('ivy-gh');
            await page.getByRole('button', { name: 'Authorize' }).click();
            await page.waitForURL((u) => u.pathname === '/connect/github/callback');
            assert.equal(await heading(page), 'Connected as @ivy-gh');
            const text = squash(await page.locator('body').innerText());
            assert.match(text, new RegExp(`Go back to ${clientName ?? 'your AI assistant'} and ask again`));
            await page.screenshot({ path: join(SHOTS, 'activate-connected-phone.png'), fullPage: true });
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
        assert.equal(result.isError, undefined, resultText(result));
        assert.match(resultText(result), /Created issue #\d+ in octo-org\/hello as @ivy-gh/);
        assert.equal(stack.github.issues.length, issuesBefore + 1);
      } finally {
        await client.close();
      }
    } finally {
      await Promise.allSettled([desk.close(), phone.close()]);
    }
  });
});
