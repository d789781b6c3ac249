// Issue 22's first "Done when" example end to end with the REAL approval gate: "only members of
// `maintainers` may call github_mcp_delete_repository, and another maintainer must approve it",
// written in PROVIDERS_FILE as an operator would. A maintainer's call answers input_required with
// the status page; another maintainer approves on /approvals/<id> in a signed-in browser; the held
// repeat runs the call exactly once; a second run, other arguments, another user or a denial each
// need their own decision. Real parts: the test IdP (groups in access and ID tokens), the GitHub
// stand-in, an SDK-built upstream behind the gateway, SQLite.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { connectGitHub, providersFile, standInVerifier } from './support/gateway.js';
import { Browser, parseForms, textOf } from './support/browser.js';
import { envelope, rawCall, resultText } from './support/mcp.js';
import { signIn, startStack, type Stack } from './support/stack.js';
import { MAINTAINERS_DELETE_RULES } from './support/policy.js';
import { startUpstreamServer, type UpstreamServer } from './support/upstream-server.js';

const POLICY = {
  default: 'allow',
  rules: [...MAINTAINERS_DELETE_RULES],
};

const TOOLS = [
  {
    name: 'delete_repository',
    description: 'Deletes a repository',
    inputSchema: { type: 'object', properties: { repo: { type: 'string' } } },
    annotations: { destructiveHint: true },
  },
];

describe('an approval bound to the call, end to end with the real gate and pages', () => {
  let stack: Stack;
  let upstream: UpstreamServer;
  let file: { path: string; remove(): void };

  before(async () => {
    upstream = await startUpstreamServer({ era: 'modern', verify: standInVerifier(() => stack.github), tools: TOOLS as never });
    file = providersFile({
      upstreams: [{ id: 'github', url: upstream.url, provider: 'github', toolPrefix: 'github_mcp_' }],
      policy: POLICY,
    });
    stack = await startStack({
      holdSeconds: 1,
      idpAccountClaims: (id) => ({ groups: id.startsWith('maint') ? ['maintainers'] : ['eng'] }),
      idpProfileClaims: ['groups'],
      env: { PROVIDERS_FILE: file.path },
    });
    await connectGitHub(stack, 'maint-mia', 'octocat');
    await connectGitHub(stack, 'maint-max', 'monalisa');
  });
  after(async () => {
    await stack?.close();
    await upstream?.close();
    file?.remove();
  });

  const tokenOf = (sub: string) =>
    stack.idp.mintAccessToken({ sub, claims: { groups: sub.startsWith('maint') ? ['maintainers'] : ['eng'] } });
  const call = async (sub: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    rawCall(stack.mcpUrl, await tokenOf(sub), {
      method: 'tools/call',
      params: { name: 'github_mcp_delete_repository', arguments: args, _meta: envelope(), ...extra },
    });
  const deleted = () => upstream.calls('delete_repository').length;

  /** Asks; returns the request id, the status URL and the state the repeat carries. */
  async function ask(sub: string, args: Record<string, unknown>) {
    const res = await call(sub, args);
    assert.equal(res.json.result?.resultType, 'input_required', res.text);
    const url = String(res.json.result.inputRequests.approval.params.url);
    assert.ok(url.startsWith(`${stack.publicUrl}/approvals/`), url);
    return { url, id: url.slice(url.lastIndexOf('/') + 1), requestState: res.json.result.requestState as string };
  }

  async function decide(approver: string, url: string, decision: 'approve' | 'deny', reason = '') {
    const browser = new Browser();
    await signIn(browser, stack, approver);
    const page = await browser.open(url);
    assert.equal(page.status, 200, page.html);
    return browser.submit(page, { button: decision, ...(reason ? { fields: { reason } } : {}), match: /approvals/ });
  }

  const repeat = (sub: string, args: Record<string, unknown>, requestState: string) =>
    call(sub, args, { requestState, inputResponses: { approval: { action: 'accept' } } });

  it('someone outside maintainers is refused outright with the rule’s reason', async () => {
    await connectGitHub(stack, 'erin', 'hubot');
    const before = deleted();
    const res = await call('erin', { repo: 'widgets' });
    assert.equal(res.json.result?.isError, true, res.text);
    assert.equal(resultText(res.json.result), 'Only maintainers may delete repositories.');
    assert.equal(deleted(), before);
  });

  it('a maintainer’s call waits for another maintainer; approved on the page, the repeat runs it once', async () => {
    const before = deleted();
    const asked = await ask('maint-mia', { repo: 'old' });
    assert.equal(deleted(), before, 'nothing runs before the decision');

    // The requester cannot approve their own call (selfApproval defaults to false).
    const mia = new Browser();
    await signIn(mia, stack, 'maint-mia');
    const own = await mia.open(asked.url);
    assert.equal(own.status, 200);
    assert.equal(parseForms(own.html).filter((f) => f.action === `/approvals/${asked.id}`).length, 0, 'no decision form for the requester');

    // A repeat before the decision is held, then answered with the same request.
    const early = await repeat('maint-mia', { repo: 'old' }, asked.requestState);
    assert.equal(early.json.result?.resultType, 'input_required', early.text);
    assert.equal(early.json.result.inputRequests.approval.params.url, asked.url, 'the same request, not a new one');

    const decided = await decide('maint-max', asked.url, 'approve');
    assert.match(textOf(decided.html), /Approved/);

    const ran = await repeat('maint-mia', { repo: 'old' }, asked.requestState);
    assert.notEqual(ran.json.result?.resultType, 'input_required', ran.text);
    assert.notEqual(ran.json.result?.isError, true, ran.text);
    assert.equal(deleted(), before + 1, 'forwarded once');

    // Exactly once: the same call again needs a new approval.
    const again = await call('maint-mia', { repo: 'old' });
    assert.equal(again.json.result?.resultType, 'input_required', again.text);
    assert.notEqual(again.json.result.inputRequests.approval.params.url, asked.url);
    assert.equal(deleted(), before + 1);
  });

  it('an approval covers only its call: other arguments and another user each get their own request', async () => {
    const asked = await ask('maint-mia', { repo: 'bound' });
    await decide('maint-max', asked.url, 'approve');
    const before = deleted();

    const otherArgs = await call('maint-mia', { repo: 'bound-other' });
    assert.equal(otherArgs.json.result?.resultType, 'input_required', otherArgs.text);
    assert.notEqual(otherArgs.json.result.inputRequests.approval.params.url, asked.url);

    const otherUser = await call('maint-max', { repo: 'bound' });
    assert.equal(otherUser.json.result?.resultType, 'input_required', otherUser.text);
    assert.notEqual(otherUser.json.result.inputRequests.approval.params.url, asked.url);
    assert.equal(deleted(), before, 'neither ran');

    // The approved call itself still runs.
    const ran = await repeat('maint-mia', { repo: 'bound' }, asked.requestState);
    assert.notEqual(ran.json.result?.isError, true, ran.text);
    assert.equal(deleted(), before + 1);
  });

  it('a denial on the page reaches the assistant as a tool error with the approver’s reason, and nothing runs', async () => {
    const before = deleted();
    const asked = await ask('maint-mia', { repo: 'keep-me' });
    await decide('maint-max', asked.url, 'deny', 'we still need it');
    const res = await repeat('maint-mia', { repo: 'keep-me' }, asked.requestState);
    assert.equal(res.json.result?.isError, true, res.text);
    assert.match(resultText(res.json.result), /was not approved: we still need it/);
    assert.equal(deleted(), before);
  });
});
