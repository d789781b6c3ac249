// The sandbox GitHub's MCP endpoint (src/dev/sandbox-github/mcp/): a stand-in for GitHub's remote
// MCP server over the sandbox store, driven with the official SDK client in 2026-07-28 mode (and
// once in 2025-11-25 mode), with tokens from the sandbox's own OAuth endpoints or its store; then
// once more as `npm run dev` serves it, on the broker's own server.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import express from 'express';
import { SANDBOX_GITHUB_CLIENT_ID, type DevBroker } from '../src/dev/dev-broker.js';
import { authorizeInBrowser, InMemoryOAuthClient } from '../src/dev/oauth-client.js';
import { loadOrCreateDevSecrets } from '../src/dev/secrets.js';
import { createLogger } from '../src/log.js';
import { parse as parseYaml } from 'yaml';
import { createSandboxGitHub, type SandboxClient, type SandboxFaults, type SandboxGitHub } from '../src/dev/sandbox-github/index.js';
import { sandboxGitHubUpstream, sandboxGitHubUpstreamYaml } from '../src/dev/sandbox-github/upstream.js';
import { openDevTables, type SandboxGitHubStore } from '../src/dev/store/index.js';
import { M as MCP_WORDS } from '../src/mcp/messages.js';
import { openSqliteStore, type Store } from '../src/store/index.js';
import { authorizeQuery, formFields } from './support/authorize-form.js';
import { Browser } from './support/browser.js';
import { envelope, legacyClient, modernClient, rawCall, resultText, type ElicitAnswer } from './support/mcp.js';
import { listenLoopback } from './support/listen.js';
import { startDevBrokerOnFreePort } from './support/dev-broker.js';

const MOUNT = '/sandbox/github';
const REDIRECT = 'http://127.0.0.1:1/callback';
/** The broker's own tools (src/mcp/server.ts), which an upstream's prefixed names must not repeat. */
const BUILT_IN_TOOLS = ['github_create_issue', 'github_whoami', 'list_connections', 'disconnect_account', 'connect_account'];
const OAUTH_APP = { clientId: 'Iv1.mcp-oauth-app', clientSecret: 'secret-oauth-0123456789' } satisfies SandboxClient;
const GITHUB_APP = { clientId: 'Iv23.mcp-github-app', clientSecret: 'secret-app-0123456789', kind: 'github-app' } satisfies SandboxClient;

interface Sandbox {
  gh: SandboxGitHub;
  store: SandboxGitHubStore;
  faults: SandboxFaults;
  close(): Promise<void>;
}

/** Serves a sandbox the way `npm run dev` does, mounted under /sandbox/github of a larger app. */
async function startSandbox(dbPath: string, mcpStateKey?: string): Promise<Sandbox> {
  const database: Store = openSqliteStore(dbPath);
  const store = openDevTables(database).sandboxGitHub;
  const app = express();
  const listening = await listenLoopback(app);
  const faults: SandboxFaults = {};
  const gh = createSandboxGitHub({
    store,
    clients: [OAUTH_APP, GITHUB_APP],
    publicBase: `http://127.0.0.1:${listening.port}${MOUNT}`,
    faults,
    ...(mcpStateKey ? { mcpStateKey } : {}),
  });
  app.use(MOUNT, gh.router);
  return {
    gh,
    store,
    faults,
    close: async () => {
      await listening.close();
      await database.close();
    },
  };
}

/** A token from the sandbox's OAuth web flow at the OAuth App: authorize page as a browser, then the code exchange. */
async function webFlowToken(
  gh: Pick<SandboxGitHub, 'webUrl'>,
  login: string,
  scope: string,
  app: { clientId: string; clientSecret: string } = OAUTH_APP,
): Promise<string> {
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const page = await fetch(
    `${gh.webUrl}/login/oauth/authorize?${authorizeQuery({ clientId: app.clientId, redirectUri: REDIRECT, scope, challenge })}`,
  );
  const html = await page.text();
  const fields = formFields(html);
  fields.set('login', login);
  fields.set('decision', 'authorize');
  const action = /<form method="post" action="([^"]*)">/.exec(html)![1]!;
  const back = await fetch(new URL(action, gh.webUrl), { method: 'POST', body: fields, redirect: 'manual' });
  const code = new URL(back.headers.get('location')!).searchParams.get('code')!;
  const answer = await fetch(`${gh.webUrl}/login/oauth/access_token`, {
    method: 'POST',
    headers: { accept: 'application/json' },
    body: new URLSearchParams({ client_id: app.clientId, client_secret: app.clientSecret, code, code_verifier: verifier }),
  });
  const token = ((await answer.json()) as { access_token?: string }).access_token;
  assert.match(token ?? '', /^gho_/);
  return token!;
}

const json = (result: unknown): any => JSON.parse(resultText(result));
const call = (client: Client, name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args });

/** A raw 2026-07-28 tools/call, for wire-level assertions. */
const rawTool = (
  gh: SandboxGitHub,
  token: string | undefined,
  name: string,
  args: Record<string, unknown>,
  extra: Record<string, unknown> = {},
) => rawCall(gh.mcpUrl, token, { method: 'tools/call', params: { name, arguments: args, ...extra, _meta: envelope() } });

describe('the sandbox GitHub MCP endpoint', () => {
  let dir: string;
  let sb: Sandbox;
  let octocat: string; // OAuth App token with repo and delete_repo, from the web flow
  let hubot: string; // OAuth App token with repo, from the web flow
  let hubotAdmin: string; // OAuth App token with repo and delete_repo, from the store
  const clients: Client[] = [];
  const client = async (token: string, onForm?: (message: string, schema: unknown) => Promise<ElicitAnswer>) => {
    const c = await modernClient({ url: sb.gh.mcpUrl, token, ...(onForm ? { onForm } : {}) });
    clients.push(c);
    return c;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sandbox-github-mcp-'));
    sb = await startSandbox(join(dir, 'broker.db'));
    octocat = await webFlowToken(sb.gh, 'octocat', 'repo delete_repo');
    hubot = await webFlowToken(sb.gh, 'hubot', 'repo');
    hubotAdmin = sb.gh.issueToken(OAUTH_APP.clientId, 'hubot', { scopes: ['repo', 'delete_repo'] }).accessToken;
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await sb.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists get_me, list_issues, create_issue and delete_repository with GitHub’s argument names to a 2026-07-28 client', async () => {
    const c = await client(octocat);
    assert.equal(c.getProtocolEra(), 'modern');
    const { tools } = await c.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    assert.deepEqual([...byName.keys()].sort(), ['create_issue', 'delete_repository', 'get_me', 'list_issues']);
    const props = (name: string) => Object.keys((byName.get(name)!.inputSchema as { properties?: object }).properties ?? {}).sort();
    const required = (name: string) => [...((byName.get(name)!.inputSchema as { required?: string[] }).required ?? [])].sort();
    assert.deepEqual(props('get_me'), []);
    assert.deepEqual(props('list_issues'), ['after', 'direction', 'labels', 'orderBy', 'owner', 'perPage', 'repo', 'since', 'state']);
    assert.deepEqual(required('list_issues'), ['owner', 'repo']);
    assert.deepEqual(props('create_issue'), ['body', 'labels', 'owner', 'repo', 'title']);
    assert.deepEqual(required('create_issue'), ['owner', 'repo', 'title']);
    assert.deepEqual(props('delete_repository'), ['owner', 'repo']);
    assert.equal(byName.get('delete_repository')!.annotations?.destructiveHint, true);
    assert.equal(byName.get('get_me')!.annotations?.readOnlyHint, true);
  });

  it('answers get_me with the user whose token came in', async () => {
    const mine = json(await call(await client(octocat), 'get_me', {}));
    assert.equal(mine.login, 'octocat');
    assert.equal(mine.id, 583231);
    assert.equal(mine.profile_url, `${sb.gh.webUrl}/octocat`);
    assert.equal(mine.details.name, 'The Octocat');
    const theirs = json(await call(await client(hubot), 'get_me', {}));
    assert.deepEqual([theirs.login, theirs.id], ['hubot', 2]);
  });

  it('creates issues in the store as the token’s user and lists them, newest first, in pages', async () => {
    const c = await client(hubot);
    const created = [];
    for (const title of ['first', 'second', 'third'])
      created.push(json(await call(c, 'create_issue', { owner: 'acme', repo: 'widgets', title, body: `about ${title}`, labels: ['bug'] })));
    const stored = sb.store.listRepositoryIssues('acme', 'widgets');
    assert.deepEqual(
      stored.map((i) => [i.number, i.title, i.author, i.labels]),
      [
        [1, 'first', 'hubot', ['bug']],
        [2, 'second', 'hubot', ['bug']],
        [3, 'third', 'hubot', ['bug']],
      ],
    );
    assert.deepEqual(created[2], { id: String(stored[2]!.id), url: `${sb.gh.webUrl}/acme/widgets/issues/3` }, 'GitHub’s minimal answer');
    assert.equal((await fetch(created[2].url)).status, 200, 'the issue page exists');

    const page1 = json(await call(c, 'list_issues', { owner: 'acme', repo: 'widgets', perPage: 2 }));
    assert.deepEqual(
      page1.issues.map((i: { number: number }) => i.number),
      [3, 2],
    );
    assert.equal(page1.totalCount, 3);
    assert.equal(page1.pageInfo.hasNextPage, true);
    assert.equal(page1.issues[0].user.login, 'hubot');
    assert.equal(page1.issues[0].state, 'OPEN');
    assert.equal(page1.issues[0].body, 'about third');
    const page2 = json(await call(c, 'list_issues', { owner: 'acme', repo: 'widgets', perPage: 2, after: page1.pageInfo.endCursor }));
    assert.deepEqual(
      page2.issues.map((i: { number: number }) => i.number),
      [1],
    );
    assert.equal(page2.pageInfo.hasNextPage, false);
    const oldestFirst = json(await call(c, 'list_issues', { owner: 'acme', repo: 'widgets', direction: 'ASC' }));
    assert.deepEqual(
      oldestFirst.issues.map((i: { number: number }) => i.number),
      [1, 2, 3],
    );
    assert.equal(json(await call(c, 'list_issues', { owner: 'acme', repo: 'widgets', state: 'CLOSED' })).totalCount, 0);

    const unknown = await call(c, 'list_issues', { owner: 'acme', repo: 'nothing-here' });
    assert.equal(unknown.isError, true);
    assert.match(resultText(unknown), /Could not resolve to a Repository with the name 'acme\/nothing-here'/);
    const refused = await call(c, 'create_issue', { owner: 'acme', repo: 'disabled-issues', title: 'x' });
    assert.equal(refused.isError, true);
    assert.match(resultText(refused), /410 Issues are disabled/);
    const badName = await call(c, 'create_issue', { owner: 'acme', repo: '..', title: 'x' });
    assert.equal(badName.isError, true, 'GitHub’s name rules');
  });

  it('asks before delete_repository with its own form input_required, and deletes only on an accepted, matching answer', async () => {
    sb.store.createIssue({
      owner: 'octocat',
      repo: 'doomed',
      title: 'goes with it',
      body: null,
      labels: [],
      author: 'octocat',
      createdAt: 1,
    });
    const asked: Array<{ message: string; schema: any }> = [];
    const c = await client(octocat, async (message, schema) => {
      asked.push({ message, schema });
      return { action: 'accept', content: { repository_name: 'octocat/doomed' } };
    });
    const result = await call(c, 'delete_repository', { owner: 'octocat', repo: 'doomed' });
    assert.equal(resultText(result), 'Repository octocat/doomed was deleted.');
    assert.equal(asked.length, 1);
    assert.match(asked[0]!.message, /^Delete octocat\/doomed\? This cannot be undone\./);
    assert.deepEqual(asked[0]!.schema.required, ['repository_name']);
    assert.equal(sb.store.findRepository('octocat', 'doomed'), undefined);
    assert.deepEqual(sb.store.listRepositoryIssues('octocat', 'doomed'), [], 'its issues went with it');

    // On the wire: input_required with a form elicitation and a requestState of the sandbox's own.
    sb.store.ensureRepository('octocat', 'wire', 1);
    const first = await rawTool(sb.gh, octocat, 'delete_repository', { owner: 'octocat', repo: 'wire' });
    assert.equal(first.json.result.resultType, 'input_required');
    const request = first.json.result.inputRequests.delete_repository_confirmation;
    assert.equal(request.method, 'elicitation/create');
    assert.equal(request.params.mode ?? 'form', 'form');
    assert.match(first.json.result.requestState, /^v1\./);
    assert.ok(sb.store.findRepository('octocat', 'wire'), 'asking deleted nothing');
  });

  it('keeps the repository on decline, cancel or a mistyped name, and says it was not deleted', async () => {
    sb.store.ensureRepository('octocat', 'keeper', 1);
    for (const answer of [
      { action: 'decline' },
      { action: 'cancel' },
      { action: 'accept', content: { repository_name: 'octocat/keeper-not' } },
    ] satisfies ElicitAnswer[]) {
      const c = await client(octocat, async () => answer);
      const result = await call(c, 'delete_repository', { owner: 'octocat', repo: 'keeper' });
      assert.equal(result.isError, true, answer.action);
      assert.match(resultText(result), /The repository was not deleted\./);
      assert.ok(sb.store.findRepository('octocat', 'keeper'), `still there after ${answer.action}`);
    }
    // A decline that carries the right name anyway is still a decline.
    const asked = await rawTool(sb.gh, octocat, 'delete_repository', { owner: 'octocat', repo: 'keeper' });
    const declined = await rawTool(
      sb.gh,
      octocat,
      'delete_repository',
      { owner: 'octocat', repo: 'keeper' },
      {
        inputResponses: { delete_repository_confirmation: { action: 'decline', content: { repository_name: 'octocat/keeper' } } },
        requestState: asked.json.result.requestState,
      },
    );
    assert.match(resultText(declined.json.result), /not confirmed\. The repository was not deleted\./, declined.text);
    assert.ok(sb.store.findRepository('octocat', 'keeper'));
    const notMine = await call(
      await client(hubotAdmin, async () => ({ action: 'accept', content: { repository_name: 'octocat/keeper' } })),
      'delete_repository',
      {
        owner: 'octocat',
        repo: 'keeper',
      },
    );
    assert.equal(notMine.isError, true);
    assert.match(resultText(notMine), /403 Must have admin rights/);
    assert.ok(sb.store.findRepository('octocat', 'keeper'));
  });

  it('makes a person admin of the repository their first issue created: delete_repository works for them once delete_repo is granted, the scope asked first', async () => {
    // hubot files the first issue of octocat/made-by-hubot, creating it (GitHub makes a repository's creator its admin).
    const created = await call(await client(hubotAdmin), 'create_issue', { owner: 'octocat', repo: 'made-by-hubot', title: 'first' });
    assert.equal(created.isError, undefined, resultText(created));
    assert.equal(sb.store.findRepository('octocat', 'made-by-hubot')?.createdBy, 'hubot');

    // Without delete_repo, the creator is asked for the scope first (not refused for admin rights).
    const withoutScope = sb.gh.issueToken(OAUTH_APP.clientId, 'hubot', { scopes: ['repo'] }).accessToken;
    const challenged = await rawTool(sb.gh, withoutScope, 'delete_repository', { owner: 'octocat', repo: 'made-by-hubot' });
    assert.equal(challenged.status, 403);
    assert.match(challenged.headers.get('www-authenticate') ?? '', /error_description="Additional scopes required: delete_repo"/);

    // Someone neither its owner nor its creator, without the scope, is not asked for it (it could not help): the admin refusal at once.
    const strangerWithoutScope = sb.gh.issueToken(OAUTH_APP.clientId, 'monalisa', { scopes: ['repo'] }).accessToken;
    const notAsked = await rawTool(sb.gh, strangerWithoutScope, 'delete_repository', { owner: 'octocat', repo: 'made-by-hubot' });
    assert.equal(notAsked.status, 200, notAsked.text);
    assert.match(notAsked.text, /403 Must have admin rights/);
    // Nor for a repository that does not exist.
    const missing = await rawTool(sb.gh, strangerWithoutScope, 'delete_repository', { owner: 'octocat', repo: 'no-such-repo' });
    assert.equal(missing.status, 200, missing.text);
    assert.match(missing.text, /404 Not Found/);

    // Someone neither its owner nor its creator, holding the scope: still 403 admin rights, nothing deleted.
    const monalisa = sb.gh.issueToken(OAUTH_APP.clientId, 'monalisa', { scopes: ['repo', 'delete_repo'] }).accessToken;
    const stranger = await call(
      await client(monalisa, async () => ({ action: 'accept', content: { repository_name: 'octocat/made-by-hubot' } })),
      'delete_repository',
      { owner: 'octocat', repo: 'made-by-hubot' },
    );
    assert.match(resultText(stranger), /403 Must have admin rights/);
    assert.ok(sb.store.findRepository('octocat', 'made-by-hubot'));

    // With the scope granted, the creator deletes it after confirming.
    const deleted = await call(
      await client(hubotAdmin, async () => ({ action: 'accept', content: { repository_name: 'octocat/made-by-hubot' } })),
      'delete_repository',
      { owner: 'octocat', repo: 'made-by-hubot' },
    );
    assert.equal(resultText(deleted), 'Repository octocat/made-by-hubot was deleted.');
    assert.equal(sb.store.findRepository('octocat', 'made-by-hubot'), undefined);
  });

  it('refuses a tampered requestState, another user’s, another sandbox’s and one for a repository created again, deleting nothing', async () => {
    sb.store.ensureRepository('octocat', 'guarded', 1);
    const args = { owner: 'octocat', repo: 'guarded' };
    const accept = { delete_repository_confirmation: { action: 'accept', content: { repository_name: 'octocat/guarded' } } };
    const first = await rawTool(sb.gh, octocat, 'delete_repository', args);
    const state: string = first.json.result.requestState;
    const flipped = state.slice(0, -6) + (state.at(-6) === 'A' ? 'B' : 'A') + state.slice(-5);
    const tampered = await rawTool(sb.gh, octocat, 'delete_repository', args, { inputResponses: accept, requestState: flipped });
    assert.equal(tampered.json.error?.code, -32602, tampered.text);
    const foreign = await rawTool(sb.gh, hubotAdmin, 'delete_repository', args, { inputResponses: accept, requestState: state });
    assert.equal(foreign.json.error?.code, -32602, 'bound to the user whose token asked');
    const otherArgs = await rawTool(
      sb.gh,
      octocat,
      'delete_repository',
      { owner: 'octocat', repo: 'keeper' },
      { inputResponses: accept, requestState: state },
    );
    assert.equal(otherArgs.json.error?.code, -32602, 'bound to the arguments');
    assert.ok(sb.store.findRepository('octocat', 'guarded'));

    // A sandbox with another key (its own, as every sandbox's is) refuses this one's state.
    const other = await startSandbox(join(dir, 'other.db'), 'another-sandbox-key-0123456789-abcdef');
    try {
      other.store.ensureRepository('octocat', 'guarded', 1);
      const theirToken = other.gh.issueToken(OAUTH_APP.clientId, 'octocat', { scopes: ['repo', 'delete_repo'] }).accessToken;
      const elsewhere = await rawTool(other.gh, theirToken, 'delete_repository', args, { inputResponses: accept, requestState: state });
      assert.equal(elsewhere.json.error?.code, -32602);
      assert.ok(other.store.findRepository('octocat', 'guarded'));
    } finally {
      await other.close();
    }

    // The repository deleted and created again under its name between question and answer.
    const old = sb.store.findRepository('octocat', 'guarded')!;
    assert.ok(sb.store.deleteRepository('octocat', 'guarded', old.id));
    const again = sb.store.ensureRepository('octocat', 'guarded', 2);
    assert.notEqual(again.id, old.id);
    const stale = await rawTool(sb.gh, octocat, 'delete_repository', args, { inputResponses: accept, requestState: state });
    assert.equal(stale.json.result?.isError, true, stale.text);
    assert.match(resultText(stale.json.result), /not deleted/);
    assert.ok(sb.store.findRepository('octocat', 'guarded'), 'the new one stays');

    // And the genuine answer still works.
    const genuine = await rawTool(sb.gh, octocat, 'delete_repository', args);
    const done = await rawTool(sb.gh, octocat, 'delete_repository', args, {
      inputResponses: accept,
      requestState: genuine.json.result.requestState,
    });
    assert.equal(resultText(done.json.result), 'Repository octocat/guarded was deleted.');
  });

  it('answers a missing, unknown, expired or revoked token with 401 and a Bearer challenge naming its resource metadata', async () => {
    const metadata = `${sb.gh.webUrl}/.well-known/oauth-protected-resource/mcp`;
    const none = await rawTool(sb.gh, undefined, 'get_me', {});
    assert.equal(none.status, 401);
    assert.equal(none.headers.get('www-authenticate'), `Bearer resource_metadata="${metadata}"`);

    const expiring = sb.gh.issueToken(OAUTH_APP.clientId, 'monalisa', { scopes: ['repo'] }).accessToken;
    const revoked = sb.gh.issueToken(OAUTH_APP.clientId, 'monalisa', { scopes: ['repo'] }).accessToken;
    assert.equal((await rawTool(sb.gh, expiring, 'get_me', {})).status, 200);
    sb.gh.expireAccessTokens('monalisa', OAUTH_APP.clientId);
    const removal = await fetch(`${sb.gh.apiUrl}/applications/${OAUTH_APP.clientId}/token`, {
      method: 'DELETE',
      headers: { authorization: `Basic ${Buffer.from(`${OAUTH_APP.clientId}:${OAUTH_APP.clientSecret}`).toString('base64')}` },
      body: new URLSearchParams({ access_token: revoked }),
    });
    assert.ok([204, 404].includes(removal.status));
    const foreign = 'eyJhbGciOiJSUzI1NiIsInR5cCI6ImF0K2p3dCJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl'; // an MCP access token is no GitHub token
    for (const token of ['gho_unknown0123456789abcdefghijklmnopqr', expiring, revoked, foreign]) {
      const res = await rawTool(sb.gh, token, 'get_me', {});
      assert.equal(res.status, 401);
      assert.match(
        res.headers.get('www-authenticate') ?? '',
        new RegExp(`^Bearer error="invalid_token", error_description="[^"]+", resource_metadata="${metadata}"$`),
      );
    }
    const prm = (await (await fetch(metadata)).json()) as { resource: string; authorization_servers: string[] };
    assert.equal(prm.resource, sb.gh.mcpUrl);
    assert.deepEqual(prm.authorization_servers, [`${sb.gh.webUrl}/login/oauth`]);
  });

  it('challenges an OAuth App token without repo with 403 insufficient_scope on writes only, and never a GitHub App token', async () => {
    const metadata = `${sb.gh.webUrl}/.well-known/oauth-protected-resource/mcp`;
    const readOnly = await webFlowToken(sb.gh, 'monalisa', 'read:user');
    const write = await rawTool(sb.gh, readOnly, 'create_issue', { owner: 'monalisa', repo: 'notes', title: 'x' });
    assert.equal(write.status, 403);
    assert.equal(
      write.headers.get('www-authenticate'),
      `Bearer error="insufficient_scope", scope="read:user repo", error_description="Additional scopes required: repo", resource_metadata="${metadata}"`,
    );
    assert.equal(sb.store.findRepository('monalisa', 'notes'), undefined, 'nothing was created');
    assert.equal((await rawTool(sb.gh, readOnly, 'get_me', {})).status, 200, 'reads need no scope');
    assert.equal((await rawCall(sb.gh.mcpUrl, readOnly, { method: 'tools/list', params: { _meta: envelope() } })).status, 200);

    sb.store.ensureRepository('hubot', 'tools', 1);
    const noDelete = await rawTool(sb.gh, hubot, 'delete_repository', { owner: 'hubot', repo: 'tools' });
    assert.equal(noDelete.status, 403);
    assert.match(
      noDelete.headers.get('www-authenticate') ?? '',
      /scope="repo delete_repo", error_description="Additional scopes required: delete_repo"/,
    );

    const app = sb.gh.issueToken(GITHUB_APP.clientId, 'monalisa').accessToken; // ghu_: no scopes at all
    const byApp = await call(await client(app), 'create_issue', { owner: 'monalisa', repo: 'notes', title: 'from the app' });
    assert.equal(byApp.isError, undefined, resultText(byApp));
    assert.equal(sb.store.listRepositoryIssues('monalisa', 'notes').length, 1);

    // The fault switch: every scoped call is challenged, whatever the token holds.
    sb.faults.mcp = 403;
    try {
      const forced = await rawTool(sb.gh, hubot, 'create_issue', { owner: 'hubot', repo: 'tools', title: 'x' });
      assert.equal(forced.status, 403);
      assert.match(forced.headers.get('www-authenticate') ?? '', /error="insufficient_scope", scope="repo"/);
      assert.equal((await rawTool(sb.gh, hubot, 'get_me', {})).status, 200);
    } finally {
      delete sb.faults.mcp;
    }
  });

  it('answers 401 or 500 while those faults are switched on', async () => {
    sb.faults.mcp = 401;
    try {
      const res = await rawTool(sb.gh, hubot, 'get_me', {});
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer error="invalid_token"/);
      sb.faults.mcp = 500;
      const down = await rawTool(sb.gh, hubot, 'get_me', {});
      assert.equal(down.status, 500);
      assert.equal(down.json.error.code, -32603);
    } finally {
      delete sb.faults.mcp;
    }
    assert.equal((await rawTool(sb.gh, hubot, 'get_me', {})).status, 200);
  });

  it('records each call with the identity of the user whose token came in, and never a token', async () => {
    const since = sb.gh.mcpCalls().length;
    const a = await client(octocat);
    const b = await client(hubot);
    await call(a, 'get_me', {});
    await call(b, 'create_issue', { owner: 'hubot', repo: 'log', title: 'recorded' });
    await call(a, 'list_issues', { owner: 'hubot', repo: 'log' });
    await rawTool(sb.gh, undefined, 'get_me', {});
    const calls = sb.gh.mcpCalls().slice(since);
    const toolCalls = calls.filter((c) => c.method === 'tools/call');
    assert.deepEqual(
      toolCalls.map((c) => [c.login, c.userId, c.clientId, c.tool, c.outcome]),
      [
        ['octocat', 583231, OAUTH_APP.clientId, 'get_me', 'served'],
        ['hubot', 2, OAUTH_APP.clientId, 'create_issue', 'served'],
        ['octocat', 583231, OAUTH_APP.clientId, 'list_issues', 'served'],
      ],
    );
    assert.ok(
      calls.some((c) => c.method === 'server/discover' && c.login === 'octocat'),
      'the discovery probe counts too',
    );
    assert.deepEqual(calls.at(-1), { at: calls.at(-1)!.at, outcome: 'unauthenticated' });
    const everything = JSON.stringify(sb.gh.mcpCalls());
    for (const token of [octocat, hubot]) assert.ok(!everything.includes(token) && !everything.includes(token.slice(4, 20)));
  });

  it('serves a 2025-11-25 client statelessly, without delete_repository, which it could not confirm', async () => {
    const c = await legacyClient({ url: sb.gh.mcpUrl, token: hubot });
    clients.push(c);
    assert.equal(c.getProtocolEra(), 'legacy');
    const { tools } = await c.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ['create_issue', 'get_me', 'list_issues']);
    assert.equal(json(await call(c, 'get_me', {})).login, 'hubot');
  });

  it('answers a malformed, too deeply nested or too large body with a JSON-RPC 4xx, never a 5xx', async () => {
    const refused = await fetch(sb.gh.mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${hubot}`, 'content-type': 'application/json' },
      body: '{"jsonrpc":',
    });
    assert.equal(refused.status, 400);
    assert.equal(((await refused.json()) as { error: { code: number } }).error.code, -32700);
    const deep = await fetch(sb.gh.mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${hubot}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_me","arguments":{"n":${'['.repeat(50_000)}${']'.repeat(50_000)}}}}`,
    });
    assert.equal(deep.status, 400, 'bad input is a 4xx, never a 5xx');
    assert.equal(((await deep.json()) as { error: { code: number } }).error.code, -32600);
    const huge = await rawTool(sb.gh, hubot, 'create_issue', {
      owner: 'hubot',
      repo: 'log',
      title: 'x',
      body: 'y'.repeat(2 * 1024 * 1024),
    });
    assert.equal(huge.status, 413);
    const text = await fetch(sb.gh.mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${hubot}`, 'content-type': 'text/plain' },
      body: '{}',
    });
    assert.equal(text.status, 415);
    assert.equal(((await text.json()) as { error: { message: string } }).error.message, MCP_WORDS.notJson, "the broker's own /mcp words");
  });

  it('gives development mode its upstreams: entry, whose URL is this endpoint and whose prefix keeps clear of the built-in tools', async () => {
    const entry = sandboxGitHubUpstream(`${sb.gh.webUrl}/`);
    assert.deepEqual(entry, {
      id: 'github',
      url: sb.gh.mcpUrl,
      provider: 'github',
      scopes: { required: ['repo'], allow: ['delete_repo'] },
      toolPrefix: 'github_mcp_',
      name: 'GitHub MCP (sandbox)',
    });
    assert.deepEqual(parseYaml(sandboxGitHubUpstreamYaml(entry).join('\n')), { upstreams: [entry] });
    const c = await client(hubot);
    const names = (await c.listTools()).tools.map((t) => t.name);
    const prefixed = names.map((n) => entry.toolPrefix + n);
    assert.deepEqual(
      prefixed.filter((n) => BUILT_IN_TOOLS.includes(n)),
      [],
    );
    for (const n of prefixed) assert.match(n, /^[A-Za-z0-9_.-]{1,64}$/, 'within MCP’s tool-name rules');
    assert.deepEqual(
      names.map((n) => `github_${n}`).filter((n) => BUILT_IN_TOOLS.includes(n)),
      ['github_create_issue'],
      'why: the default github_ prefix collides with the built-in tool',
    );
    // The token the broker would inject for that upstream is a sandbox token of the `github` connection.
    assert.equal(json(await call(c, 'get_me', {})).login, 'hubot');
  });
});

describe('the sandbox GitHub MCP endpoint in npm run dev', () => {
  let dir: string;
  let dev: DevBroker;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sandbox-github-mcp-dev-'));
    ({ dev } = await startDevBrokerOnFreePort(
      (port) => ({ PATH: process.env.PATH, PORT: String(port), DATABASE_PATH: join(dir, 'data', 'broker.db') }),
      createLogger('error', () => {}),
    ));
  });
  after(async () => {
    await dev.running.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is served on the broker’s server at /sandbox/github/mcp: a sandbox token works there, the broker’s own MCP access token does not', async () => {
    const sandbox = { webUrl: `${dev.publicUrl}/sandbox/github` };
    const mcpUrl = `${sandbox.webUrl}/mcp`;
    const { secrets } = await loadOrCreateDevSecrets(dev.secretsPath);
    const token = await webFlowToken(sandbox, 'mona-dev', 'repo', {
      clientId: SANDBOX_GITHUB_CLIENT_ID,
      clientSecret: secrets.sandboxGitHubClientSecret,
    });
    const c = await modernClient({ url: mcpUrl, token });
    try {
      assert.equal(json(await c.callTool({ name: 'get_me', arguments: {} })).login, 'mona-dev');
      const created = json(
        await c.callTool({ name: 'create_issue', arguments: { owner: 'mona-dev', repo: 'notes', title: 'Through the broker’s server' } }),
      );
      assert.equal((await fetch(created.url)).status, 200, 'the issue page exists on the same sandbox');
    } finally {
      await c.close();
    }

    // The access token an assistant holds for the broker's /mcp is no GitHub token.
    const callback = 'http://127.0.0.1:9/oauth/callback';
    const oauth = new InMemoryOAuthClient(callback, 'Sandbox MCP test assistant');
    await assert.rejects(
      new Client({ name: 'sign-in', version: '1.0.0' }).connect(
        new StreamableHTTPClientTransport(new URL(dev.mcpUrl), { authProvider: oauth }),
      ),
      UnauthorizedError,
    );
    await new StreamableHTTPClientTransport(new URL(dev.mcpUrl), { authProvider: oauth }).finishAuth(
      await authorizeInBrowser(new Browser(), oauth.authorizationUrl!, callback, 'mona'),
    );
    const mcpAccessToken = (await oauth.tokens())?.access_token;
    assert.ok(mcpAccessToken, 'signed in to the broker');
    const refused = await rawCall(mcpUrl, mcpAccessToken, {
      method: 'tools/call',
      params: { name: 'get_me', arguments: {}, _meta: envelope() },
    });
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get('www-authenticate') ?? '', /^Bearer error="invalid_token"/);
  });
});
