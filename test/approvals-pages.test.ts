// The approval pages (/approvals, /approvals/:id) through the broker's own sign-in, with the
// cookie-keeping browser: who sees what (requester, approver, anyone else), the call shown in full
// and escaped, Approve / Deny with a reason as a CSRF-checked POST, a decided request closed to
// another decision, and a request made under another policy version said to no longer apply.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { ApprovalGates } from '../src/approvals/index.js';
import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import type { ApprovalRule, ApprovalSubject } from '../src/policy/types.js';
import { Browser, parseForms, textOf, type Page } from './support/browser.js';
import { providersFile } from './support/gateway.js';
import { SECOND_MAINTAINER_RULE } from './support/policy.js';
import { signIn } from './support/stack.js';
import { useStack } from './support/suite.js';

// The rule as an operator writes it (PROVIDERS_FILE `policy:`), compiled by the broker at start-up.
const RULE_ID = 'delete-needs-a-maintainer';
const policyFile = providersFile({ policy: { default: 'allow', rules: [{ ...SECOND_MAINTAINER_RULE, id: RULE_ID }] } });

describe('approval pages', () => {
  after(() => policyFile.remove());
  const stack = useStack({
    idpAccountClaims: (id) => ({ groups: id.startsWith('maint') ? ['maintainers'] : ['eng'] }),
    idpProfileClaims: ['groups'],
    env: { PROVIDERS_FILE: policyFile.path },
  });
  const policy = () => stack.broker.broker.toolDeps.policy!;
  const rule = (): ApprovalRule => policy().approvalRule(RULE_ID)!;
  const gates = (): ApprovalGates => stack.broker.broker.approvals;

  function subject(sub: string, args: unknown, policyVersion = policy().version): ApprovalSubject {
    return {
      requester: principalFromVerifiedClaims(stack.idp.issuer, sub, sub),
      requesterClaims: { name: `${sub} Requester`, email: `${sub}@example.com` },
      clientName: 'Claude <script>',
      tool: 'github_mcp_delete_repository',
      upstream: 'github',
      args,
      argsDigest: JSON.stringify(args),
      provider: 'github',
      account: 'octocat',
      policyVersion,
      serviceId: '',
    };
  }

  async function ask(sub: string, args: unknown = { owner: 'acme', repo: 'widgets' }): Promise<string> {
    return (await gates().check(subject(sub, args), rule(), 0)).requestId;
  }

  async function signedIn(user: string): Promise<Browser> {
    const browser = new Browser();
    await signIn(browser, stack, user);
    return browser;
  }

  const open = (browser: Browser, id: string): Promise<Page> => browser.open(`${stack.publicUrl}/approvals/${encodeURIComponent(id)}`);

  it('sends a browser that is not signed in to sign in, and back to the request', async () => {
    const id = await ask('rita');
    const res = await new Browser().request(`${stack.publicUrl}/approvals/${id}`);
    assert.equal(res.status, 303);
    assert.equal(res.headers.get('location'), `/auth/login?returnTo=${encodeURIComponent(`/approvals/${id}`)}`);
  });

  it('shows an approver the exact call: requester, assistant, tool, account and every argument, escaped and unabridged', async () => {
    const long = 'x'.repeat(5000);
    const id = await ask('rita', { owner: 'acme', repo: '<img src=x onerror=alert(1)>', note: long, nested: { list: [1, 2, 3] } });
    const page = await open(await signedIn('maint-mia'), id);
    assert.equal(page.status, 200);
    const text = textOf(page.html);
    for (const shown of [
      'rita Requester',
      'rita@example.com',
      'Claude <script>',
      'github_mcp_delete_repository',
      '@octocat',
      'delete-needs-a-maintainer',
    ])
      assert.ok(text.includes(shown), `shows ${shown}`);
    assert.ok(page.html.includes(long), 'the long value in full');
    assert.ok(page.html.includes('&lt;img src=x onerror=alert(1)&gt;'), 'escaped');
    assert.ok(!page.html.includes('<img src=x'), 'never as markup');
    assert.ok(!page.html.includes('Claude <script>'), 'the client name escaped too');
    assert.match(page.html, /&#34;nested&#34;: \{\n\s+&#34;list&#34;: \[/, 'pretty JSON');
    const form = parseForms(page.html).find((f) => f.action === `/approvals/${id}`);
    assert.ok(form && form.fields.csrf, 'a decision form with a CSRF token');
    assert.deepEqual(
      form.buttons.map((b) => b.value),
      ['approve', 'deny'],
    );
  });

  it('gives anyone but the requester and the approvers the page of a missing id', async () => {
    const id = await ask('rita');
    const eve = await signedIn('eve');
    const theirs = await open(eve, id);
    const missing = await open(eve, 'apr_does-not-exist');
    assert.equal(theirs.status, 404);
    assert.equal(missing.status, 404);
    assert.equal(textOf(theirs.html).replace(/Signed in as \S+/, ''), textOf(missing.html).replace(/Signed in as \S+/, ''));
    assert.ok(!theirs.html.includes('widgets'));
    const list = await eve.open(`${stack.publicUrl}/approvals`);
    assert.ok(!list.html.includes(id), 'not listed for them either');
  });

  it('refuses a decision without the CSRF token, and changes nothing on GET', async () => {
    const id = await ask('rita', { repo: 'csrf-case' });
    const mia = await signedIn('maint-mia');
    await open(mia, id);
    const forged = await mia.request(`${stack.publicUrl}/approvals/${id}`, {
      method: 'POST',
      body: new URLSearchParams({ decision: 'approve' }),
      headers: { origin: stack.publicUrl },
    });
    assert.equal(forged.status, 403);
    const other = await mia.request(`${stack.publicUrl}/approvals/${id}?decision=approve`);
    assert.equal(other.status, 200);
    assert.equal((await stack.broker.broker.store.approvals.byId(id))?.status, 'pending');
  });

  it('approves with the form, shows the requester the decision, and refuses a second decision', async () => {
    const id = await ask('rita', { repo: 'approve-case' });
    const mia = await signedIn('maint-mia');
    const decided = await mia.submit(await open(mia, id), { button: 'approve', match: /approvals/ });
    assert.equal(decided.status, 200);
    assert.match(textOf(decided.html), /Approved/);
    assert.equal(parseForms(decided.html).filter((f) => f.action.startsWith('/approvals/')).length, 0, 'no form once decided');

    const rita = await signedIn('rita');
    const status = await open(rita, id);
    assert.equal(status.status, 200);
    assert.match(textOf(status.html), /Approved/);
    assert.match(textOf(status.html), /maint-mia approved/);
    assert.equal(parseForms(status.html).filter((f) => f.action.startsWith('/approvals/')).length, 0, 'the requester cannot decide it');

    const max = await signedIn('maint-max');
    const page = await open(max, id);
    const csrf = parseForms(page.html).find((f) => f.action === '/auth/logout')!.fields.csrf!;
    const again = await max.request(`${stack.publicUrl}/approvals/${id}`, {
      method: 'POST',
      body: new URLSearchParams({ csrf, decision: 'deny', reason: 'late' }),
      headers: { origin: stack.publicUrl },
    });
    assert.equal(again.status, 409, 'a decided request cannot be decided again');
    assert.deepEqual(await gates().check(subject('rita', { repo: 'approve-case' }), rule(), 0), { kind: 'approved', requestId: id });
  });

  it('denies with a reason the requester sees; the requester cannot decide their own call', async () => {
    const id = await ask('rita', { repo: 'deny-case' });
    const rita = await signedIn('rita');
    const own = await open(rita, id);
    const csrf = parseForms(own.html).find((f) => f.action === '/auth/logout')!.fields.csrf!;
    const self = await rita.request(`${stack.publicUrl}/approvals/${id}`, {
      method: 'POST',
      body: new URLSearchParams({ csrf, decision: 'approve' }),
      headers: { origin: stack.publicUrl },
    });
    assert.equal(self.status, 404, 'no selfApproval: the requester is not an approver');

    const mia = await signedIn('maint-mia');
    const listed = await mia.open(`${stack.publicUrl}/approvals`);
    assert.ok(listed.html.includes(`/approvals/${id}`), 'listed for the approver');
    await mia.submit(await open(mia, id), { button: 'deny', match: /approvals/, fields: { reason: 'Not during the <b>freeze</b>.' } });
    const status = await open(rita, id);
    assert.match(textOf(status.html), /Denied: Not during the <b>freeze<\/b>\./);
    assert.ok(status.html.includes('&lt;b&gt;freeze'), 'the reason is escaped');
    const mine = await rita.open(`${stack.publicUrl}/approvals`);
    assert.ok(mine.html.includes(`/approvals/${id}`), 'listed among the requester’s own');
  });

  it('tells the requester a request made under another policy version no longer applies, and hides it from approvers', async () => {
    const id = (await gates().check(subject('rita', { repo: 'stale' }, 'v0'), rule(), 0)).requestId;
    const status = await open(await signedIn('rita'), id);
    assert.equal(status.status, 200);
    assert.match(textOf(status.html), /no longer applies/);
    assert.equal((await open(await signedIn('maint-mia'), id)).status, 404);
  });
});
