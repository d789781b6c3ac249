// The Python `mcp` 2.3.0 client (2026-07-28) against the broker, where pip can install it: through
// the example issue service (issue 12's helper), and through the gateway to an upstream tool. Each
// makes a venv, installs the package and runs a Python process, so they live here, not in the quick
// suites (test/issue-service.test.ts and test/gateway-e2e.test.ts cover both paths with the SDK).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Browser } from '../support/browser.js';
import { useGateway } from '../support/gateway.js';
import { resultText } from '../support/mcp.js';
import { pythonMcpClient, runPythonMcpClient } from '../support/python-mcp.js';
import { startIssueServiceStack } from '../support/issue-service-stack.js';
import { completeConnect } from '../support/stack.js';
import { useSuite } from '../support/suite.js';

const ARGS = { owner: 'octo-org', repo: 'hello', title: 'Filed through the broker' };

/** A scratch folder for the venv, removed after `run`. */
async function inScratch<T>(prefix: string, run: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  try {
    return await run(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the example issue service against the real broker, from Python', () => {
  const setup = useSuite('the broker and the example issue service', () => startIssueServiceStack('issue-service-python-'));

  it('the Python mcp 2.3.0 client (2026-07-28), where pip can install it', { timeout: 180_000 }, (t) =>
    inScratch('issue-service-venv-', async (dir) => {
      const py = pythonMcpClient(dir);
      if ('skip' in py) return t.skip(py.skip);
      const { stack, audience } = setup;
      const issues = stack.github.issues.length;
      const browser = new Browser();
      const { code, out, err, links, result } = await runPythonMcpClient(py.python, {
        url: audience,
        token: await stack.token('pia', { aud: audience }),
        args: ARGS,
        onLink: (link) => completeConnect(browser, link, 'pia', { githubLogin: 'pia-gh' }),
      });
      assert.equal(code, 0, `python client failed:\n${err.slice(-2000)}`);
      assert.equal(links.length, 1, 'one URL elicitation');
      assert.equal(new URL(links[0]!).origin, stack.publicUrl);
      assert.match(resultText(result()), /Created octo-org\/hello#\d+ as pia-gh/);
      assert.equal(stack.github.issues.length, issues + 1);
      assert.equal(stack.github.issues.at(-1)!.author, 'pia-gh');
      assert.doesNotMatch(out, /gh[uopr]_[A-Za-z0-9]/, 'no GitHub token shape in any message the client received');
      assert.doesNotMatch(out, /access_token|refresh_token/);
    }),
  );
});

describe("the broker's own tools, from a Python client that declares no elicitation", () => {
  const setup = useSuite('the broker and the example issue service', () => startIssueServiceStack('no-elicitation-python-'));

  it('gets the connect link in the result, and its repeat after connecting acts', { timeout: 180_000 }, (t) =>
    inScratch('no-elicitation-venv-', async (dir) => {
      const py = pythonMcpClient(dir);
      if ('skip' in py) return t.skip(py.skip);
      const { stack } = setup;
      const browser = new Browser();
      const { code, err, links, result } = await runPythonMcpClient(py.python, {
        url: stack.mcpUrl,
        token: await stack.token('nia'),
        tool: 'github_whoami',
        args: {},
        noElicitation: true,
        onLink: (link) => completeConnect(browser, link, 'nia', { githubLogin: 'nia-gh' }),
      });
      assert.equal(code, 0, `python client failed:\n${err.slice(-2000)}`);
      assert.equal(links.length, 1, 'one link, in the result');
      assert.match(links[0]!, new RegExp(`^${stack.publicUrl}/connect/github\\?req=`));
      assert.deepEqual((result() as { structuredContent?: unknown }).structuredContent, {
        status: 'connected',
        login: 'nia-gh',
        id: (result() as { structuredContent: { id: string } }).structuredContent.id,
      });
    }),
  );
});

describe('the gateway, from Python', () => {
  const {
    stack,
    servers: { github },
  } = useGateway({ github: { era: 'modern', entry: { provider: 'github', scopes: ['repo'] } } }, { holdSeconds: 1 });

  it('serves the Python mcp 2.3.0 client an upstream tool: the connect elicitation, then the forwarded call', { timeout: 180_000 }, (t) =>
    inScratch('gateway-python-', async (dir) => {
      const py = pythonMcpClient(dir);
      if ('skip' in py) return t.skip(py.skip);
      const browser = new Browser();
      const { code, err, links, result } = await runPythonMcpClient(py.python, {
        url: stack.mcpUrl,
        token: await stack.token('pyu'),
        tool: 'github_echo',
        args: { text: 'from python' },
        onLink: (link) => completeConnect(browser, link, 'pyu', { githubLogin: 'py-gh' }),
      });
      assert.equal(code, 0, `python client failed:\n${err.slice(-2000)}`);
      assert.equal(links.length, 1, 'one URL elicitation');
      assert.match(links[0]!, /\/connect\/github\?req=/);
      assert.deepEqual((result() as { structuredContent?: unknown }).structuredContent, { text: 'from python', who: 'py-gh' });
      assert.equal(github.calls('echo').at(-1)!.who, 'py-gh');
    }),
  );
});
