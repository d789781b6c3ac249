// /activate and the 8-character code of every connect link (src/connect/activate.ts,
// src/connections/links.ts). The code's form and derivation against a real SQLite store; the page
// through the real stack (IdP, GitHub stand-in, broker on loopback) with a cookie-keeping browser,
// each case from its own client address (X-Forwarded-For through one trusted proxy hop), since the
// address limit counts every try.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import { ACTIVATE_TRIES, ACTIVATE_WINDOW_MS, INVALID_CODE } from '../src/connect/activate.js';
import { ACTIVATION_ALPHABET, ACTIVATION_CODE_LENGTH, ConnectLinks, normalizeActivationCode } from '../src/connections/links.js';
import { openSqliteStore } from '../src/store/index.js';
import { Browser, formSubmission, textOf, type Page } from './support/browser.js';
import { envelope, rawCall } from './support/mcp.js';
import { writeDb } from './support/seed.js';
import type { Stack } from './support/stack.js';
import { useStack } from './support/suite.js';

const CODE = /^[2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4}$/;
const sha256Hex = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');

describe('activation codes (ConnectLinks)', () => {
  function withLinks(run: (links: ConnectLinks, store: ReturnType<typeof openSqliteStore>) => Promise<void>) {
    return async () => {
      const dir = mkdtempSync(join(tmpdir(), 'activate-'));
      const store = openSqliteStore(join(dir, 'broker.db'));
      try {
        await run(new ConnectLinks(store, new URL('https://broker.example.com/'), randomBytes(32), 600), store);
      } finally {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      }
    };
  }
  const alice = principalFromVerifiedClaims('https://idp.example.com', 'alice');
  const bob = principalFromVerifiedClaims('https://idp.example.com', 'bob');

  it('the alphabet has no 0/O, 1/I/L; a code is two groups of four of it', () => {
    assert.equal(ACTIVATION_ALPHABET.length, 31);
    assert.equal(new Set(ACTIVATION_ALPHABET).size, 31);
    for (const ambiguous of '01OIL') assert.ok(!ACTIVATION_ALPHABET.includes(ambiguous), ambiguous);
    assert.equal(ACTIVATION_CODE_LENGTH, 8);
  });

  it(
    'is derived from the pending id: the same on every repeat and in every instance, different for every id',
    withLinks(async (links, store) => {
      const first = await links.create(alice, 'github', 'Claude Code');
      const code = links.activationCode(first);
      assert.match(code, CODE);
      const again = await links.create(alice, 'github', 'Claude Code');
      assert.equal(again.id, first.id, 'a repeat finds the same open link');
      assert.equal(links.activationCode(again), code, 'and shows the same code');
      const codes = new Set([code]);
      for (let i = 0; i < 200; i++) codes.add(links.activationCode({ id: `pc-${i}` }));
      assert.equal(codes.size, 201, 'another id, another code');
      for (const c of codes) assert.match(c, CODE);
      // Another broker secret: other codes for the same ids.
      const other = new ConnectLinks(store, new URL('https://broker.example.com/'), randomBytes(32), 600);
      assert.notEqual(other.activationCode(first), code);
      assert.equal(links.activateUrl(), 'https://broker.example.com/activate');
    }),
  );

  it(
    'stores only a keyed hash of the code, never the code in any spelling',
    withLinks(async (links) => {
      const pending = await links.create(alice, 'github', 'Claude Code');
      const code = links.activationCode(pending);
      const stored = JSON.stringify(pending);
      for (const spelling of [code, code.replace('-', ''), code.toLowerCase(), code.replace('-', '').toLowerCase()])
        assert.ok(!stored.includes(spelling), `the row holds no ${spelling}`);
      assert.match(String(pending.activation_hash), /^[A-Za-z0-9_-]{43}$/, 'a MAC, not the code');
      assert.notEqual(pending.activation_hash, sha256Hex(code.replace('-', '')), 'not a plain hash a database copy could invert');
    }),
  );

  it(
    'accepts the code in any case, with or without the dash, with spaces around; refuses anything else',
    withLinks(async (links) => {
      const pending = await links.create(alice, 'github', 'Claude Code');
      const code = links.activationCode(pending);
      const bare = code.replace('-', '');
      for (const typed of [code, bare, bare.toLowerCase(), `  ${code.toLowerCase()}\t`, `${bare.slice(0, 4)} ${bare.slice(4)}`])
        assert.equal((await links.byActivationCode(typed))?.id, pending.id, JSON.stringify(typed));
      assert.equal(normalizeActivationCode(` ${code.toLowerCase()} `), bare);
      for (const wrong of [
        '',
        bare.slice(0, 7),
        `${bare}A`,
        `${bare.slice(0, 4)}--${bare.slice(4)}`,
        'OOOO-1111',
        'ABCD-EFGI',
        `${bare.slice(0, 2)}-${bare.slice(2)}`,
      ])
        assert.equal(await links.byActivationCode(wrong), undefined, JSON.stringify(wrong));
      // Another principal's code is found (the page answers it with the wrong-account page), once used by nobody.
      const bobs = await links.create(bob, 'github', 'Claude Code');
      assert.equal((await links.byActivationCode(links.activationCode(bobs)))?.subject, 'bob');
      assert.equal(await links.redeemActivationCode(pending), true);
      assert.equal(await links.redeemActivationCode(pending), false, 'once');
      assert.equal(await links.byActivationCode(code), undefined, 'a used code finds nothing');
    }),
  );

  it('2^40 codes are not guessable in practice at the limit of tries', () => {
    const codes = ACTIVATION_ALPHABET.length ** ACTIVATION_CODE_LENGTH;
    assert.ok(codes > 2 ** 39.5, `${codes} codes`);
    // A principal holds at most 20 open links (ConnectLinks' maxOpenPerUser); a guess can only ever
    // open one of the guesser's own. Trying at the limit without a pause for a whole year:
    const triesPerYear = (ACTIVATE_TRIES * (365 * 24 * 3_600_000)) / ACTIVATE_WINDOW_MS;
    const chance = (triesPerYear * 20) / codes;
    assert.ok(chance < 1e-3, `one principal hits one of its own open codes with chance ${chance} a year`);
    // And from one address against 10 000 codes open at once (whoever's: a hit shows only the wrong-account page):
    assert.ok((triesPerYear * 10_000) / codes < 0.2);
  });
});

describe('/activate through the stack', () => {
  // One trusted proxy hop, so each case tries from its own address (the address limit counts every try).
  const stack = useStack({ env: { TRUST_PROXY: '1' } });
  let nextAddress = 1;
  const address = () => `198.51.100.${nextAddress++}`;

  /** Calls a tool as `sub` from a client named `clientName`, and returns its connect link, pending row and code. */
  async function askForLink(s: Stack, sub: string, clientName = 'Claude Code') {
    const token = await s.token(sub);
    const meta = { ...envelope(), 'io.modelcontextprotocol/clientInfo': { name: clientName, version: '1.0.0' } };
    const res = await rawCall(s.mcpUrl, token, { method: 'tools/call', params: { name: 'github_whoami', arguments: {}, _meta: meta } });
    assert.equal(res.json?.result?.resultType, 'input_required', res.text);
    const url = res.json.result.inputRequests.connect_account.params.url as string;
    const handle = new URL(url).searchParams.get('req')!;
    const pending = (await s.broker.broker.store.pending.byLinkHash(sha256Hex(handle)))!;
    return { url, handle, pending, code: s.broker.broker.toolDeps.links.activationCode(pending) };
  }

  /** Opens /activate in `browser`, signing in as `user` on the way; returns the form. */
  async function activatePage(browser: Browser, user: string): Promise<Page> {
    let page = await browser.open(`${stack.publicUrl}/activate`);
    if (/Development sign-in/.test(page.html)) page = await browser.submit(page, { fields: { login: user } });
    assert.equal(page.status, 200, page.html);
    assert.equal(page.url, `${stack.publicUrl}/activate`, 'back on /activate after signing in');
    return page;
  }

  async function tryCode(browser: Browser, form: Page, code: string, from: string, fields: Record<string, string> = {}, headers = {}) {
    const { action, body } = formSubmission(form, { match: /\/activate$/, fields: { code, ...fields } });
    return browser.open(action, { method: 'POST', body, headers: { 'x-forwarded-for': from, ...headers } });
  }

  it('sends an anonymous browser to sign in and back; the form has one labelled input and a button', async () => {
    const browser = new Browser();
    const first = await browser.request(`${stack.publicUrl}/activate`);
    assert.equal(first.status, 303);
    assert.equal(first.headers.get('location'), '/auth/login?returnTo=%2Factivate');
    const form = await activatePage(browser, 'act-anna');
    assert.match(form.html, /<label for="code">Code<\/label>/);
    assert.match(form.html, /<input id="code" name="code" type="text"/);
    assert.match(form.html, /<form method="post" action="\/activate" class="code-form">[\s\S]*name="csrf" value="[^"]+"/);
  });

  it('a code of this person opens the link’s own consent page, once; connecting there says where to go back', async () => {
    const { handle, pending, code } = await askForLink(stack, 'act-alice', 'Claude Code');
    const browser = new Browser();
    const form = await activatePage(browser, 'act-alice');
    const from = address();
    const consent = await tryCode(browser, form, `  ${code.replace('-', '').toLowerCase()} `, from);
    assert.equal(consent.status, 200, consent.html);
    assert.match(textOf(consent.html), /Connect your GitHub.*account/);
    assert.match(consent.html, new RegExp(`name="handle" value="${handle}"`), 'the same consent form the link shows');
    assert.equal(consent.url, `${stack.publicUrl}/activate`, 'no link secret in any URL on this device');
    assert.ok(!consent.trail.some((u) => u.includes(handle)));

    const again = await tryCode(browser, await activatePage(browser, 'act-alice'), code, from);
    assert.equal(again.status, 400);
    assert.ok(textOf(again.html).includes(INVALID_CODE), 'a code that opened its page does not work again');

    const atGitHub = await browser.submit(consent, { button: 'allow' });
    const done = await browser.submit(atGitHub, { button: 'authorize', fields: { login: 'act-alice-gh' } });
    assert.equal(done.status, 200, done.html);
    assert.match(textOf(done.html), /Connected as @act-alice-gh/);
    assert.match(textOf(done.html), /Go back to Claude Code and ask again/);
    assert.equal((await stack.broker.broker.store.pending.byId(pending.id))?.status, 'completed');
  });

  it('the link itself keeps its own rules after its code was used, and its page says nothing of going back', async () => {
    const { url, code } = await askForLink(stack, 'act-lena', 'Cursor');
    const browser = new Browser();
    const form = await activatePage(browser, 'act-lena');
    assert.equal((await tryCode(browser, form, code, address())).status, 200);
    const viaLink = await browser.open(url);
    assert.equal(viaLink.status, 200, 'the link still opens its consent page');
    const atGitHub = await browser.submit(viaLink, { button: 'allow' });
    const done = await browser.submit(atGitHub, { button: 'authorize', fields: { login: 'act-lena-gh' } });
    assert.match(textOf(done.html), /Go back to Cursor and ask again/, 'a code opened this link: it was maybe another device');

    const plain = await askForLink(stack, 'act-otto', 'Cursor');
    const other = new Browser();
    let page = await other.open(plain.url);
    page = await other.submit(page, { fields: { login: 'act-otto' } });
    page = await other.submit(await other.submit(page, { button: 'allow' }), { button: 'authorize', fields: { login: 'act-otto-gh' } });
    assert.match(textOf(page.html), /Connected as @act-otto-gh/);
    assert.doesNotMatch(textOf(page.html), /Go back to/, 'opened by its link: the page says what it always said');
  });

  it('another person’s code: the wrong-account page, and the code stays usable for its owner', async () => {
    const { code, pending } = await askForLink(stack, 'act-owner');
    const intruder = new Browser();
    const wrong = await tryCode(intruder, await activatePage(intruder, 'act-intruder'), code, address());
    assert.equal(wrong.status, 403);
    assert.match(textOf(wrong.html), /This link is for a different account/);
    assert.match(wrong.html, /name="returnTo" value="\/activate"/, 'switching account comes back to the form, not to a link');
    assert.equal((await stack.broker.broker.store.pending.byId(pending.id))?.activated_at, null, 'nothing used');

    const owner = new Browser();
    const consent = await tryCode(owner, await activatePage(owner, 'act-owner'), code, address());
    assert.equal(consent.status, 200);
    assert.match(consent.html, /name="decision" value="allow"/);
  });

  it('unknown, expired, used and malformed codes get one neutral answer, the same for all', async () => {
    const browser = new Browser();
    const from = address();
    const answers: string[] = [];
    const neutral = async (code: string, what: string) => {
      const page = await tryCode(browser, await activatePage(browser, 'act-nina'), code, from);
      assert.equal(page.status, 400, what);
      const text = textOf(page.html);
      assert.ok(text.includes(INVALID_CODE), `${what}: ${text}`);
      answers.push(text);
    };
    const expired = await askForLink(stack, 'act-nina');
    assert.equal(writeDb(stack, 'UPDATE pending_connections SET expires_at = ? WHERE id = ?', Date.now() - 1000, expired.pending.id), 1);
    await neutral(expired.code, 'expired');
    const used = await askForLink(stack, 'act-nina', 'Other client');
    assert.equal((await tryCode(browser, await activatePage(browser, 'act-nina'), used.code, from)).status, 200);
    await neutral(used.code, 'used');
    const cancelled = await askForLink(stack, 'act-nina', 'Third client');
    await stack.broker.broker.store.pending.settle(cancelled.pending.id, 'cancelled');
    await neutral(cancelled.code, 'settled');
    await neutral('ZZZZ-ZZZZ', 'unknown');
    await neutral('not a code', 'malformed');
    assert.equal(new Set(answers).size, 1, 'no oracle: the same page for each');
  });

  it('refuses a form without its CSRF token or from another origin, and such a form spends no tries', async () => {
    const { code } = await askForLink(stack, 'act-cora');
    const browser = new Browser();
    const form = await activatePage(browser, 'act-cora');
    const from = address();
    for (let i = 0; i < ACTIVATE_TRIES + 2; i++) {
      const forged = await tryCode(browser, form, code, from, { csrf: 'forged' });
      assert.equal(forged.status, 403);
      assert.match(textOf(forged.html), /Form expired/);
      const crossSite = await tryCode(browser, form, code, from, {}, { origin: 'https://evil.example' });
      assert.equal(crossSite.status, 403);
    }
    const real = await tryCode(browser, form, code, from);
    assert.equal(real.status, 200, 'the refused forms counted nothing');
    assert.match(real.html, /name="decision" value="allow"/);
  });

  it(`holds the limit: ${ACTIVATE_TRIES} tries per principal and per address in ${ACTIVATE_WINDOW_MS / 60_000} minutes, the right code refused past it`, async () => {
    // Per principal: wrong tries from one address, then the right code from another.
    const mine = await askForLink(stack, 'act-pat');
    const pat = new Browser();
    const form = await activatePage(pat, 'act-pat');
    const first = address();
    for (let i = 0; i < ACTIVATE_TRIES; i++) assert.equal((await tryCode(pat, form, 'ZZZZ-ZZZ2', first)).status, 400, `try ${i + 1}`);
    const refused = await tryCode(pat, form, mine.code, address());
    assert.equal(refused.status, 429);
    assert.match(textOf(refused.html), /Too many tries/);
    assert.ok(Number(refused.headers.get('retry-after')) > 60, 'for the rest of a ten-minute window');
    assert.equal((await stack.broker.broker.store.pending.byId(mine.pending.id))?.activated_at, null, 'the code was not used');

    // Per address: one person's wrong tries, then another person's right code from the same address.
    const shared = address();
    const quinn = new Browser();
    const quinnForm = await activatePage(quinn, 'act-quinn');
    for (let i = 0; i < ACTIVATE_TRIES; i++) assert.equal((await tryCode(quinn, quinnForm, 'ZZZZ-ZZZ3', shared)).status, 400);
    const rita = await askForLink(stack, 'act-rita');
    const ritaBrowser = new Browser();
    const ritaForm = await activatePage(ritaBrowser, 'act-rita');
    assert.equal((await tryCode(ritaBrowser, ritaForm, rita.code, shared)).status, 429, 'the address is spent');
    assert.equal((await tryCode(ritaBrowser, ritaForm, rita.code, address())).status, 200, 'her own budget elsewhere is not');
  });
});
