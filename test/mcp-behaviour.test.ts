import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { UrlElicitationRequiredError } from '@modelcontextprotocol/client';
import { Browser, textOf } from './support/browser.js';
import { closing, envelope, legacyClient, modernClient, rawCall, resultText, type ElicitAnswer } from './support/mcp.js';
import { completeConnect, heldCalls, signIn, type Stack } from './support/stack.js';
import { clientAs, useStack } from './support/suite.js';

/** The key our tools use for their one URL input request. */
const CONNECT_KEY = 'connect_account';

let loginSeq = 0;
/** A GitHub login nobody else in this file uses (the stand-in creates users on first sign-in). */
function freshLogin(prefix: string): string {
  loginSeq += 1;
  return `${prefix}-${loginSeq}`;
}

/** Runs `fn` with `client` and closes the client whatever happens. */
/** A raw 2026-07-28 tools/call with the `_meta` envelope; `extra` goes into params (requestState, inputResponses). */
function callTool(
  stack: Stack,
  token: string,
  name: string,
  args: unknown,
  extra: Record<string, unknown> = {},
  caps?: Record<string, unknown>,
) {
  return rawCall(stack.mcpUrl, token, { method: 'tools/call', params: { name, arguments: args, ...extra, _meta: envelope(caps) } });
}

function issuePosts(stack: Stack): number {
  return stack.github.requests.filter((r) => r.method === 'POST' && /\/issues$/.test(r.path)).length;
}

/** Connects `sub`'s GitHub (as `githubLogin`) through github_whoami and the browser flow; returns the whoami result. */
async function connect(stack: Stack, sub: string, githubLogin: string) {
  const browser = new Browser();
  const client = await clientAs(stack, sub, {
    onUrl: async (url) => {
      await completeConnect(browser, url, sub, { githubLogin });
      return { action: 'accept' };
    },
  });
  try {
    return await client.callTool({ name: 'github_whoami', arguments: {} });
  } finally {
    await client.close();
  }
}

async function listConnections(stack: Stack, sub: string) {
  const client = await modernClient({ url: stack.mcpUrl, token: await stack.token(sub) });
  try {
    return await client.callTool({ name: 'list_connections', arguments: {} });
  } finally {
    await client.close();
  }
}

describe('MCP tools of the broker (2026-07-28 and 2025-11-25 clients)', () => {
  const stack = useStack({ holdSeconds: 1 });

  describe('discovery', () => {
    it('connects a 2026-07-28 client through server/discover', async () => {
      const client = await modernClient({ url: stack.mcpUrl, token: await stack.token('discover-user') });
      try {
        assert.equal(client.getProtocolEra(), 'modern');
        assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
      } finally {
        await client.close();
      }
      const raw = await rawCall(stack.mcpUrl, await stack.token('discover-user'), {
        method: 'server/discover',
        params: { _meta: envelope() },
      });
      assert.equal(raw.status, 200);
      assert.ok(raw.json.result.supportedVersions.includes('2026-07-28'));
      assert.ok(raw.json.result.capabilities.tools, 'the tools capability is advertised');
    });

    it('declares tools.listChanged false in server/discover and initialize: stateless /mcp cannot send list_changed', async () => {
      const token = await stack.token('list-changed-user');
      const discover = await rawCall(stack.mcpUrl, token, { method: 'server/discover', params: { _meta: envelope() } });
      assert.equal(discover.status, 200, discover.text);
      assert.equal(discover.json.result.capabilities.tools.listChanged, false);
      const client = await legacyClient({ url: stack.mcpUrl, token });
      try {
        assert.equal(client.getServerCapabilities()?.tools?.listChanged, false);
      } finally {
        await client.close();
      }
    });

    it('lists github_create_issue, github_whoami, list_connections, disconnect_account and connect_account with input schemas', async () => {
      const client = await modernClient({ url: stack.mcpUrl, token: await stack.token('list-tools-user') });
      const { tools } = await closing(client, (c) => c.listTools());
      assert.deepEqual(tools.map((t) => t.name).sort(), [
        'connect_account',
        'disconnect_account',
        'github_create_issue',
        'github_whoami',
        'list_connections',
      ]);
      for (const tool of tools) assert.equal(tool.inputSchema.type, 'object', `${tool.name} has an object input schema`);
      const create = tools.find((t) => t.name === 'github_create_issue')!;
      assert.deepEqual(Object.keys(create.inputSchema.properties ?? {}).sort(), ['body', 'labels', 'owner', 'repo', 'title']);
      assert.deepEqual([...(create.inputSchema.required ?? [])].sort(), ['owner', 'repo', 'title']);
      const disconnect = tools.find((t) => t.name === 'disconnect_account')!;
      assert.deepEqual((disconnect.inputSchema.properties as Record<string, { enum?: string[] }>).provider?.enum, ['github']);
      assert.deepEqual(disconnect.inputSchema.required, ['provider']);
      assert.equal(disconnect.annotations?.destructiveHint, true);
    });
  });

  describe('the first call for an unconnected user', () => {
    it('answers input_required with exactly one URL elicitation of our /connect/github page and a requestState, creating nothing', async () => {
      const before = stack.github.requests.length;
      const r = await callTool(stack, await stack.token('first-call-user'), 'github_create_issue', {
        owner: 'octo-org',
        repo: 'first',
        title: 'Hello',
      });
      assert.equal(r.status, 200);
      assert.equal(r.json.error, undefined);
      const result = r.json.result;
      assert.equal(result.resultType, 'input_required');
      assert.deepEqual(Object.keys(result.inputRequests), [CONNECT_KEY]);
      const request = result.inputRequests[CONNECT_KEY];
      assert.equal(request.method, 'elicitation/create');
      assert.deepEqual(Object.keys(request.params).sort(), ['message', 'mode', 'url']);
      assert.equal(request.params.mode, 'url');
      assert.match(request.params.message, /^Connect your GitHub account so I can create the issue in octo-org\/first\./);
      const link = new URL(request.params.url);
      assert.equal(link.origin, stack.publicUrl);
      assert.equal(link.pathname, '/connect/github');
      assert.deepEqual([...link.searchParams.keys()], ['req']);
      assert.match(link.searchParams.get('req')!, /^[A-Za-z0-9_-]{43}$/);
      assert.equal(typeof result.requestState, 'string');
      assert.ok(result.requestState.length > 0);
      // The state is signed, not encrypted: it must not carry the link secret.
      const payload = Buffer.from(result.requestState.split('.')[1], 'base64url').toString('utf8');
      assert.ok(!payload.includes(link.searchParams.get('req')!), 'requestState does not reveal the link handle');
      assert.equal(result.isError, undefined);
      assert.equal(stack.github.requests.length, before, 'the GitHub stand-in was not contacted at all');
    });
  });

  describe('decline and cancel of the URL elicitation', () => {
    for (const action of ['decline', 'cancel'] as const) {
      it(`answers ${action} with a normal not_connected result and kills the link`, async () => {
        const sub = `${action}-user`;
        const seen: string[] = [];
        const postsBefore = issuePosts(stack);
        const client = await clientAs(stack, sub, {
          onUrl: async (url) => {
            seen.push(url);
            return { action };
          },
        });
        const result = await closing(client, (c) =>
          c.callTool({ name: 'github_create_issue', arguments: { owner: 'octo-org', repo: action, title: 'Nope' } }),
        );

        assert.equal(seen.length, 1, 'asked exactly once');
        assert.equal(result.isError, undefined);
        assert.deepEqual(result.structuredContent, { status: 'not_connected', reason: action });
        assert.equal(resultText(result), 'GitHub was not connected (you chose not to open the link), so nothing was done.');
        assert.equal(issuePosts(stack), postsBefore);

        const browser = new Browser();
        await signIn(browser, stack, sub);
        const page = await browser.open(seen[0]!);
        assert.equal(page.status, 410);
        const text = textOf(page.html);
        assert.match(text, /This request was cancelled/);
        assert.match(
          text,
          /declined or cancelled in the AI assistant that asked for it, so this link does not work any more and nothing was connected\. To connect an account, ask your assistant again/,
        );
        assert.doesNotMatch(text, /already (been )?used/);
        assert.doesNotMatch(page.html, /name="decision"/, 'no consent form');
      });
    }

    it('answers a decline sent on the wire as a result, not a JSON-RPC error', async () => {
      const token = await stack.token('wire-decline-user');
      const args = { owner: 'octo-org', repo: 'wire', title: 'x' };
      const first = await callTool(stack, token, 'github_create_issue', args);
      const repeat = await callTool(stack, token, 'github_create_issue', args, {
        inputResponses: { [CONNECT_KEY]: { action: 'decline' } },
        requestState: first.json.result.requestState,
      });
      assert.equal(repeat.status, 200);
      assert.equal(repeat.json.error, undefined);
      assert.equal(repeat.json.result.resultType, 'complete');
      assert.equal(repeat.json.result.isError, undefined);
      assert.deepEqual(repeat.json.result.structuredContent, { status: 'not_connected', reason: 'decline' });
    });
  });

  describe('cancelling in the browser', () => {
    for (const c of [
      {
        who: 'the user cancels on our consent page',
        sub: 'consent-cancel-user',
        step: { consent: 'cancel' } as const,
        repo: 'consent',
        page: /You cancelled, so your GitHub account was not connected/,
        reason: 'cancelled',
        text: 'GitHub was not connected (you cancelled on the connect page), so nothing was done.',
      },
      {
        who: 'the user denies access at GitHub',
        sub: 'github-cancel-user',
        step: { atGitHub: 'cancel' } as const,
        repo: 'denied',
        page: /You cancelled at GitHub, so nothing was connected/,
        reason: 'denied',
        text: 'GitHub was not connected (you cancelled at GitHub), so nothing was done.',
      },
    ]) {
      it(`ends the repeated call as not connected when ${c.who}`, async () => {
        const browser = new Browser();
        const pages: string[] = [];
        const client = await clientAs(stack, c.sub, {
          onUrl: async (url) => {
            const page = await completeConnect(browser, url, c.sub, c.step);
            pages.push(textOf(page.html));
            return { action: 'accept' };
          },
        });
        const result = await closing(client, (cl) =>
          cl.callTool({ name: 'github_create_issue', arguments: { owner: 'octo-org', repo: c.repo, title: 'x' } }),
        );
        assert.equal(pages.length, 1, 'no second question');
        assert.match(pages[0]!, c.page);
        assert.equal(result.isError, undefined);
        assert.deepEqual(result.structuredContent, { status: 'not_connected', reason: c.reason });
        assert.equal(resultText(result), c.text);
      });
    }
  });

  describe('a 2026-07-28 client without elicitation.url', () => {
    for (const [label, capabilities] of [
      ['form-only', { form: true }],
      ['no elicitation at all', {}],
    ] as const) {
      it(`gets the principal-bound link in the result (${label}), the same link on a repeat, and the plain repeat after connecting acts`, async () => {
        let asked = 0;
        const sub = `no-url-${label}`;
        const githubLogin = freshLogin('nourl');
        const repo = `nourl-${label.replace(/\W+/g, '-')}`;
        const client = await clientAs(stack, sub, {
          capabilities,
          onUrl: async () => {
            asked += 1;
            return { action: 'accept' };
          },
          onForm: async () => {
            asked += 1;
            return { action: 'decline' };
          },
        });
        try {
          const call = () => client.callTool({ name: 'github_create_issue', arguments: { owner: 'octo-org', repo, title: 'x' } });
          const first = await call();
          assert.equal(asked, 0, 'never asked through an elicitation');
          assert.equal(first.isError, undefined, 'a normal result the assistant passes on');
          const data = first.structuredContent as { status: string; reason: string; connect_url: string; missing_scopes: string[] };
          assert.equal(data.status, 'not_connected');
          assert.equal(data.reason, 'not_connected');
          assert.deepEqual(data.missing_scopes, []);
          const link = new URL(data.connect_url);
          assert.equal(link.origin, stack.publicUrl);
          assert.equal(link.pathname, '/connect/github');
          assert.ok(resultText(first).includes(`Open this link to connect GitHub (access asked: `), resultText(first));
          assert.ok(resultText(first).includes(data.connect_url), 'the text carries the same link');
          const { user_code: code, verification_uri: activate } = first.structuredContent as {
            user_code: string;
            verification_uri: string;
          };
          assert.match(code, /^[2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4}$/);
          assert.equal(activate, `${stack.publicUrl}/activate`);
          assert.ok(resultText(first).includes(`open ${activate} and enter the code ${code}`), 'the short form beside the link');
          assert.deepEqual((first._meta as Record<string, unknown>)['mcp-connect-broker/authorization'], {
            reason: 'not_connected',
            authorizationContextId: (first._meta as Record<string, { authorizationContextId: string }>)['mcp-connect-broker/authorization']!
              .authorizationContextId,
            remediationHints: [{ type: 'url', url: data.connect_url }],
          });

          // A repeat before the person finished: held (bounded), then the same link, not a new one.
          const again = await call();
          assert.equal((again.structuredContent as { connect_url: string }).connect_url, data.connect_url);
          assert.equal((again.structuredContent as { user_code: string }).user_code, code, 'and the same code');

          const page = await completeConnect(new Browser(), data.connect_url, sub, { githubLogin });
          assert.match(textOf(page.html), new RegExp(`Connected as @${githubLogin}`));
          const done = await call();
          assert.equal(done.isError, undefined);
          assert.equal((done.structuredContent as { status: string }).status, 'created');
          const created = stack.github.issues.filter((i) => i.repo === repo);
          assert.equal(created.length, 1);
          assert.equal(created[0]!.author, githubLogin);
        } finally {
          await client.close();
        }
      });
    }

    it('answers a raw form-only call with a complete result carrying the link and no inputRequests', async () => {
      const r = await callTool(stack, await stack.token('no-url-raw'), 'github_whoami', {}, {}, { elicitation: { form: {} } });
      assert.equal(r.status, 200);
      assert.equal(r.json.result.resultType, 'complete');
      assert.equal(r.json.result.inputRequests, undefined);
      assert.equal(r.json.result.isError, undefined);
      assert.match(r.json.result.structuredContent.connect_url, new RegExp(`^${stack.publicUrl}/connect/github\\?req=`));
    });
  });

  describe('a 2025-11-25 client', () => {
    it('gets -32042 with our connect URL, and its plain repeat creates the issue once connected', async () => {
      const sub = 'legacy-user';
      const githubLogin = freshLogin('legacy');
      const client = await legacyClient({ url: stack.mcpUrl, token: await stack.token(sub) });
      try {
        const args = { owner: 'octo-org', repo: 'legacy', title: 'From the past' };
        const error = await client.callTool({ name: 'github_create_issue', arguments: args }).then(
          () => assert.fail('expected UrlElicitationRequiredError'),
          (err: unknown) => err,
        );
        assert.ok(error instanceof UrlElicitationRequiredError, `got ${String(error)}`);
        assert.equal(error.code, -32042);
        assert.equal(error.elicitations.length, 1);
        const elicitation = error.elicitations[0]!;
        assert.equal(elicitation.mode, 'url');
        const link = new URL(elicitation.url);
        assert.equal(link.origin, stack.publicUrl);
        assert.equal(link.pathname, '/connect/github');
        assert.deepEqual([...link.searchParams.keys()], ['req']);
        assert.equal(typeof elicitation.elicitationId, 'string');
        assert.ok(elicitation.elicitationId.length > 0);
        assert.match(elicitation.message, /Connect your GitHub account/);

        const page = await completeConnect(new Browser(), elicitation.url, sub, { githubLogin });
        assert.match(textOf(page.html), new RegExp(`Connected as @${githubLogin}`));

        const result = await client.callTool({ name: 'github_create_issue', arguments: args });
        assert.equal(result.isError, undefined);
        const created = stack.github.issues.filter((i) => i.repo === 'legacy');
        assert.equal(created.length, 1);
        assert.equal(created[0]!.author, githubLogin);
        assert.deepEqual(result.structuredContent, {
          status: 'created',
          number: created[0]!.number,
          url: created[0]!.html_url,
          repository: 'octo-org/legacy',
        });
      } finally {
        await client.close();
      }
    });
  });

  describe('a repeat whose hold expires', () => {
    it('answers input_required again with the same link when the user has not finished (holdSeconds 1)', async () => {
      const token = await stack.token('hold-expiry-user');
      const args = { owner: 'octo-org', repo: 'slow', title: 'Later' };
      const first = await callTool(stack, token, 'github_create_issue', args);
      const url = first.json.result.inputRequests[CONNECT_KEY].params.url as string;

      const started = Date.now();
      const second = await callTool(stack, token, 'github_create_issue', args, {
        inputResponses: { [CONNECT_KEY]: { action: 'accept' } },
        requestState: first.json.result.requestState,
      });
      const held = Date.now() - started;
      assert.equal(second.json.error, undefined);
      assert.equal(second.json.result.resultType, 'input_required');
      assert.equal(second.json.result.inputRequests[CONNECT_KEY].params.url, url, 'the same link');
      assert.ok(held >= 900, `held for the hold period (${held} ms)`);
      assert.ok(held < 5000, `and no longer (${held} ms)`);

      const third = await callTool(stack, token, 'github_create_issue', args, {
        inputResponses: { [CONNECT_KEY]: { action: 'accept' } },
        requestState: second.json.result.requestState,
      });
      assert.equal(third.json.result.resultType, 'input_required');
      assert.equal(third.json.result.inputRequests[CONNECT_KEY].params.url, url, 'still the same link');

      // The link is still live for its owner.
      const browser = new Browser();
      await signIn(browser, stack, 'hold-expiry-user');
      const page = await browser.open(url);
      assert.equal(page.status, 200);
      assert.match(page.html, /name="decision" value="allow"/);
    });
  });

  describe('requestState', () => {
    const args = { owner: 'octo-org', repo: 'state', title: 'Signed' };
    let aliceToken: string;
    let state: string;
    before(async () => {
      aliceToken = await stack.token('state-alice');
      const first = await callTool(stack, aliceToken, 'github_create_issue', args);
      state = first.json.result.requestState;
      assert.equal(typeof state, 'string');
    });

    function assertRejected(r: Awaited<ReturnType<typeof rawCall>>): void {
      assert.equal(r.status, 200);
      assert.equal(r.json.result, undefined);
      assert.deepEqual(r.json.error, {
        code: -32602,
        message: 'Invalid or expired requestState',
        data: { reason: 'invalid_request_state' },
      });
    }

    const accept = { [CONNECT_KEY]: { action: 'accept' } };

    it('rejects a state whose payload was tampered with -32602', async () => {
      const [v, payload, mac] = state.split('.') as [string, string, string];
      const i = Math.floor(payload.length / 2);
      const flipped = payload.slice(0, i) + (payload[i] === 'A' ? 'B' : 'A') + payload.slice(i + 1);
      assert.notEqual(flipped, payload);
      assertRejected(
        await callTool(stack, aliceToken, 'github_create_issue', args, { inputResponses: accept, requestState: `${v}.${flipped}.${mac}` }),
      );
    });

    it('rejects a garbage state string with -32602', async () => {
      assertRejected(
        await callTool(stack, aliceToken, 'github_create_issue', args, { inputResponses: accept, requestState: 'not-a-request-state' }),
      );
    });

    it('rejects a numeric state with -32602', async () => {
      assertRejected(await callTool(stack, aliceToken, 'github_create_issue', args, { inputResponses: accept, requestState: 42 }));
    });

    it('rejects a state minted for another user with -32602', async () => {
      assertRejected(
        await callTool(stack, await stack.token('state-bob'), 'github_create_issue', args, { inputResponses: accept, requestState: state }),
      );
    });

    it('rejects a state replayed on another tool with -32602', async () => {
      assertRejected(await callTool(stack, aliceToken, 'github_whoami', {}, { inputResponses: accept, requestState: state }));
    });

    it('rejects a state replayed with different arguments with -32602', async () => {
      assertRejected(
        await callTool(
          stack,
          aliceToken,
          'github_create_issue',
          { ...args, title: 'Something else' },
          { inputResponses: accept, requestState: state },
        ),
      );
    });

    it('still accepts the untouched state for the same user, tool and arguments', async () => {
      const r = await callTool(stack, aliceToken, 'github_create_issue', args, {
        inputResponses: { [CONNECT_KEY]: { action: 'decline' } },
        requestState: state,
      });
      assert.equal(r.json.error, undefined);
      assert.deepEqual(r.json.result.structuredContent, { status: 'not_connected', reason: 'decline' });
    });
  });

  describe('github_whoami and list_connections', () => {
    const githubLogin = freshLogin('who');
    let whoami: Awaited<ReturnType<typeof connect>>;
    before(async () => {
      whoami = await connect(stack, 'whoami-user', githubLogin);
    });

    it('reports the linked GitHub login after connecting', () => {
      assert.equal(whoami.isError, undefined);
      const id = String(stack.github.users.get(githubLogin)!.id);
      assert.deepEqual(whoami.structuredContent, { status: 'connected', login: githubLogin, id });
      assert.equal(resultText(whoami), `Your linked GitHub account is @${githubLogin} (id ${id}).`);
    });

    it('lists provider, login and scopes, and never a token', async () => {
      const result = await listConnections(stack, 'whoami-user');
      assert.equal(result.isError, undefined);
      const structured = result.structuredContent as { connections: Array<Record<string, unknown>>; manageUrl: string };
      assert.equal(structured.manageUrl, `${stack.publicUrl}/connections`);
      assert.equal(structured.connections.length, 1);
      const [c] = structured.connections;
      assert.equal(c!.provider, 'github');
      assert.equal(c!.login, githubLogin);
      assert.deepEqual(c!.scopes, ['repo']);
      assert.deepEqual(Object.keys(c!).sort(), ['connectedAt', 'lastUsedAt', 'login', 'provider', 'scopes', 'status']);
      assert.equal((c as { status?: string }).status, 'active');
      assert.match(resultText(result), new RegExp(`- GitHub: @${githubLogin} \\(scopes: repo\\)`));
      const wire = JSON.stringify(result);
      assert.doesNotMatch(wire, /gho_|access_?token|refresh_?token|sealed/i);
      assert.equal(stack.github.activeTokenCount(githubLogin), 1, 'a token exists at GitHub that could have leaked');
    });

    it('shows a second user only their own connections', async () => {
      const empty = await listConnections(stack, 'whoami-other-user');
      assert.deepEqual((empty.structuredContent as { connections: unknown[] }).connections, []);
      assert.match(resultText(empty), /^No accounts are linked yet\./);

      const otherLogin = freshLogin('other');
      await connect(stack, 'whoami-other-user', otherLogin);
      const mine = await listConnections(stack, 'whoami-other-user');
      assert.deepEqual(
        (mine.structuredContent as { connections: Array<{ login: string }> }).connections.map((c) => c.login),
        [otherLogin],
      );
      const theirs = await listConnections(stack, 'whoami-user');
      assert.deepEqual(
        (theirs.structuredContent as { connections: Array<{ login: string }> }).connections.map((c) => c.login),
        [githubLogin],
      );
    });
  });

  describe('disconnect_account', () => {
    async function disconnectWith(sub: string, answer: ElicitAnswer) {
      const forms: Array<{ message: string; schema: unknown }> = [];
      let urls = 0;
      const client = await clientAs(stack, sub, {
        onForm: async (message, schema) => {
          forms.push({ message, schema });
          return answer;
        },
        onUrl: async () => {
          urls += 1;
          return { action: 'decline' };
        },
      });
      try {
        const result = await client.callTool({ name: 'disconnect_account', arguments: { provider: 'github' } });
        return { result, forms, urls };
      } finally {
        await client.close();
      }
    }

    it('asks a form confirmation naming the account and, on confirm, revokes the grant and deletes the connection', async () => {
      const sub = 'disconnect-yes-user';
      const githubLogin = freshLogin('bye');
      await connect(stack, sub, githubLogin);
      assert.equal(stack.github.activeTokenCount(githubLogin), 1);

      const { result, forms, urls } = await disconnectWith(sub, { action: 'accept', content: { confirm: true } });
      assert.equal(urls, 0);
      assert.equal(forms.length, 1);
      assert.match(forms[0]!.message, new RegExp(`Disconnect your GitHub account @${githubLogin}\\?`));
      const schema = forms[0]!.schema as { type: string; properties: Record<string, { type: string }>; required?: string[] };
      assert.equal(schema.type, 'object');
      assert.deepEqual(Object.keys(schema.properties), ['confirm']);
      assert.equal(schema.properties.confirm!.type, 'boolean');

      assert.equal(result.isError, undefined);
      assert.deepEqual(result.structuredContent, { status: 'disconnected', provider: 'github', revoked: true });
      assert.equal(
        resultText(result),
        `Disconnected @${githubLogin} from GitHub: the grant was revoked at GitHub and the stored tokens were deleted.`,
      );
      assert.deepEqual(
        stack.github.revokedGrants.filter((g) => g.login === githubLogin),
        [{ clientId: stack.github.clientId, login: githubLogin }],
      );
      assert.equal(stack.github.activeTokenCount(githubLogin), 0, 'the old token no longer works at GitHub');

      const list = await listConnections(stack, sub);
      assert.deepEqual((list.structuredContent as { connections: unknown[] }).connections, []);
      const whoami = await callTool(stack, await stack.token(sub), 'github_whoami', {});
      assert.equal(whoami.json.result.resultType, 'input_required', 'whoami asks to connect again');
    });

    it('keeps the connection when the user declines the confirmation', async () => {
      const sub = 'disconnect-no-user';
      const githubLogin = freshLogin('stay');
      await connect(stack, sub, githubLogin);

      const { result, forms } = await disconnectWith(sub, { action: 'decline' });
      assert.equal(forms.length, 1);
      assert.equal(result.isError, undefined);
      assert.deepEqual(result.structuredContent, { status: 'kept', provider: 'github' });
      assert.equal(resultText(result), `Nothing was disconnected: @${githubLogin} on GitHub stays linked.`);
      assert.deepEqual(
        stack.github.revokedGrants.filter((g) => g.login === githubLogin),
        [],
      );
      assert.equal(stack.github.activeTokenCount(githubLogin), 1);
      const list = await listConnections(stack, sub);
      assert.deepEqual(
        (list.structuredContent as { connections: Array<{ login: string }> }).connections.map((c) => c.login),
        [githubLogin],
      );
    });

    it('says there is nothing to disconnect for a user with no connection, without asking', async () => {
      const revokedBefore = stack.github.revokedGrants.length;
      const { result, forms, urls } = await disconnectWith('disconnect-nothing-user', { action: 'accept', content: { confirm: true } });
      assert.equal(forms.length, 0);
      assert.equal(urls, 0);
      assert.equal(result.isError, undefined);
      assert.deepEqual(result.structuredContent, { status: 'not_connected', provider: 'github' });
      assert.equal(resultText(result), 'No GitHub account is linked, so there is nothing to disconnect.');
      assert.equal(stack.github.revokedGrants.length, revokedBefore);
    });

    it('rejects an unknown provider with an error naming the field and the allowed value', async () => {
      const r = await callTool(stack, await stack.token('disconnect-unknown-user'), 'disconnect_account', { provider: 'gitlab' });
      assert.equal(r.status, 200);
      assert.equal(r.json.error, undefined);
      assert.equal(r.json.result.isError, true);
      assert.equal(
        resultText(r.json.result),
        'Input validation error: Invalid arguments for tool disconnect_account: provider: Invalid input: expected "github"',
      );
    });
  });

  describe('bad arguments to github_create_issue', () => {
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['a missing title', { owner: 'octo-org', repo: 'args' }, /title: Invalid input: expected string, received undefined/],
      ['an owner with spaces', { owner: 'octo org', repo: 'args', title: 'x' }, /owner: owner must be a GitHub user or organisation name/],
      [
        'an owner ending in a hyphen',
        { owner: 'octo-', repo: 'args', title: 'x' },
        /owner: owner must be a GitHub user or organisation name/,
      ],
      [
        'an owner starting with a hyphen',
        { owner: '-octo', repo: 'args', title: 'x' },
        /owner: owner must be a GitHub user or organisation name/,
      ],
      [
        'an owner of 40 characters',
        { owner: 'a'.repeat(40), repo: 'args', title: 'x' },
        /owner: owner must be a GitHub user or organisation name/,
      ],
      ['the repo "."', { owner: 'octo-org', repo: '.', title: 'x' }, /repo: repo must be a GitHub repository name, not \. or \.\./],
      ['the repo ".."', { owner: 'octo-org', repo: '..', title: 'x' }, /repo: repo must be a GitHub repository name, not \. or \.\./],
      ['a repo with a slash', { owner: 'octo-org', repo: 'a/b', title: 'x' }, /repo: repo must be a GitHub repository name/],
      ['a repo of 101 characters', { owner: 'octo-org', repo: 'r'.repeat(101), title: 'x' }, /repo: repo must be a GitHub repository name/],
      [
        'labels that are not an array',
        { owner: 'octo-org', repo: 'args', title: 'x', labels: 'bug' },
        /labels: Invalid input: expected array, received string/,
      ],
    ];
    for (const [label, args, expected] of cases) {
      it(`rejects ${label} with a tool error naming the field, before asking to connect`, async () => {
        const before = stack.github.requests.length;
        const r = await callTool(stack, await stack.token('bad-args-user'), 'github_create_issue', args);
        assert.equal(r.status, 200);
        assert.equal(r.json.error, undefined);
        assert.equal(r.json.result.resultType, 'complete');
        assert.equal(r.json.result.isError, true);
        const text = resultText(r.json.result);
        assert.match(text, /^Input validation error: Invalid arguments for tool github_create_issue: /);
        assert.match(text, expected);
        assert.equal(stack.github.requests.length, before);
      });
    }
  });

  describe('names GitHub itself accepts for github_create_issue', () => {
    for (const [owner, repo] of [
      ['a', '.github'],
      ['a'.repeat(39), 'a..b'],
      ['octo-org-2', 'r'.repeat(100)],
      ['O1', '-_.'],
    ] as const) {
      it(`takes owner ${owner.length > 10 ? `${owner.length} characters` : owner} and repo ${repo.length > 10 ? `${repo.length} characters` : repo} and asks to connect`, async () => {
        const r = await callTool(stack, await stack.token('good-names-user'), 'github_create_issue', { owner, repo, title: 'x' });
        assert.equal(r.status, 200);
        assert.equal(r.json.result.resultType, 'input_required', r.text);
      });
    }
  });

  describe('GitHub API failures', () => {
    const sub = 'api-failure-user';
    const githubLogin = freshLogin('fail');
    before(async () => {
      await connect(stack, sub, githubLogin);
    });

    async function createIssue(args: Record<string, unknown>) {
      const client = await clientAs(stack, sub, {
        onUrl: async () => assert.fail('must not ask to connect'),
      });
      try {
        return await client.callTool({ name: 'github_create_issue', arguments: args });
      } finally {
        await client.close();
      }
    }

    it('reports a GitHub rate limit as a tool error and keeps the connection', async () => {
      stack.github.faults.api = 403;
      let result;
      try {
        result = await createIssue({ owner: 'octo-org', repo: 'limited', title: 'x' });
      } finally {
        stack.github.faults.api = undefined;
      }
      assert.equal(result.isError, true);
      assert.match(
        resultText(result),
        /^GitHub's rate limit was reached while trying to create an issue in octo-org\/limited; try again in about \d+ s\.$/,
      );
      const list = await listConnections(stack, sub);
      assert.deepEqual(
        (list.structuredContent as { connections: Array<{ login: string }> }).connections.map((c) => c.login),
        [githubLogin],
      );
      assert.equal(stack.github.activeTokenCount(githubLogin), 1);
    });

    it('reports a repository GitHub cannot find as a clear not-found tool error', async () => {
      const result = await createIssue({ owner: 'private-org', repo: 'secret', title: 'x' });
      assert.equal(result.isError, true);
      assert.equal(
        resultText(result),
        'GitHub could not find that (or the linked account cannot see it): could not create an issue in private-org/secret.',
      );
      assert.equal(stack.github.issues.filter((i) => i.owner === 'private-org').length, 0);
    });
  });

  describe('HTTP headers', () => {
    function postWithoutMcpMethod(token: string | undefined) {
      return fetch(stack.mcpUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-name': 'github_whoami',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 7,
          method: 'tools/call',
          params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
        }),
      });
    }

    it('answers an authenticated modern POST without Mcp-Method with 400 -32020', async () => {
      const res = await postWithoutMcpMethod(await stack.token('headers-user'));
      assert.equal(res.status, 400);
      const body = (await res.json()) as { error: { code: number; message: string } };
      assert.equal(body.error.code, -32020);
      assert.match(body.error.message, /the required Mcp-Method header is absent/);
    });

    it('checks the bearer token before the header ladder (401 without a token)', async () => {
      const res = await postWithoutMcpMethod(undefined);
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer /);
      await res.body?.cancel();
    });
  });

  describe('logs', () => {
    it('never contain a GitHub token', () => {
      assert.ok(stack.logs.length > 0);
      assert.equal(stack.logs.filter((l) => /gho_/.test(l)).length, 0);
    });
  });
});

describe('a repeat that arrives while the user is still in the browser', () => {
  const stack = useStack({ holdSeconds: 10 });

  it('is held until the GitHub callback lands and then returns the created issue (holdSeconds 10)', async () => {
    const sub = 'early-repeat-user';
    const githubLogin = freshLogin('early');
    const browser = new Browser();
    let finishing: Promise<string> | undefined;
    let asked = 0;
    let authorizeStartedAt = 0;
    const client = await clientAs(stack, sub, {
      onUrl: async (url) => {
        asked += 1;
        let page = await browser.open(url);
        if (/Development sign-in/.test(page.html)) page = await browser.submit(page, { fields: { login: sub } });
        page = await browser.submit(page, { button: 'allow' });
        assert.match(page.html, /GitHub stand-in/);
        const atGitHub = page;
        finishing = (async () => {
          // The user finishes at GitHub only once the repeat is held.
          await heldCalls(stack);
          authorizeStartedAt = Date.now();
          const done = await browser.submit(atGitHub, { button: 'authorize', fields: { login: githubLogin } });
          return textOf(done.html);
        })();
        return { action: 'accept' };
      },
    });
    const started = Date.now();
    const result = await closing(client, (c) =>
      c.callTool({ name: 'github_create_issue', arguments: { owner: 'octo-org', repo: 'early', title: 'Held' } }),
    );
    const returnedAt = Date.now();
    assert.ok(finishing, 'the browser flow was started');
    assert.equal(asked, 1, 'the held repeat did not ask again');
    assert.match(await finishing, new RegExp(`Connected as @${githubLogin}`));

    assert.equal(result.isError, undefined);
    assert.deepEqual(result.structuredContent, {
      status: 'created',
      number: 1,
      url: `${stack.github.webUrl}/octo-org/early/issues/1`,
      repository: 'octo-org/early',
    });
    const exchange = stack.github.requests.find((r) => r.method === 'POST' && r.path === '/login/oauth/access_token');
    assert.ok(exchange, 'the callback exchanged the code');
    assert.ok(authorizeStartedAt > 0 && returnedAt >= authorizeStartedAt, 'returned after the user finished at GitHub');
    assert.ok(returnedAt >= exchange.at, 'returned after the callback exchanged the code');
    assert.ok(returnedAt - started < 6000, `released well before the 10 s hold ended (${returnedAt - started} ms)`);
    assert.equal(stack.github.issues.length, 1);
    assert.equal(stack.github.issues[0]!.author, githubLogin);
  });
});
