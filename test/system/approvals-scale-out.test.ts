// Issue 22's approval across instances: three broker processes on one PostgreSQL database, the
// request made on one, approved on another, the held repeat released on a third. Real parts: the
// test IdP (groups in access and ID tokens; the approver signs in through it), the GitHub stand-in,
// an SDK-built upstream behind the gateway, PostgreSQL, and `src/main.ts` in three processes that
// share only the database and the secrets. PUBLIC_URL is one address; the browser is pinned to
// broker B the way a load balancer would route it, and the MCP calls go to A and C directly.
//
// The policy is the first "Done when" example as an operator writes it: only maintainers may call
// github_mcp_delete_repository, and another maintainer must approve it (test/support/policy.ts).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { textOf } from '../support/browser.js';
import { eventually, logged } from '../support/eventually.js';
import { providersFile, standInVerifier } from '../support/gateway.js';
import { freePort } from '../support/idp.js';
import { envelope, rawCall } from '../support/mcp.js';
import { PinnedBrowser, startMultiStack, type MultiStack, type SpawnedBroker } from '../support/multi.js';
import { MAINTAINERS_DELETE_RULES } from '../support/policy.js';
import { startPostgres, type PgServer } from '../support/postgres.js';
import { seedConnection } from '../support/seed.js';
import { startUpstreamServer, type UpstreamServer } from '../support/upstream-server.js';

/** How long a repeat is held (REPEAT_HOLD_SECONDS): the release must come well before it runs out. */
const HOLD_SECONDS = 8;

const TOOLS = [
  {
    name: 'delete_repository',
    description: 'Deletes a repository',
    inputSchema: { type: 'object', properties: { repo: { type: 'string' } } },
    annotations: { destructiveHint: true },
  },
];

const groupsOf = (sub: string) => (sub.startsWith('maint') ? ['maintainers'] : ['eng']);

describe('an approval across three instances on PostgreSQL: asked on A, approved on B, the held repeat released on C', () => {
  let server: PgServer;
  let databaseUrl: string;
  let upstream: UpstreamServer;
  let file: { path: string; remove(): void };
  let stack: MultiStack;
  let a: SpawnedBroker;
  let b: SpawnedBroker;
  let c: SpawnedBroker;

  before(async () => {
    server = await startPostgres();
    databaseUrl = await server.createDatabase();
    upstream = await startUpstreamServer({ era: 'modern', verify: standInVerifier(() => stack.github), tools: TOOLS as never });
    file = providersFile({
      upstreams: [{ id: 'github', url: upstream.url, provider: 'github', toolPrefix: 'github_mcp_' }],
      policy: { default: 'allow', rules: [...MAINTAINERS_DELETE_RULES] },
    });
    stack = await startMultiStack({
      holdSeconds: HOLD_SECONDS,
      env: { DATABASE_URL: databaseUrl, PROVIDERS_FILE: file.path },
      idpAccountClaims: (id) => ({ groups: groupsOf(id) }),
      idpProfileClaims: ['groups'],
    });
    const ports = new Set<number>();
    while (ports.size < 3) {
      const port = await freePort();
      if (port !== stack.portA) ports.add(port);
    }
    // All three start (and migrate the empty database) at once; allSettled so that a failed start
    // leaves no process unnoticed by `stack.close()`.
    const spawned = await Promise.allSettled([...ports].map((port) => stack.spawn(port)));
    const failed = spawned.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    [a, b, c] = spawned.map((r) => (r as PromiseFulfilledResult<SpawnedBroker>).value) as [SpawnedBroker, SpawnedBroker, SpawnedBroker];
    // The requester's GitHub, linked as a finished connect flow would (in the shared database).
    const issued = stack.github.issueTokenFor('octocat', { scopes: ['repo'] });
    await seedConnection(
      stack.envFor(),
      'maint-mia',
      'github',
      { id: String(stack.github.users.get('octocat')!.id), login: 'octocat' },
      { accessToken: issued.accessToken, tokenType: 'bearer', scopes: issued.scopes },
    );
  });
  after(async () => {
    await stack?.close();
    await upstream?.close();
    file?.remove();
    await server?.destroy();
  });

  const tokenOf = (sub: string) => stack.idp.mintAccessToken({ sub, claims: { groups: groupsOf(sub) } });
  /** tools/call of github_mcp_delete_repository on one broker, as maint-mia; `extra` carries a repeat's state and answer. */
  const call = async (broker: SpawnedBroker, args: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    rawCall(`${broker.url}/mcp`, await tokenOf('maint-mia'), {
      method: 'tools/call',
      params: { name: 'github_mcp_delete_repository', arguments: args, _meta: envelope(), ...extra },
    });
  const repeat = (broker: SpawnedBroker, args: Record<string, unknown>, requestState: string) =>
    call(broker, args, { requestState, inputResponses: { approval: { action: 'accept' } } });
  const deleted = () => upstream.calls('delete_repository').length;

  async function approvalRows(): Promise<Array<{ id: string; status: string }>> {
    const client = new pg.Client({ connectionString: databaseUrl });
    client.on('error', () => {});
    await client.connect();
    try {
      return (await client.query<{ id: string; status: string }>('SELECT id, status FROM approval_requests ORDER BY created_at')).rows;
    } finally {
      await client.end();
    }
  }

  it(
    'runs the approved call exactly once on C, released by B’s decision; the same approval does not run it again',
    { timeout: 90_000 },
    async () => {
      // A: the maintainer's call asks for approval, with the status page on PUBLIC_URL.
      const asked = await call(a, { repo: 'old' });
      assert.equal(asked.json.result?.resultType, 'input_required', asked.text);
      const statusUrl = String(asked.json.result.inputRequests.approval.params.url);
      assert.ok(statusUrl.startsWith(`${stack.publicUrl}/approvals/apr_`), statusUrl);
      const requestId = statusUrl.slice(statusUrl.lastIndexOf('/') + 1);
      const requestState = String(asked.json.result.requestState);
      assert.equal(deleted(), 0, 'nothing runs before the decision');

      // B: another maintainer signs in through the IdP and opens the request's page.
      const approver = new PinnedBrowser(stack.publicUrl, b.url);
      let page = await approver.open(`${stack.publicUrl}/auth/login?returnTo=%2Fapprovals`);
      if (/Development sign-in/.test(page.html)) page = await approver.submit(page, { fields: { login: 'maint-max' } });
      assert.equal(page.status, 200, textOf(page.html));
      page = await approver.open(statusUrl);
      assert.equal(page.status, 200, textOf(page.html));
      assert.match(textOf(page.html), /github_mcp_delete_repository/);

      // C: the repeat, carrying A's state, is held there on the pending request.
      const heldBefore = logged(c.output(), 'approval_held');
      let answered = false;
      const held = repeat(c, { repo: 'old' }, requestState).finally(() => (answered = true));
      await eventually('C to hold the repeat', () => logged(c.output(), 'approval_held') > heldBefore);
      assert.equal(answered, false);

      // B: approve (POST with the page's CSRF token).
      const decided = await approver.submit(page, { button: 'approve', match: /approvals/ });
      const decidedAt = Date.now();
      assert.match(textOf(decided.html), /Approved/);
      const onB = approver.requests.filter((r) => r.startsWith('POST ') && r.includes(`/approvals/${requestId}`));
      assert.ok(onB.length === 1 && onB[0]!.includes(b.url), `the decision was posted to B: ${JSON.stringify(approver.requests)}`);

      // C: released by the decision made on B (pushed through PostgreSQL), long before the hold ends; runs once.
      const ran = await held;
      const releasedMs = Date.now() - decidedAt;
      assert.notEqual(ran.json.result?.resultType, 'input_required', ran.text);
      assert.notEqual(ran.json.result?.isError, true, ran.text);
      assert.ok(releasedMs < (HOLD_SECONDS * 1000) / 2, `released ${releasedMs} ms after the decision (hold ${HOLD_SECONDS} s)`);
      assert.equal(deleted(), 1, 'forwarded exactly once');
      assert.deepEqual(
        (await approvalRows()).map((r) => [r.id, r.status]),
        [[requestId, 'used']],
      );

      // The same approval again (the same state, on A): not run; a new request is opened and asked for.
      const again = await repeat(a, { repo: 'old' }, requestState);
      assert.equal(again.json.result?.resultType, 'input_required', again.text);
      const newUrl = String(again.json.result.inputRequests.approval.params.url);
      assert.notEqual(newUrl, statusUrl, 'a new request, not the used one');
      assert.equal(deleted(), 1, 'still once');
      const rows = await approvalRows();
      assert.deepEqual(
        rows.map((r) => [r.id, r.status]),
        [
          [requestId, 'used'],
          [newUrl.slice(newUrl.lastIndexOf('/') + 1), 'pending'],
        ],
      );
    },
  );
});
