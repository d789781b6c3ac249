// What Microsoft Entra ID and Okta issue, reproduced with the test IdP (a real oidc-provider) and
// its signing key: an application-id audience, pairwise `sub` with a stable `oid`, `scp` instead of
// `scope`, tokens without a `typ` header. Each rule is refused by default and accepted only as
// configured (docs/idp/entra-id.md, docs/idp/okta.md).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { Browser, textOf } from './support/browser.js';
import { modernClient, resultText } from './support/mcp.js';
import { readConnection } from './support/seed.js';
import { completeConnect, signIn, startStack, type Stack } from './support/stack.js';
import { assertAccepted, assertRefused, idTokenFromIdp, resourceNamedClient } from './support/token-checks.js';
import { writeYamlLines } from './support/config-file.js';

/** An Entra ID API's application (client) id: what v2.0 access tokens carry in `aud`. */
const API_APP_ID = '6e0c2a4b-1f3d-4c5e-9a7b-0123456789ab';
/** The user's object id: the same in every application's tokens (with the profile scope). */
const oidOf = (user: string) => `oid-${createHash('sha256').update(user).digest('hex').slice(0, 24)}`;
/** Entra ID's `sub` for the API: pairwise, unlike anything the page client's ID token carries. */
const apiSubOf = (user: string) => `api-pairwise-${createHash('sha256').update(`api\n${user}`).digest('hex').slice(0, 24)}`;

/** A v2.0 access token for the API as Entra ID shapes it: typ JWT, aud = the application id, `scp`, pairwise `sub`, `oid`. */
function entraToken(stack: Stack, user: string, extra: { aud?: string | string[]; claims?: Record<string, unknown> } = {}) {
  return stack.idp.mintAccessToken({
    sub: apiSubOf(user),
    aud: extra.aud ?? API_APP_ID,
    typ: 'JWT',
    claims: { scope: undefined, scp: 'access', oid: oidOf(user), tid: 'tenant-1', azp: 'assistant-app', ...extra.claims },
  });
}

/** Asks for GitHub through /mcp as `token`, completes the connect page in the browser as `user`, and returns the page's text. */
async function connectThroughTools(stack: Stack, token: string, browser: Browser, user: string): Promise<{ page: string; result: string }> {
  let page = '';
  const client = await modernClient({
    url: stack.mcpUrl,
    token,
    onUrl: async (url) => {
      page = textOf((await completeConnect(browser, url, user)).html);
      return { action: 'accept' };
    },
  });
  try {
    const result = await client.callTool({
      name: 'github_create_issue',
      arguments: { owner: 'octo-org', repo: 'hello', title: 'Through Entra' },
    });
    return { page, result: resultText(result) };
  } finally {
    await client.close();
  }
}

/** The Entra-shaped IdP: the broker's page client has pairwise subjects, ID tokens carry `oid`. */
function entraStack(env: Record<string, string>, extra: Parameters<typeof startStack>[0] = {}) {
  return startStack({
    env: { MCP_AUDIENCE: API_APP_ID, MCP_ACCESS_TOKEN_TYPES: 'JWT', ...env },
    idpPairwiseBrokerClient: true,
    idpProfileClaims: ['oid'],
    idpAccountClaims: (id) => ({ oid: oidOf(id) }),
    ...extra,
  });
}

describe('Entra ID with the default subject claim (sub)', () => {
  let stack: Stack;
  before(async () => {
    stack = await entraStack({});
  });
  after(() => stack?.close());

  it('refuses the connect link to its own user when the ID token and the access token carry different pairwise subs', async () => {
    const browser = new Browser();
    let status = 0;
    let text = '';
    const client = await modernClient({
      url: stack.mcpUrl,
      token: await entraToken(stack, 'alice'),
      onUrl: async (url) => {
        const page = await completeConnect(browser, url, 'alice');
        status = page.status;
        text = textOf(page.html);
        // The user saw the refusal: the assistant is told no, so the call ends now.
        return { action: 'decline' };
      },
    });
    await client
      .callTool({ name: 'github_create_issue', arguments: { owner: 'octo-org', repo: 'hello', title: 'Refused' } })
      .catch(() => undefined);
    await client.close();
    assert.equal(status, 403, text);
    assert.equal(stack.github.issues.length, 0, 'nothing reached GitHub');
  });
});

describe('Entra ID: OIDC_SUBJECT_CLAIM=oid, MCP_AUDIENCE = the API application id, scopes in scp', () => {
  let stack: Stack;
  let dir: string;
  // The operator's own MCP server, registered at Entra ID too: its users' tokens carry its application id.
  const BOT = { id: 'issue-bot', secret: 'issue-bot-secret-for-tests-0123', audience: '0b5e1c2d-3f4a-4b6c-8d9e-0123456789ab' };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'idp-compat-'));
    const file = writeYamlLines(join(dir, 'services.yaml'), [
      'services:',
      `  - id: ${BOT.id}`,
      `    audiences: ["${BOT.audience}"]`,
      '    auth: client_secret_basic',
      '    allow: { github: [public_repo, repo] }',
    ]);
    stack = await entraStack({
      OIDC_SUBJECT_CLAIM: 'oid',
      MCP_SCOPES: 'access',
      PROVIDERS_FILE: file,
      SERVICE_ISSUE_BOT_SECRET: BOT.secret,
    });
  });
  after(async () => {
    await stack?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('connects end to end: the page sign-in (pairwise sub) and the MCP token (another sub) are one principal by oid', async () => {
    const browser = new Browser();
    const { page, result } = await connectThroughTools(stack, await entraToken(stack, 'alice'), browser, 'alice');
    assert.match(page, /Connected as @octocat/);
    assert.match(result, /Created issue #1 in octo-org\/hello/);
    // The principal is (iss, oid): the row is there under the oid, and under neither sub.
    assert.ok(await readConnection(stack.env, oidOf('alice'), 'github'));
    assert.equal(await readConnection(stack.env, apiSubOf('alice'), 'github'), undefined);
  });

  it('shows another person the link refused with 403, though their tokens share the audience', async () => {
    const browser = new Browser();
    let status = 0;
    const client = await modernClient({
      url: stack.mcpUrl,
      token: await entraToken(stack, 'bob'),
      onUrl: async (url) => {
        status = (await completeConnect(browser, url, 'mallory')).status;
        return { action: 'decline' };
      },
    });
    await client
      .callTool({ name: 'github_create_issue', arguments: { owner: 'octo-org', repo: 'hello', title: 'No' } })
      .catch(() => undefined);
    await client.close();
    assert.equal(status, 403);
  });

  it('takes the token exchange subject token by oid too', async () => {
    const subjectToken = await entraToken(stack, 'alice', { aud: BOT.audience });
    const res = await fetch(`${stack.publicUrl}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${BOT.id}:${BOT.secret}`).toString('base64')}`,
      },
      body: new URLSearchParams({
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        subject_token: subjectToken,
        subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        audience: 'github',
      }).toString(),
    });
    const json = (await res.json()) as Record<string, unknown>;
    // alice connected GitHub through /mcp in the first test: her oid finds that connection.
    assert.equal(res.status, 200, JSON.stringify(json));
    assert.equal(typeof json.access_token, 'string');
  });

  it('accepts aud = the application id and refuses aud = the /mcp URL, while the resource metadata still names /mcp', async () => {
    await assertAccepted(stack, await entraToken(stack, 'carol'), 'aud = the application id');
    await assertAccepted(stack, await entraToken(stack, 'carol', { aud: [API_APP_ID, 'another-api'] }), 'aud list with the application id');
    await assertRefused(stack, await entraToken(stack, 'carol', { aud: stack.mcpUrl }), 'aud = the /mcp URL');
    await assertRefused(stack, await entraToken(stack, 'carol', { aud: `api://${API_APP_ID}` }), 'aud = another spelling');
    const metadata = (await (await fetch(`${stack.publicUrl}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<string, unknown>;
    assert.equal(metadata.resource, stack.mcpUrl, 'RFC 9728: the resource is the URL the metadata was derived from');
    assert.deepEqual(metadata.scopes_supported, ['access']);
  });

  it('refuses with 401 a token without an oid, or with an empty one, even though it has a sub', async () => {
    await assertRefused(stack, await entraToken(stack, 'dave', { claims: { oid: undefined } }), 'no oid');
    await assertRefused(stack, await entraToken(stack, 'dave', { claims: { oid: '' } }), 'an empty oid');
    await assertRefused(stack, await entraToken(stack, 'dave', { claims: { oid: 42 } }), 'a numeric oid');
  });

  it('reads scp (a space-separated string or an array) when scope is absent, and scope when present', async () => {
    await assertAccepted(stack, await entraToken(stack, 'erin', { claims: { scp: 'openid access' } }), 'scp string');
    await assertAccepted(stack, await entraToken(stack, 'erin', { claims: { scp: ['access', 'other'] } }), 'scp array');
    await assertRefused(stack, await entraToken(stack, 'erin', { claims: { scp: 'other' } }), 'scp without access', 'insufficient_scope');
    await assertRefused(stack, await entraToken(stack, 'erin', { claims: { scp: undefined } }), 'no scopes', 'insufficient_scope');
    await assertRefused(
      stack,
      await entraToken(stack, 'erin', { claims: { scp: ['access', 7] } }),
      'scp with a number',
      'insufficient_scope',
    );
    await assertRefused(
      stack,
      await entraToken(stack, 'erin', { claims: { scope: 'other', scp: 'access' } }),
      'scope wins',
      'insufficient_scope',
    );
  });

  it("refuses the page client's own ID token, though its typ is JWT and oid names the user", async () => {
    // An ID token for the broker's client: aud = its client id, which no MCP token may carry.
    await assertRefused(
      stack,
      await entraToken(stack, 'fay', { aud: [API_APP_ID, 'connect-broker'] }),
      'aud naming the sign-in client besides the API',
    );
    await assertRefused(stack, await entraToken(stack, 'fay', { claims: { at_hash: 'x4f9' } }), 'an at_hash');
    await assertRefused(stack, await entraToken(stack, 'fay', { claims: { c_hash: 'x4f9' } }), 'a c_hash');
  });
});

describe('OIDC_SUBJECT_CLAIM=oid with an IdP whose ID tokens carry no oid', () => {
  let stack: Stack;
  before(async () => {
    stack = await entraStack({ OIDC_SUBJECT_CLAIM: 'oid' }, { idpProfileClaims: [] });
  });
  after(() => stack?.close());

  it('refuses the sign-in with a page naming the missing claim, and signs no one in', async () => {
    const browser = new Browser();
    const page = await signIn(browser, stack, 'gus');
    assert.equal(page.status, 502);
    assert.match(textOf(page.html), /the oid claim is missing/);
    const after = await browser.open(`${stack.publicUrl}/connections`);
    // Still anonymous: the accounts page sends the browser to sign in again, which is refused again.
    assert.equal(after.status, 502, textOf(after.html));
  });
});

/** An access token as Okta's custom authorization servers shape it: no typ header, `scp` an array, no `scope`. */
function oktaToken(stack: Stack, sub: string, claims: Record<string, unknown> = {}) {
  return stack.idp.mintAccessToken({ sub, typ: null, claims: { scope: undefined, scp: ['mcp'], cid: 'assistant', uid: sub, ...claims } });
}

describe('tokens without a typ header (Okta) by default', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ env: { MCP_SCOPES: 'mcp' } });
  });
  after(() => stack?.close());

  it('refuses a token without typ, and one whose typ is the word none', async () => {
    const untyped = await oktaToken(stack, 'okta-ann');
    assert.equal(decodeProtectedHeader(untyped).typ, undefined);
    await assertRefused(stack, untyped, 'no typ header');
    await assertRefused(stack, await stack.idp.mintAccessToken({ sub: 'okta-ann', typ: 'none' }), 'typ "none"');
  });

  it('reads an Okta scp array as the scopes of an at+jwt token', async () => {
    await assertAccepted(
      stack,
      await stack.idp.mintAccessToken({ sub: 'okta-ann', claims: { scope: undefined, scp: ['mcp'] } }),
      'scp array',
    );
  });
});

describe('MCP_ACCESS_TOKEN_TYPES=at+jwt,none (Okta custom authorization servers)', () => {
  let stack: Stack;
  before(async () => {
    // No MCP_SCOPES: only the token-type rules stand between an ID token and /mcp here.
    stack = await startStack({ env: { MCP_ACCESS_TOKEN_TYPES: 'at+jwt,none' }, idpClients: resourceNamedClient });
  });
  after(() => stack?.close());

  it('accepts a token without typ that carries its scopes (an scp array or a scope string), and still at+jwt', async () => {
    await assertAccepted(stack, await oktaToken(stack, 'okta-bea'), 'no typ, scp array');
    await assertAccepted(stack, await oktaToken(stack, 'okta-bea', { scp: undefined, scope: 'mcp' }), 'no typ, scope string');
    await assertAccepted(stack, await stack.idp.mintAccessToken({ sub: 'okta-bea' }), 'at+jwt');
  });

  it('refuses a token without typ that grants no scope, as an ID token would', async () => {
    await assertRefused(stack, await oktaToken(stack, 'okta-bea', { scp: undefined }), 'no scope claim');
    await assertRefused(stack, await oktaToken(stack, 'okta-bea', { scp: [] }), 'an empty scp');
    await assertRefused(stack, await oktaToken(stack, 'okta-bea', { scp: undefined, scope: '' }), 'an empty scope');
    // An at+jwt token needs no scope when MCP_SCOPES asks for none.
    await assertAccepted(stack, await stack.idp.mintAccessToken({ sub: 'okta-bea', claims: { scope: undefined } }), 'at+jwt without scope');
  });

  it('refuses typ JWT (not listed) and the literal typ none', async () => {
    await assertRefused(stack, await stack.idp.mintAccessToken({ sub: 'okta-bea', typ: 'JWT' }), 'typ JWT');
    await assertRefused(stack, await stack.idp.mintAccessToken({ sub: 'okta-bea', typ: 'none' }), 'typ "none"');
  });

  it('still refuses untyped ID tokens: a nonce, an at_hash or c_hash, an aud naming the sign-in client, and a real one from the IdP', async () => {
    await assertRefused(stack, await oktaToken(stack, 'okta-bea', { nonce: 'n-1' }), 'a nonce');
    await assertRefused(stack, await oktaToken(stack, 'okta-bea', { at_hash: 'x4f9' }), 'an at_hash');
    await assertRefused(stack, await oktaToken(stack, 'okta-bea', { c_hash: 'x4f9' }), 'a c_hash');
    await assertRefused(
      stack,
      await stack.idp.mintAccessToken({ sub: 'okta-bea', typ: null, aud: [stack.mcpUrl, 'connect-broker'] }),
      'aud naming the sign-in client',
    );
    const idToken = await idTokenFromIdp(stack, 'okta-bea');
    const claims = decodeJwt(idToken);
    assert.equal(claims.aud, stack.mcpUrl, 'the ID token is for the resource-named client: its aud is the MCP resource');
    assert.equal(claims.nonce, undefined);
    assert.equal(claims.at_hash, undefined, 'a token-endpoint ID token of oidc-provider carries no at_hash');
    assert.equal(decodeProtectedHeader(idToken).typ, undefined, 'nor a typ header');
    await assertRefused(stack, idToken, 'an ID token from the IdP, without a nonce');
  });
});
