// The approval pages in a real headless Chromium (Debian's /usr/bin/chromium through
// playwright-core, as test/system/pages.test.ts), as the requester and as an approver, at a desktop
// and a phone width: signed in through the IdP, the exact call shown without sideways scrolling
// (long argument values wrap), Approve with a reason, and the requester's page showing the
// decision. Screenshots go to PAGE_SCREENSHOTS_DIR when set (docs/screenshots/approval-*.png come
// from there), else to a temporary folder deleted at the end.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { ApprovalGates } from '../../src/approvals/index.js';
import { principalFromVerifiedClaims } from '../../src/auth/principal.js';
import { providersFile } from '../support/gateway.js';
import { SECOND_MAINTAINER_RULE } from '../support/policy.js';
import { startStack, type Stack } from '../support/stack.js';

const CHROMIUM = '/usr/bin/chromium';
const WIDTHS = [1280, 390] as const;
// The rule as an operator writes it (PROVIDERS_FILE `policy:`), compiled by the broker at start-up.
const RULE_ID = 'delete-needs-a-second-maintainer';
const policyFile = providersFile({ policy: { default: 'allow', rules: [{ ...SECOND_MAINTAINER_RULE, id: RULE_ID }] } });
const ARGS = {
  owner: 'octo-org',
  repo: 'hello-world',
  reason: 'Archived in 2024; superseded by octo-org/hello-universe. ' + 'A long note that must wrap on a phone. '.repeat(6),
  confirm: 'octo-org/hello-world',
};

interface Measure {
  viewport: number;
  scrollWidth: number;
  h1: string[];
  column: number;
  unlabelled: number;
  primaries: number[];
  fields: number[];
  argumentsWidth: number;
}

/** Runs in the page: what a person would notice, in one round trip. */
function measure(): Measure {
  const main = document.querySelector('main')!;
  const style = getComputedStyle(main);
  const column = main.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const controls = Array.from(document.querySelectorAll('textarea, input:not([type=hidden]), select')) as HTMLInputElement[];
  return {
    viewport: window.innerWidth,
    scrollWidth: Math.max(document.documentElement.scrollWidth, document.body.scrollWidth),
    h1: Array.from(document.querySelectorAll('h1')).map((h) => (h.textContent ?? '').trim()),
    column,
    unlabelled: controls.filter((el) => !(el.labels && el.labels.length > 0)).length,
    primaries: Array.from(main.querySelectorAll('.button.primary')).map((el) => el.getBoundingClientRect().width),
    fields: Array.from(main.querySelectorAll('textarea')).map((el) => el.getBoundingClientRect().width),
    argumentsWidth: document.querySelector('.arguments')?.getBoundingClientRect().width ?? 0,
  };
}

describe('approval pages in Chromium', () => {
  let stack: Stack;
  let browser: Browser;
  let shots: string;
  let temporary = false;
  const tabs = new Map<string, Page>();

  before(async () => {
    [stack, browser] = await Promise.all([
      startStack({
        idpAccountClaims: (id) => ({ groups: id.startsWith('maint') ? ['maintainers'] : ['eng'] }),
        idpProfileClaims: ['groups'],
        env: { PROVIDERS_FILE: policyFile.path },
      }),
      chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
      }),
    ]);
    if (process.env.PAGE_SCREENSHOTS_DIR) {
      shots = resolve(process.env.PAGE_SCREENSHOTS_DIR);
      mkdirSync(shots, { recursive: true });
    } else {
      shots = mkdtempSync(join(tmpdir(), 'approval-screenshots-'));
      temporary = true;
    }
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    await stack?.close();
    if (temporary) rmSync(shots, { recursive: true, force: true });
    policyFile.remove();
  });

  async function tabOf(who: string): Promise<Page> {
    let page = tabs.get(who);
    if (!page) {
      const context = await browser.newContext({ viewport: { width: WIDTHS[0], height: 900 } });
      context.setDefaultTimeout(10_000);
      await context.addInitScript('globalThis.__name = globalThis.__name || ((f) => f);');
      page = await context.newPage();
      tabs.set(who, page);
    }
    return page;
  }

  /** Opens `path` as `who`, signing in at the IdP on the way if asked. */
  async function openAs(who: string, path: string): Promise<Page> {
    const page = await tabOf(who);
    await page.goto(`${stack.publicUrl}${path}`);
    if (new URL(page.url()).origin === stack.idp.issuer) {
      await page.getByLabel('User name').fill(who);
      await Promise.all([
        page.waitForURL((u) => u.origin === stack.publicUrl && u.pathname === path),
        page.getByRole('button', { name: 'Sign in', exact: true }).click(),
      ]);
    }
    return page;
  }

  async function look(page: Page, name: string, heading: string): Promise<void> {
    for (const width of WIDTHS) {
      await page.setViewportSize({ width, height: 900 });
      const m = await page.evaluate(measure);
      const where = `${name} at ${width} px`;
      assert.ok(m.scrollWidth <= width, `${where}: no sideways scrolling (${m.scrollWidth} px)`);
      assert.deepEqual(m.h1, [heading], `${where}: one heading`);
      assert.equal(m.unlabelled, 0, `${where}: every field has a label`);
      assert.ok(m.argumentsWidth <= m.column + 1, `${where}: the arguments fit the column (${m.argumentsWidth} of ${m.column})`);
      for (const f of m.fields) assert.ok(f >= 0.9 * m.column, `${where}: the reason spans the column`);
      if (width < 480) for (const p of m.primaries) assert.ok(p >= 0.9 * m.column, `${where}: the primary action is as wide as the column`);
      await page.screenshot({ path: join(shots, `${name}-${width}.png`), fullPage: true });
    }
    await page.setViewportSize({ width: WIDTHS[0], height: 900 });
  }

  it('shows the approver the exact call and the requester its status, then the decision, at 1280 and 390 px', async () => {
    const gates: ApprovalGates = stack.broker.broker.approvals;
    const asked = await gates.check(
      {
        requester: principalFromVerifiedClaims(stack.idp.issuer, 'rita', 'rita'),
        requesterClaims: { name: 'Rita Requester', email: 'rita@example.com' },
        clientName: 'Claude Code',
        tool: 'github_mcp_delete_repository',
        upstream: 'github',
        args: ARGS,
        argsDigest: 'digest',
        provider: 'github',
        account: 'rita-gh',
        policyVersion: stack.broker.broker.toolDeps.policy!.version,
        serviceId: '',
      },
      stack.broker.broker.toolDeps.policy!.approvalRule(RULE_ID)!,
      0,
    );
    assert.equal(asked.kind, 'pending');
    const path = `/approvals/${asked.requestId}`;

    const requester = await openAs('rita', path);
    await look(requester, 'approval-requester-pending', 'Your call needs approval');
    assert.equal(await requester.getByRole('button', { name: 'Approve' }).count(), 0, 'the requester cannot approve');

    const approver = await openAs('maint-mia', path);
    await look(approver, 'approval-approver', 'Approve this call?');
    const shown = await approver.locator('.arguments').innerText();
    assert.deepEqual(JSON.parse(shown), ARGS, 'every argument, in full');
    await approver.getByLabel(/Reason/).fill('Checked with the owners: archived for a year.');
    await Promise.all([approver.waitForURL((u) => u.pathname === path), approver.getByRole('button', { name: 'Approve' }).click()]);
    await look(approver, 'approval-approver-decided', 'Approval request');
    assert.match(await approver.locator('main').innerText(), /maint-mia approved/);

    await requester.reload();
    await look(requester, 'approval-requester-approved', 'Your call needs approval');
    assert.match(await requester.locator('.status').first().innerText(), /Approved/);

    const list = await openAs('maint-mia', '/approvals');
    await look(list, 'approvals-list', 'Approvals');
  });
});
