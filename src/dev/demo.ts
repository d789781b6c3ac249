/**
 * `npm run demo`: a scripted walkthrough that prints the wire exchange. It starts the development
 * broker on a temporary database, signs an SDK client in (MCP authorization: discovery, dynamic
 * registration, PKCE), calls github_create_issue, plays the user in a browser for the connect link,
 * and shows the repeated call returning the created issue.
 */
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../log.js';
import { startDevBroker } from './dev-broker.js';
import { freePort } from './free-port.js';
import { Browser, parseForms, textOf, type Page } from './http-browser.js';
import { authorizeInBrowser, InMemoryOAuthClient } from './oauth-client.js';

const out = (line = '') => process.stdout.write(line + '\n');
const dim = (s: string) => (process.stdout.isTTY ? `\x1b[2m${s}\x1b[0m` : s);
const bold = (s: string) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);

function shorten(value: unknown): unknown {
  if (typeof value === 'string' && value.length > 90) return `${value.slice(0, 60)}…(${value.length} chars)`;
  if (Array.isArray(value)) return value.map(shorten);
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === '_meta' ? '{…}' : shorten(v)]));
  return value;
}

function printJson(prefix: string, text: string): void {
  const data = /^(event|data):/m.test(text) ? (/^data: (.*)$/m.exec(text)?.[1] ?? text) : text;
  try {
    out(prefix + JSON.stringify(shorten(JSON.parse(data)), null, 2).replace(/\n/g, `\n${prefix}`));
  } catch {
    if (data) out(prefix + data.slice(0, 200));
  }
}

/** A fetch that prints every MCP exchange (bodies shortened; tokens never printed). */
function tracingFetch(mcpUrl: string): typeof fetch {
  return async (input, init) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const response = await fetch(input, init);
    if (url.href !== mcpUrl) return response;
    const headers = new Headers(init?.headers);
    out(
      bold(`→ ${init?.method ?? 'GET'} ${url.pathname}  ${headers.get('mcp-method') ?? ''} ${headers.get('mcp-name') ?? ''}`) +
        dim(headers.has('authorization') ? '  (Authorization: Bearer …)' : ''),
    );
    if (typeof init?.body === 'string') printJson('    ', init.body);
    out(bold(`← ${response.status}`));
    printJson('    ', await response.clone().text());
    out();
    return response;
  };
}

function describePage(page: Page): string {
  const h1 = /<h1[^>]*>([\s\S]*?)<\/h1>/.exec(page.html)?.[1];
  return `${page.status} ${new URL(page.url).pathname} — "${h1 ? textOf(h1) : textOf(page.html).slice(0, 60)}"`;
}

const dir = mkdtempSync(join(tmpdir(), 'broker-demo-'));
const port = await freePort();
const dev = await startDevBroker(
  {
    ...process.env,
    PORT: String(port),
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    DATABASE_PATH: join(dir, 'broker.db'),
    GITHUB_CLIENT_ID: '',
    GITHUB_CLIENT_SECRET: '',
  },
  createLogger('warn'),
);
let exitCode = 0;
try {
  out(dev.banner);
  const browser = new Browser();
  const redirectUri = 'http://127.0.0.1:1/oauth/callback';
  const oauth = new InMemoryOAuthClient(redirectUri, 'Demo assistant');
  const client = new Client(
    { name: 'demo-assistant', version: '1.0.0' },
    { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );

  out(bold('1. The assistant signs in to the broker (MCP authorization against the embedded IdP)'));
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(dev.mcpUrl), { authProvider: oauth }));
  } catch (err) {
    if (!(err instanceof UnauthorizedError) || !oauth.authorizationUrl) throw err;
    out(
      `   401 → protected resource metadata → IdP discovery → dynamic registration → ${oauth.authorizationUrl.origin}${oauth.authorizationUrl.pathname}`,
    );
    const callback = await authorizeInBrowser(browser, oauth.authorizationUrl, redirectUri, 'alice', (hop) =>
      out(dim(`   browser: ${hop}`)),
    );
    const transport = new StreamableHTTPClientTransport(new URL(dev.mcpUrl), { authProvider: oauth, fetch: tracingFetch(dev.mcpUrl) });
    await transport.finishAuth(callback);
    out('   signed in as "alice"; the access token is a JWT for ' + dev.mcpUrl);
    out();
    client.setRequestHandler('elicitation/create', async (request) => {
      const params = request.params as { mode?: string; url?: string; message: string };
      if (params.mode !== 'url' || !params.url) return { action: 'decline' as const };
      out(bold('3. The client shows the link; the user opens it in their browser'));
      out(`   message: ${params.message}`);
      out(`   url:     ${params.url}`);
      let page = await browser.open(params.url);
      out(dim(`   browser: ${page.trail.map((u) => new URL(u).pathname).join(' → ')}`));
      out(`   page:    ${describePage(page)}`);
      page = await browser.submit(page, { button: 'allow' });
      out(`   click "Continue" → ${describePage(page)}`);
      const githubForm = parseForms(page.html)[0];
      if (!githubForm) throw new Error('no authorization form at the sandbox GitHub');
      page = await browser.submit(page, { button: 'authorize', fields: { login: 'octocat' } });
      out(`   click "Authorize" as octocat → ${describePage(page)}`);
      out();
      out(bold('4. The client answers "accept" and repeats the call with the echoed requestState'));
      return { action: 'accept' as const };
    });
    await client.connect(transport);
  }

  out(bold('2. The assistant calls github_create_issue; GitHub is not linked yet'));
  const result = await client.callTool({
    name: 'github_create_issue',
    arguments: { owner: 'octo-org', repo: 'demo', title: 'Hello from the connect broker' },
  });
  out(bold('5. Result'));
  out(`   ${(result.content as Array<{ text?: string }>).map((c) => c.text).join(' ')}`);
  await client.close();
} catch (err) {
  exitCode = 1;
  process.stderr.write(`demo failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
} finally {
  await dev.running.close();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(exitCode);
