// What the consent page tells a person, and what it asks the provider for: the assistant's name as
// it is (no bidi or invisible characters, isolated in <bdi>), why the link was made, and the scopes
// without those a broader one already implies.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { Browser, textOf, type Page } from './support/browser.js';
import { envelope, rawCall } from './support/mcp.js';
import { signIn, type Stack } from './support/stack.js';
import { useStack } from './support/suite.js';

/** A 2026-07-28 tools/call as `sub` from a client calling itself `clientName`; returns the connect link it elicits. */
async function askForLink(
  stack: Stack,
  sub: string,
  name: string,
  args: Record<string, unknown>,
  clientName = 'raw-client',
): Promise<{ url: string; token: string; requestState: string }> {
  const token = await stack.token(sub);
  const meta = { ...envelope(), 'io.modelcontextprotocol/clientInfo': { name: clientName, version: '1.0.0' } };
  const res = await rawCall(stack.mcpUrl, token, { method: 'tools/call', params: { name, arguments: args, _meta: meta } });
  assert.equal(res.json?.result?.resultType, 'input_required', res.text);
  return {
    url: res.json.result.inputRequests.connect_account.params.url as string,
    token,
    requestState: res.json.result.requestState as string,
  };
}

/** Opens `link` in a fresh browser signed in as `sub`, and returns the page it shows. */
async function openAs(stack: Stack, sub: string, link: string): Promise<Page> {
  const browser = new Browser();
  await signIn(browser, stack, sub);
  return browser.open(link);
}

function pendingRows(stack: Stack, sub: string): Array<Record<string, unknown>> {
  const db = new Database(stack.env.DATABASE_PATH!, { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT * FROM pending_connections WHERE subject = ? ORDER BY created_at').all(sub) as Array<Record<string, unknown>>;
  } finally {
    db.close();
  }
}

describe('the consent page', () => {
  const stack = useStack({ holdSeconds: 0 });

  it('shows a client name without bidi or invisible characters, isolated in <bdi>, and stores it that way', async () => {
    const disguised = 'Trusted\u202E\u2066 Assistant\u200B\u200D\uFEFF\u061C\u200F\u0007';
    const { url } = await askForLink(stack, 'bidi-user', 'github_whoami', {}, disguised);
    assert.equal(pendingRows(stack, 'bidi-user')[0]!.client_name, 'Trusted Assistant');
    const page = await openAs(stack, 'bidi-user', url);
    assert.equal(page.status, 200, textOf(page.html));
    assert.match(page.html, /Your AI assistant <strong><bdi>Trusted Assistant<\/bdi><\/strong>/);
    assert.doesNotMatch(page.html, /[\u202A-\u202E\u2066-\u2069\u200B-\u200F\u061C\uFEFF]/u);
  });

  it('lists and requests repo without the public_repo it implies (the tool asked for both)', async () => {
    const { url } = await askForLink(stack, 'scopes-user', 'github_create_issue', { owner: 'acme', repo: 'widgets', title: 'Hello' });
    assert.equal(pendingRows(stack, 'scopes-user')[0]!.scopes, 'repo public_repo', 'what the tool asked for, as stored');
    const browser = new Browser();
    await signIn(browser, stack, 'scopes-user');
    const consent = await browser.open(url);
    assert.equal(consent.status, 200, textOf(consent.html));
    assert.deepEqual(
      [...consent.html.matchAll(/<code class="muted small">([^<]+)<\/code>/g)].map((m) => m[1]),
      ['repo'],
    );
    assert.match(textOf(consent.html), /Read and write your public and private repositories/);
    assert.doesNotMatch(textOf(consent.html), /Read and write your public repositories,/);
    const authorize = await browser.submit(consent, { button: 'allow' });
    assert.equal(new URL(authorize.url).origin, stack.github.webUrl);
    assert.equal(new URL(authorize.url).searchParams.get('scope'), 'repo', 'GitHub is asked for repo alone');
  });

  it('says why a tool made the link, stored with the pending connection, and never the arguments in full', async () => {
    const { url } = await askForLink(
      stack,
      'purpose-user',
      'github_create_issue',
      { owner: 'acme', repo: 'widgets', title: 'Hello', body: 'secret body text' },
      'Claude',
    );
    assert.equal(pendingRows(stack, 'purpose-user')[0]!.purpose, 'create the issue in acme/widgets');
    const consent = await openAs(stack, 'purpose-user', url);
    assert.equal(consent.status, 200, textOf(consent.html));
    const text = textOf(consent.html);
    assert.match(text, /Your AI assistant Claude \(the name it gives itself\) has asked to act on your GitHub account\./);
    assert.match(text, /It asks so that it can create the issue in acme\/widgets ?\./);
    assert.doesNotMatch(text, /Hello|secret body text/, 'never the arguments in full');
  });

  it('shows no purpose line for a link made from /connections', async () => {
    const browser = new Browser();
    const connections = await signIn(browser, stack, 'page-link-user');
    const consent = await browser.submit(connections, { match: /\/connections\/github\/connect$/ });
    assert.equal(consent.status, 200, textOf(consent.html));
    const text = textOf(consent.html);
    assert.match(text, /You asked to connect your GitHub account to this service/);
    assert.doesNotMatch(text, /It asks so that it can/);
    assert.equal(pendingRows(stack, 'page-link-user')[0]!.purpose, null);
  });
});
