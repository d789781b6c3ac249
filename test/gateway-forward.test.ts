import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UrlElicitationRequiredError } from '@modelcontextprotocol/client';
import { Browser } from './support/browser.js';
import { comparable, connectGitHub, foreignMeta, useGateway } from './support/gateway.js';
import { closing, envelope, legacyClient, rawCall, resultText } from './support/mcp.js';
import { clientAs } from './support/suite.js';
import { readConnection } from './support/seed.js';
import { completeConnect } from './support/stack.js';
import { allContentResult, ODD_RESULT } from './support/upstream-server.js';

/** Sequential forwarded calls that must share one kept-alive upstream connection. */
const CALLS = 20;

const ECHO_DECLARED = {
  name: 'echo',
  description: 'Echoes text (declared)',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
};

describe('gateway: provider and auth: none upstreams (2026-07-28), tools/list and tools/call through the broker', () => {
  const {
    stack,
    servers: { github, tracker, open },
  } = useGateway(
    {
      github: {
        era: 'modern',
        entry: { provider: 'github', scopes: ['repo'], timeoutMs: 3000, tools: { exclude: ['ask'], declared: [ECHO_DECLARED] } },
      },
      tracker: { era: 'modern', entry: { provider: 'github', displayName: 'Tracker', tools: { shareSeen: true } } },
      open: { era: 'modern', anonymous: true, entry: { auth: 'none', toolPrefix: 'open.', tools: { include: ['echo', 'all_content'] } } },
    },
    { holdSeconds: 1, env: { UPSTREAM_MAX_RESULT_BYTES: String(1024 * 1024) } },
  );

  const list = async (sub: string) => {
    const client = await clientAs(stack, sub);
    return closing(client, async (c) => (await c.listTools()).tools);
  };
  const call = async (sub: string, name: string, args: Record<string, unknown> = {}, meta?: Record<string, unknown>) => {
    const client = await clientAs(stack, sub);
    return closing(client, (c) => c.callTool({ name, arguments: args, ...(meta ? { _meta: meta } : {}) }));
  };

  it('lists, for a user without a connection, the declared tools, else the definitions last seen where the operator shares them, else the connect tool — asking nothing', async () => {
    const asked: string[] = [];
    const carol = await clientAs(stack, 'carol', {
      onUrl: async (url) => {
        asked.push(url);
        return { action: 'decline' };
      },
    });
    try {
      const before = tracker.requests.length;
      let names = (await carol.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('github_echo'), 'the declared tool');
      assert.ok(!names.includes('github_all_content'), 'not the live list');
      assert.equal((await carol.listTools()).tools.find((t) => t.name === 'github_echo')!.description, 'Echoes text (declared)');
      assert.ok(names.includes('tracker_connect'), 'nothing declared or seen: the connect tool');
      assert.ok(!names.some((n) => n.startsWith('tracker_') && n !== 'tracker_connect'));
      assert.equal(tracker.requests.length, before, 'no call reached the upstream without a token');

      await connectGitHub(stack, 'dave', 'hubot');
      assert.ok(
        (await list('dave')).some((t) => t.name === 'tracker_echo'),
        "dave's live list",
      );
      const row = await stack.broker.broker.store.upstreamTools.get('tracker');
      assert.ok(row && JSON.parse(row.definitions_json).some((t: { name: string }) => t.name === 'echo'), 'stored for every instance');

      names = (await carol.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('tracker_echo'), 'the definitions last seen (tools.shareSeen)');
      assert.ok(!names.includes('tracker_connect'));
      assert.equal(tracker.requests.filter((r) => r.who === undefined && r.method === 'tools/list').length, 0);
      assert.deepEqual(asked, [], 'listing never asks the user anything');
    } finally {
      await carol.close();
    }
  });

  it("lists a connected user's live upstream tools fetched with their own GitHub token, prefixed and filtered; a live name equal to a built-in is hidden", async () => {
    const { accessToken } = await connectGitHub(stack, 'alice', 'octocat');
    const before = github.requests.length;
    const names = (await list('alice')).map((t) => t.name);
    for (const n of ['github_echo', 'github_all_content', 'github_failing', 'github_big', 'github_confirm'])
      assert.ok(names.includes(n), n);
    assert.ok(!names.includes('github_ask'), 'excluded by tools.exclude');
    assert.ok(!names.some((n) => n.length > 128), 'a name past 128 characters once prefixed is hidden');
    assert.equal(names.filter((n) => n === 'github_whoami').length, 1, "only the built-in github_whoami: the upstream's whoami is hidden");
    assert.deepEqual(
      names.filter((n) => n.startsWith('open.')),
      ['open.echo', 'open.all_content'],
      'tools.include',
    );
    for (const builtin of ['connect_account', 'list_connections', 'github_create_issue']) assert.ok(names.includes(builtin), builtin);
    const listed = github.requests.slice(before).filter((r) => r.method === 'tools/list');
    assert.equal(listed.length, 1);
    assert.ok(
      listed.every((r) => r.token === accessToken && r.who === 'octocat'),
      "the upstream was listed with alice's own token",
    );
    assert.ok(stack.logs.some((l) => l.includes('"upstream_tool_hidden"') && l.includes('github_whoami')));
    const echo = (await list('alice')).find((t) => t.name === 'github_echo')!;
    assert.equal(echo.description, 'Echoes text back', 'the live definition, not the declared one');
  });

  it('forwards tools/call with the caller’s token and returns every content type, structuredContent, isError and foreign _meta unchanged, both ways', async () => {
    const { accessToken } = await connectGitHub(stack, 'alice-content', 'octocat');
    const clientTrace = {
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      tracestate: 'acme=1',
      baggage: 'user=alice',
    };
    const result = await call('alice-content', 'github_all_content', {}, { 'acme.example/request': 'r-1', ...clientTrace });
    const sent = github.calls('all_content').at(-1)!;
    assert.equal(sent.token, accessToken);
    assert.equal(sent.meta?.['acme.example/request'], 'r-1', "the client's own _meta reaches the upstream");
    for (const key of Object.keys(clientTrace))
      assert.equal(sent.meta?.[key], undefined, `the client's ${key} does not reach the upstream`);
    assert.deepEqual(
      (sent.meta?.['io.modelcontextprotocol/clientInfo'] as { name?: string })?.name,
      'mcp-connect-broker',
      "the protocol's _meta keys are the broker's own, not the client's",
    );
    const expected = comparable(allContentResult(foreignMeta(sent.meta)) as unknown as Record<string, unknown>);
    assert.deepEqual(comparable(result as Record<string, unknown>), expected);
    assert.equal((result._meta as Record<string, unknown>)['acme.example/trace'], 'trace-1');
    assert.equal(
      (result._meta as Record<string, unknown>)['io.modelcontextprotocol/related-task'],
      undefined,
      "the upstream's protocol keys stay upstream",
    );

    const failing = await call('alice-content', 'github_failing');
    assert.deepEqual(comparable(failing as Record<string, unknown>), {
      content: [{ type: 'text', text: 'the upstream tool failed on purpose' }],
      isError: true,
    });
  });

  it('passes a result the SDK does not know (a newer content type, extra fields) through unchanged', async () => {
    await connectGitHub(stack, 'alice-odd', 'octocat');
    const r = await rawCall(stack.mcpUrl, await stack.token('alice-odd'), {
      method: 'tools/call',
      params: { name: 'github_odd_content', arguments: {}, _meta: envelope() },
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(comparable(r.json.result), ODD_RESULT);
  });

  it(`never sends a 2026-07-28 upstream initialize, a session id, the MCP access token or any header of the client; ${CALLS} calls open at most one connection`, async () => {
    await connectGitHub(stack, 'alice-wire', 'octocat');
    const mcpToken = await stack.token('alice-wire');
    const before = github.requests.length;
    for (let i = 0; i < CALLS; i++) {
      const r = await rawCall(
        stack.mcpUrl,
        mcpToken,
        { method: 'tools/call', params: { name: 'github_echo', arguments: { text: `hi ${i}` }, _meta: envelope() } },
        { 'x-client-secret-header': 'do-not-forward', cookie: 'session=abc' },
      );
      assert.equal(r.status, 200, r.text);
      assert.equal(resultText(r.json.result), `hi ${i}`);
    }
    const all = github.requests;
    assert.ok(!all.some((r) => r.method === 'initialize' || r.method === 'notifications/initialized'), 'no initialize');
    assert.ok(!all.some((r) => r.sessionId !== undefined), 'no Mcp-Session-Id');
    assert.equal(all.filter((r) => r.method === 'server/discover').length, 1, 'one server/discover probe per process');
    for (const r of all) {
      const values = Object.entries(r.headers);
      assert.ok(!values.some(([, v]) => v.includes(mcpToken)), 'the MCP access token never reaches the upstream');
      assert.ok(!values.some(([k]) => k === 'x-client-secret-header' || k === 'cookie'), 'no header of the client is forwarded');
    }
    const mine = all.slice(before);
    assert.equal(mine.filter((r) => r.method === 'tools/call').length, CALLS, 'every call reached the upstream');
    assert.equal(new Set(mine.map((r) => r.remotePort)).size, 1, `the ${CALLS} calls came over one kept-alive connection`);
  });

  it("keeps users apart: each upstream call carries its own user's token, and a user never gets another's cached live list", async () => {
    const a = await connectGitHub(stack, 'iso-a', 'octocat');
    const b = await connectGitHub(stack, 'iso-b', 'hubot');
    const listedBefore = github.requests.filter((r) => r.method === 'tools/list').length;
    const ra = await call('iso-a', 'github_echo', { text: 'a' });
    const rb = await call('iso-b', 'github_echo', { text: 'b' });
    assert.equal((ra.structuredContent as { who: string }).who, 'octocat');
    assert.equal((rb.structuredContent as { who: string }).who, 'hubot');
    assert.equal(github.calls('echo').find((r) => (r.arguments as { text?: string }).text === 'a')!.token, a.accessToken);
    assert.equal(github.calls('echo').find((r) => (r.arguments as { text?: string }).text === 'b')!.token, b.accessToken);

    assert.ok(
      (await list('iso-a')).some((t) => t.name === 'github_all_content'),
      "a's live list (fetched to check the call's tool, now cached)",
    );
    const nobody = await list('iso-c');
    assert.ok(!nobody.some((t) => t.name === 'github_all_content'), "c, not connected, never gets a's cached live list");
    await list('iso-b');
    const listed = github.requests.filter((r) => r.method === 'tools/list').slice(listedBefore);
    assert.deepEqual(
      listed.map((r) => r.who),
      ['octocat', 'hubot'],
      'each user’s own list fetched with their own token; c caused no fetch',
    );
  });

  it('asks a caller without a connection through the same URL elicitation as our tools, then forwards the call; a 2025-11-25 client gets -32042', async () => {
    const browser = new Browser();
    const links: string[] = [];
    const erin = await clientAs(stack, 'erin', {
      onUrl: async (url) => {
        links.push(url);
        await completeConnect(browser, url, 'erin', { githubLogin: 'erin-gh' });
        return { action: 'accept' };
      },
    });
    const result = await closing(erin, (c) => c.callTool({ name: 'github_echo', arguments: { text: 'after connect' } }));
    assert.equal(links.length, 1);
    assert.match(links[0]!, /\/connect\/github\?req=[A-Za-z0-9_-]{43}$/);
    assert.equal(resultText(result), 'after connect');
    assert.equal((result.structuredContent as { who: string }).who, 'erin-gh');

    const legacy = await legacyClient({ url: stack.mcpUrl, token: await stack.token('frank') });
    await closing(legacy, async (c) => {
      await assert.rejects(c.callTool({ name: 'github_echo', arguments: { text: 'x' } }), (err: unknown) => {
        assert.ok(err instanceof UrlElicitationRequiredError);
        assert.match(err.elicitations[0]!.url, /\/connect\/github\?req=/);
        return true;
      });
    });

    // The requestState is bound to the principal, the tool and its arguments, by the broker's codec.
    const first = await rawCall(stack.mcpUrl, await stack.token('gina'), {
      method: 'tools/call',
      params: { name: 'github_echo', arguments: { text: 'mine' }, _meta: envelope() },
    });
    assert.equal(first.json.result.resultType, 'input_required');
    const replay = await rawCall(stack.mcpUrl, await stack.token('gina'), {
      method: 'tools/call',
      params: {
        name: 'github_echo',
        arguments: { text: 'other arguments' },
        requestState: first.json.result.requestState,
        inputResponses: { connect_account: { action: 'accept' } },
        _meta: envelope(),
      },
    });
    assert.equal(replay.json.error?.code, -32602, replay.text);
  });

  it('answers <prefix>connect with the connect elicitation, then says the tools are available', async () => {
    const browser = new Browser();
    const client = await clientAs(stack, 'hank', {
      onUrl: async (url) => {
        await completeConnect(browser, url, 'hank', { githubLogin: 'hank-gh' });
        return { action: 'accept' };
      },
    });
    await closing(client, async (c) => {
      const result = await c.callTool({ name: 'tracker_connect', arguments: {} });
      assert.match(resultText(result), /Tracker is connected\. Its tools are available now/);
      assert.ok(
        (await c.listTools()).tools.some((t) => t.name === 'tracker_all_content'),
        'the live list after connecting',
      );
    });
  });

  it('refuses filtered-out and unknown upstream tools with -32602, never forwarding them', async () => {
    await connectGitHub(stack, 'ivan', 'octocat');
    const token = await stack.token('ivan');
    const before = github.requests.length + open.requests.length;
    for (const name of ['github_ask', 'open.failing', 'nosuch_tool']) {
      const r = await rawCall(stack.mcpUrl, token, { method: 'tools/call', params: { name, arguments: {}, _meta: envelope() } });
      assert.equal(r.json.error?.code, -32602, `${name}: ${r.text}`);
    }
    assert.equal(github.requests.length + open.requests.length, before, 'nothing was forwarded');
    const unknownUpstream = await rawCall(stack.mcpUrl, token, {
      method: 'tools/call',
      params: { name: 'github_nosuch', arguments: {}, _meta: envelope() },
    });
    assert.equal(unknownUpstream.json.error?.code, -32602, 'a name the upstream does not list is -32602');
    assert.equal(github.calls('nosuch').length, 0, 'and never forwarded either');
  });

  it('turns an upstream that is down, slow, failing, malformed or too large into tool errors naming its id, the connection untouched', async () => {
    await connectGitHub(stack, 'judy', 'octocat');
    const cases: Array<[string, () => void, RegExp, string]> = [
      ['down', () => (github.faults.down = true), /"github" cannot be reached/, 'github_echo'],
      ['slow', () => (github.faults.slowMs = 7000), /"github" did not answer in time/, 'github_echo'],
      ['500', () => (github.faults.status500 = true), /"github" failed to answer/, 'github_echo'],
      ['malformed', () => (github.faults.malformed = true), /"github" sent an answer this broker cannot read/, 'github_echo'],
      ['10 MB', () => undefined, /"github" answered with more than 1048576 bytes/, 'github_big'],
    ];
    for (const [what, fault, expected, tool] of cases) {
      fault();
      try {
        const started = Date.now();
        const result = await call('judy', tool, { text: 'x' });
        assert.equal(result.isError, true, what);
        assert.match(resultText(result), expected, what);
        assert.ok(Date.now() - started < 6500, `${what} answered within the timeout, not after the slow upstream`);
      } finally {
        for (const k of Object.keys(github.faults)) delete github.faults[k as keyof typeof github.faults];
      }
      assert.equal((await readConnection(stack.env, 'judy', 'github'))?.status, 'active', `${what}: the connection is untouched`);
    }
    assert.ok(stack.logs.some((l) => l.includes('"upstream_call_failed"') && l.includes('too_large')));
  });

  it('falls back to the declared tools, logged, when the upstream is down at list time, for a connected user', async () => {
    await connectGitHub(stack, 'mona-down', 'octocat');
    github.faults.down = true;
    try {
      const names = (await list('mona-down')).map((t) => t.name);
      assert.ok(names.includes('github_echo'), 'the declared tool');
      assert.ok(!names.includes('github_all_content'), 'no live list');
    } finally {
      delete github.faults.down;
    }
    assert.ok(stack.logs.some((l) => l.includes('"upstream_list_failed"') && l.includes('"upstream":"github"')));
    assert.ok(
      (await list('mona-down')).some((t) => t.name === 'github_all_content'),
      'the live list once it is back (failures are not cached)',
    );
  });

  it('calls an auth: none upstream without any Authorization header, for any signed-in user', async () => {
    const before = open.requests.length;
    const result = await call('kim', 'open.all_content', {}, { 'acme.example/request': 'r-2' });
    const sent = open.calls('all_content').at(-1)!;
    assert.deepEqual(
      comparable(result as Record<string, unknown>),
      comparable(allContentResult(foreignMeta(sent.meta)) as unknown as Record<string, unknown>),
    );
    const mine = open.requests.slice(before);
    assert.ok(mine.length >= 1);
    assert.ok(
      mine.every((r) => r.headers.authorization === undefined),
      'no Authorization header',
    );
  });

  it('audits each forwarded call: principal, upstream, tool, outcome and duration, never arguments or tokens', async () => {
    const { accessToken } = await connectGitHub(stack, 'leo', 'octocat');
    await call('leo', 'github_echo', { text: 'secret-argument-value' });
    github.faults.status500 = true;
    try {
      await call('leo', 'github_echo', { text: 'again' });
    } finally {
      delete github.faults.status500;
    }
    // The rows are written after the answer: wait for them, not for a guess.
    await stack.broker.broker.forwardedCallsAudited();
    const rows = await stack.broker.broker.store.audit.list({ subject: 'leo', event: 'upstream_call' });
    assert.equal(rows.length, 2);
    assert.deepEqual(
      rows.map((r) => [r.provider, r.detail?.replace(/ms=\d+/, 'ms=N')]),
      [
        ['github', 'tool=echo outcome=result ms=N'],
        ['github', 'tool=echo outcome=failed/http_error ms=N'],
      ],
    );
    const everything = JSON.stringify(await stack.broker.broker.store.audit.list());
    assert.ok(!everything.includes('secret-argument-value') && !everything.includes(accessToken));
    assert.ok(!stack.logs.some((l) => l.includes(accessToken) || l.includes('secret-argument-value')), 'nor in any log line');
  });
});
