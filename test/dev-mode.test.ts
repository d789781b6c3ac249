import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runAdmin } from '../src/cli/admin.js';
import { ConfigError } from '../src/config/env.js';
import { startDevBroker, type DevBroker } from '../src/dev/dev-broker.js';
import { authorizeInBrowser, InMemoryOAuthClient } from '../src/dev/oauth-client.js';
import { loadOrCreateDevSecrets } from '../src/dev/secrets.js';
import { createLogger } from '../src/log.js';
import { Browser, textOf } from './support/browser.js';
import { resultText } from './support/mcp.js';
import { selfSignedCertificate, serveClientMetadata } from './support/tls.js';
import { startDevBrokerOnFreePort } from './support/dev-broker.js';

const REDIRECT = 'http://127.0.0.1:9/oauth/callback';

/** Signs an SDK client in through MCP authorization (PRM → discovery → DCR → PKCE) as `user`. */
async function signedInClient(
  mcpUrl: string,
  browser: Browser,
  user: string,
  oauth = new InMemoryOAuthClient(REDIRECT, 'Dev-mode test assistant'),
  onUrl?: (url: string) => Promise<void>,
  onForm?: (message: string) => Promise<{ action: 'accept'; content: Record<string, string> } | { action: 'decline' | 'cancel' }>,
) {
  const client = new Client(
    { name: 'dev-test', version: '1.0.0' },
    { capabilities: { elicitation: { url: {}, ...(onForm ? { form: {} } : {}) } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  client.setRequestHandler('elicitation/create', async (request) => {
    const params = request.params as { mode?: string; url?: string; message: string };
    if (params.mode !== 'url' && onForm) return onForm(params.message);
    if (params.mode !== 'url' || !params.url || !onUrl) return { action: 'decline' as const };
    await onUrl(params.url);
    return { action: 'accept' as const };
  });
  if (!oauth.tokens()) {
    await assert.rejects(client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: oauth })), UnauthorizedError);
    assert.ok(oauth.authorizationUrl, 'the client was sent to the IdP');
    const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: oauth });
    await transport.finishAuth(await authorizeInBrowser(browser, oauth.authorizationUrl, REDIRECT, user));
    await client.connect(transport);
  } else {
    await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: oauth }));
  }
  return { client, oauth };
}

describe('npm run dev: the broker with nothing configured', () => {
  let dir: string;
  let port: number;
  let dev: DevBroker;
  const logs: string[] = [];
  const env = () => ({ PATH: process.env.PATH, PORT: String(port), DATABASE_PATH: join(dir, 'data', 'broker.db') });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'broker-dev-'));
    ({ dev, port } = await startDevBrokerOnFreePort(
      (free) => ({ PATH: process.env.PATH, PORT: String(free), DATABASE_PATH: join(dir, 'data', 'broker.db') }),
      createLogger('debug', (l) => logs.push(l)),
    ));
  });
  after(async () => {
    await dev.running.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('prints a banner with the MCP URL, the pages, what is embedded and a client config line', () => {
    assert.match(dev.banner, new RegExp(`MCP endpoint\\s+http://127.0.0.1:${port}/mcp`));
    assert.match(dev.banner, /development sign-in/);
    assert.match(dev.banner, /GitHub\s+sandbox at .*\/sandbox\/github/);
    assert.match(dev.banner, /"mcpServers"/);
    assert.match(dev.banner, /Upstream\s+http:\/\/127\.0\.0\.1:\d+\/sandbox\/github\/mcp as "github" — its tools appear as github_mcp_\*/);
    assert.ok(dev.sandboxGitHub);
  });

  it('keeps its generated secrets under the data folder, readable by the owner only', () => {
    assert.equal(dev.secretsPath, join(dir, 'data', 'dev-secrets.json'));
    assert.equal(statSync(dev.secretsPath).mode & 0o077, 0);
  });

  it('lets a real MCP client register, sign in, connect the sandbox GitHub and create an issue, offline', async () => {
    const browser = new Browser();
    let connectedPage = '';
    const { client } = await signedInClient(dev.mcpUrl, browser, 'alice', undefined, async (url) => {
      let page = await browser.open(url);
      assert.match(textOf(page.html), /Connect your GitHub \(sandbox\) account/);
      page = await browser.submit(page, { button: 'allow' });
      assert.match(textOf(page.html), /Sandbox GitHub — simulated, not github.com/);
      // The login pre-filled is derived from who is signed in at the broker, not octocat for everyone.
      assert.match(page.html, /<input type="text" id="login" name="login" value="alice">/);
      page = await browser.submit(page, { button: 'authorize', fields: { login: 'octocat' } });
      connectedPage = textOf(page.html);
    });
    const result = await client.callTool({
      name: 'github_create_issue',
      arguments: { owner: 'octo-org', repo: 'dev', title: 'Offline issue' },
    });
    await client.close();
    assert.match(connectedPage, /Connected as @octocat/);
    assert.match(connectedPage, /Sandbox mode/);
    assert.match(
      resultText(result),
      /Created issue #1 in octo-org\/dev as @octocat: http:\/\/127\.0\.0\.1:\d+\/sandbox\/github\/octo-org\/dev\/issues\/1/,
    );
    assert.match(
      resultText(result),
      /GitHub \(sandbox\): simulated for development, not the real service/,
      'tool results that touch the sandbox say so',
    );
    const issuePage = await fetch((result.structuredContent as { url: string }).url);
    assert.equal(issuePage.status, 200, 'the issue link works');
  });

  it('configures the sandbox MCP endpoint as the github upstream: github_mcp_* tools before and after connecting, delete_repository confirmed through the broker across a restart', async () => {
    const browser = new Browser();
    const links: string[] = [];
    const forms: string[] = [];
    const connectAt = async (url: string) => {
      links.push(url);
      let page = await browser.open(url);
      if (/name="decision" value="allow"/.test(page.html)) page = await browser.submit(page, { button: 'allow' });
      if (/Sandbox GitHub/.test(page.html) && /value="authorize"/.test(page.html))
        page = await browser.submit(page, { button: 'authorize', fields: { login: 'gwen-gh' } });
      assert.match(textOf(page.html), /Connected as @gwen-gh/);
    };
    const { client, oauth } = await signedInClient(dev.mcpUrl, browser, 'gwen', undefined, connectAt, async (message) => {
      forms.push(message);
      // A restart between the upstream's question and the answer: both states must still open.
      await dev.running.close();
      await new Promise((resolve) => setTimeout(resolve, 200));
      dev = await startDevBroker(
        env(),
        createLogger('debug', (l) => logs.push(l)),
      );
      return { action: 'accept', content: { repository_name: 'gwen-gh/scratch' } };
    });
    const before = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(
      before.includes('github_mcp_connect') || before.includes('github_mcp_get_me'),
      `the connect tool or the stored definitions before connecting: ${before.join(' ')}`,
    );
    assert.ok(before.includes('github_whoami') && before.includes('github_create_issue'), 'the built-in tools stay beside them');

    const me = await client.callTool({ name: 'github_mcp_get_me', arguments: {} });
    assert.equal(links.length, 1, 'asked to connect once');
    assert.match(links[0]!, /\/connect\/github\?req=/);
    assert.match(resultText(me), /gwen-gh/);

    const live = (await client.listTools()).tools.map((t) => t.name);
    for (const name of ['github_mcp_get_me', 'github_mcp_list_issues', 'github_mcp_create_issue', 'github_mcp_delete_repository'])
      assert.ok(live.includes(name), `${name} in ${live.join(' ')}`);
    assert.ok(!live.includes('github_mcp_connect'));

    const created = await client.callTool({
      name: 'github_mcp_create_issue',
      arguments: { owner: 'gwen-gh', repo: 'scratch', title: 'Through the upstream' },
    });
    assert.equal(created.isError, undefined, resultText(created));

    // delete_repository needs delete_repo: a scope challenge, the incremental connect, then the
    // sandbox's own form confirmation relayed to the client, answered after a restart.
    const deleted = await client.callTool({ name: 'github_mcp_delete_repository', arguments: { owner: 'gwen-gh', repo: 'scratch' } });
    await client.close();
    assert.equal(links.length, 2, 'asked once more, for delete_repo');
    assert.deepEqual(forms, ['GitHub MCP (sandbox) asks: Delete gwen-gh/scratch? This cannot be undone. Type gwen-gh/scratch to confirm.']);
    assert.equal(resultText(deleted), 'Repository gwen-gh/scratch was deleted.');
    assert.ok(oauth.tokens());
  });

  it("adds the example service's secrets to a dev-secrets.json from before it, keeping the others", async () => {
    const path = join(dir, 'old', 'dev-secrets.json');
    const { secrets } = await loadOrCreateDevSecrets(path);
    const { exampleServiceSecret: _s, exampleStateKey: _k, sandboxMcpStateKey: _m, ...old } = secrets;
    writeFileSync(path, JSON.stringify(old), { mode: 0o600 });
    const again = await loadOrCreateDevSecrets(path);
    assert.equal(again.created, false);
    assert.equal(again.secrets.brokerSecret, secrets.brokerSecret, 'the other secrets are kept');
    assert.ok(again.secrets.exampleServiceSecret.length >= 32 && Buffer.byteLength(again.secrets.exampleStateKey) >= 32);
    assert.ok(Buffer.byteLength(again.secrets.sandboxMcpStateKey) >= 32, "the sandbox MCP endpoint's state key is added too");
    assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')), again.secrets, 'written back');
    assert.equal(statSync(path).mode & 0o077, 0);
  });

  it('runs the example issue service beside the broker, on its own port and audience, and says so', async () => {
    const example = dev.example!;
    assert.ok(example, 'the example service runs');
    assert.equal(example.mcpUrl, `http://127.0.0.1:${port + 1}/mcp`);
    assert.match(dev.banner, new RegExp(`Example service\\s+${example.mcpUrl.replace(/[.]/g, '\\.')}`));
    const res = await fetch(example.mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(res.status, 401);
    const challenge = res.headers.get('www-authenticate') ?? '';
    const metadataUrl = /resource_metadata="([^"]+)"/.exec(challenge)?.[1];
    assert.ok(metadataUrl, challenge);
    assert.equal(new URL(metadataUrl).origin, new URL(example.mcpUrl).origin, 'its own resource metadata, not the broker');
    const prm = (await (await fetch(metadataUrl)).json()) as { resource: string; authorization_servers: string[] };
    assert.equal(prm.resource, example.mcpUrl);
    assert.deepEqual(prm.authorization_servers, [`${dev.publicUrl}/idp`]);
  });

  it("a client signed in to the example service is sent to the broker's connect page, and the issue is created with that connection", async () => {
    const example = dev.example!;
    const browser = new Browser();
    let link = '';
    const { client, oauth } = await signedInClient(example.mcpUrl, browser, 'erin', undefined, async (url) => {
      link = url;
      let page = await browser.open(url);
      assert.match(textOf(page.html), /Connect your GitHub \(sandbox\) account/);
      assert.match(page.html, /Example issue service/, 'the consent page names the asking service');
      page = await browser.submit(page, { button: 'allow' });
      await browser.submit(page, { button: 'authorize', fields: { login: 'erin-gh' } });
    });
    const token = (await oauth.tokens())?.access_token ?? '';
    const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as { aud: unknown };
    assert.equal(claims.aud, example.mcpUrl, "the embedded IdP issued the token for the example's audience");
    const result = await client.callTool({
      name: 'create_issue',
      arguments: { owner: 'octo-org', repo: 'example', title: 'From the example' },
    });
    await client.close();
    assert.equal(new URL(link).origin, dev.publicUrl, "the connect link is on the broker's origin");
    assert.match(new URL(link).pathname, /^\/connect\/github$/);
    assert.equal(result.isError, undefined, resultText(result));
    assert.match(resultText(result), /Created octo-org\/example#\d+ as erin-gh/);
    assert.doesNotMatch(JSON.stringify(result), /gh[uopr]_/, 'no GitHub token reaches the client');
  });

  it('keeps MCP sign-ins, browser sessions and connections across a restart', async () => {
    const browser = new Browser();
    const oauth = new InMemoryOAuthClient(REDIRECT, 'Restart test assistant');
    const first = await signedInClient(dev.mcpUrl, browser, 'bob', oauth, async (url) => {
      let page = await browser.open(url);
      page = await browser.submit(page, { button: 'allow' });
      await browser.submit(page, { button: 'authorize', fields: { login: 'hubot' } });
    });
    assert.match(resultText(await first.client.callTool({ name: 'github_whoami', arguments: {} })), /@hubot/);
    await first.client.close();

    await dev.running.close();
    // Let this process's HTTP client see the old server's sockets close before reusing the pool.
    await new Promise((resolve) => setTimeout(resolve, 200));
    dev = await startDevBroker(
      env(),
      createLogger('debug', (l) => logs.push(l)),
    );

    const again = await signedInClient(dev.mcpUrl, browser, 'bob', oauth, async () => assert.fail('no new elicitation after a restart'));
    const whoami = await again.client.callTool({ name: 'github_whoami', arguments: {} });
    await again.client.close();
    assert.match(resultText(whoami), /Your linked GitHub account is @hubot/);
    const page = await browser.open(`${dev.publicUrl}/connections`);
    assert.equal(page.status, 200);
    assert.match(textOf(page.html), /Signed in as bob/);
    assert.match(textOf(page.html), /@hubot/);
  });

  /** The dev IdP's authorization URL for `clientId`, asking for the MCP resource. */
  const authorizeUrl = (clientId: string, redirectUri: string) =>
    `${dev.publicUrl}/idp/auth?${new URLSearchParams({
      client_id: clientId,
      redirect_uri: redirectUri,
      response_type: 'code',
      scope: 'mcp',
      resource: dev.mcpUrl,
      state: 's',
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
    })}`;

  it('asks for consent before a client with a non-loopback redirect URI (say one a web page registered) gets a code', async () => {
    const reg = await fetch(`${dev.publicUrl}/idp/reg`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'Web page client',
        redirect_uris: ['https://evil.example/cb'],
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code'],
        response_types: ['code'],
      }),
    });
    assert.equal(reg.status, 201);
    const { client_id: clientId } = (await reg.json()) as { client_id: string };
    const browser = new Browser();
    const signIn = await browser.open(authorizeUrl(clientId, 'https://evil.example/cb'));
    assert.match(textOf(signIn.html), /Development sign-in/);
    const consent = await browser.submit(signIn, { fields: { login: 'dora' } });
    assert.equal(consent.status, 200);
    assert.match(textOf(consent.html), /Allow Web page client to act as you\?/);
    assert.ok(
      consent.trail.every((url) => !url.startsWith('https://evil.example')),
      `no code went to the page: ${consent.trail.join(' -> ')}`,
    );
  });

  const certificate = selfSignedCertificate();
  it('fetches a client ID metadata document from a loopback https URL (offline CIMD)', async () => {
    const redirectUri = 'http://127.0.0.1:9/cb';
    const { clientId, close } = await serveClientMetadata(certificate, 'Offline CIMD assistant', redirectUri);
    try {
      const page = await new Browser().open(authorizeUrl(clientId, redirectUri));
      assert.equal(page.status, 200, textOf(page.html));
      assert.match(textOf(page.html), /Development sign-in .*Offline CIMD assistant \(the name it gives itself\) asks you to sign in\./);
    } finally {
      await close();
    }
  });

  it('logs the per-request access lines at debug, so the terminal keeps its banner, and the banner says how to see them', async () => {
    await fetch(`${dev.publicUrl}/idp/jwks`);
    const access = logs.map((l) => JSON.parse(l) as { event: string; level: string }).filter((l) => l.event === 'http_request');
    assert.ok(access.length > 0, 'requests were logged at LOG_LEVEL=debug');
    assert.deepEqual([...new Set(access.map((l) => l.level))], ['debug']);
    assert.match(dev.banner, /LOG_LEVEL=debug npm run dev shows one line per request/);
  });

  it('npm run admin reads the development database with nothing configured, says so in one line, and never in production', async () => {
    const run = async (extra: Record<string, string>, args: string[]) => {
      let stdout = '';
      let stderr = '';
      const sink = (add: (t: string) => void) => ({ write: (t: string) => (add(t), true) }) as unknown as NodeJS.WritableStream;
      const code = await runAdmin(args, {
        env: { PATH: process.env.PATH, DATABASE_PATH: env().DATABASE_PATH, ...extra },
        stdout: sink((t) => (stdout += t)),
        stderr: sink((t) => (stderr += t)),
      });
      return { code, stdout, stderr };
    };
    const list = await run({}, ['connections', 'list', '--json']);
    assert.equal(list.code, 0, list.stderr);
    assert.equal(list.stderr, `Using the development database and secrets (npm run dev): ${env().DATABASE_PATH}\n`);
    const rows = JSON.parse(list.stdout) as Array<{ issuer: string; login: string; provider: string }>;
    assert.ok(
      rows.some((r) => r.login === 'octocat' && r.provider === 'github' && r.issuer === `${dev.publicUrl}/idp`),
      list.stdout,
    );
    const stats = await run({}, ['stats', '--json']);
    assert.equal(stats.code, 0, stats.stderr);

    // Production mode, or any setting of a configured broker: that configuration, never the development files.
    const configured: Array<Record<string, string>> = [
      { NODE_ENV: 'production' },
      { OIDC_ISSUER: 'https://idp.example.com' },
      { BROKER_SECRET: 'x'.repeat(40) },
    ];
    for (const extra of configured) {
      const refused = await run(extra, ['stats']);
      assert.equal(refused.code, 1);
      assert.doesNotMatch(refused.stderr, /development database/);
      assert.match(refused.stderr, /^Configuration error: .* is required\n/m);
    }
  });

  it('never logs a token', () => {
    assert.ok(logs.length > 0);
    assert.doesNotMatch(logs.join('\n'), /gho_|eyJ[A-Za-z0-9_-]{20,}\./);
  });
});

describe('npm run dev refuses unsafe settings', () => {
  /** `npm run dev` with `env` fails to start with a ConfigError whose message matches `message`. */
  const refusesDev = (env: Record<string, string>, message: RegExp) =>
    assert.rejects(startDevBroker(env, createLogger('error')), (err: unknown) => err instanceof ConfigError && message.test(err.message));

  it('refuses NODE_ENV=production', async () => {
    await refusesDev({ NODE_ENV: 'production' }, /NODE_ENV/);
  });

  it('refuses a PUBLIC_URL that is not loopback', async () => {
    await refusesDev({ PUBLIC_URL: 'https://broker.example.com' }, /PUBLIC_URL must be a loopback URL/);
  });

  it('refuses to be reachable under a non-loopback name (ALLOWED_HOSTS, MCP_AUDIENCE, TRUST_PROXY)', async () => {
    await refusesDev({ ALLOWED_HOSTS: 'localhost,broker.public.example' }, /ALLOWED_HOSTS must list only loopback names/);
    await refusesDev(
      { ALLOWED_ORIGINS: 'http://localhost:6274,https://assistant.example' },
      /ALLOWED_ORIGINS must list only loopback origins/,
    );
    await refusesDev({ MCP_AUDIENCE: 'https://broker.public.example/mcp' }, /MCP_AUDIENCE/);
    await refusesDev({ TRUST_PROXY: '1' }, /TRUST_PROXY/);
  });

  it('refuses to listen on a non-loopback HOST', async () => {
    await refusesDev({ HOST: '0.0.0.0' }, /HOST/);
  });
});
