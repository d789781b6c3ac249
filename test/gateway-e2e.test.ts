// The gateway as a whole, through the broker's own /mcp endpoint (issue 13's proofs): an upstream's
// input_required relayed with its requestState sealed in ours, and a 403 scope challenge answered
// with the incremental-scope elicitation and a repeated call that succeeds with the new token.
// Real parts: the test IdP, the GitHub stand-in, the SDK-built upstream fixture (2026-07-28) and the
// official 2026-07-28 client.
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import { inputRequired } from '@modelcontextprotocol/server';
import { Browser } from './support/browser.js';
import { askedBy, connectGitHub, providersFile, useGateway } from './support/gateway.js';
import { closing, envelope, modernClient, rawCall, resultText, type ElicitAnswer } from './support/mcp.js';
import { clientAs } from './support/suite.js';
import { readConnection } from './support/seed.js';
import { completeConnect, startStack, type Stack } from './support/stack.js';
import { portOf } from './support/listen.js';
import { bindUpstreamServer, startProtectedUpstream, type ProtectedUpstream } from './support/mcp-auth-upstream.js';

/** What the fixture's `confirm` asks, exactly as it builds it. */
const CONFIRM_REQUESTS = {
  confirm: inputRequired.elicit({ message: 'Really?', requestedSchema: { type: 'object', properties: {} } }),
};

describe('gateway end to end: relayed input_required and scope challenges through the broker', () => {
  const {
    stack,
    servers: { github, legacy },
    file,
    entries,
  } = useGateway(
    {
      github: { era: 'modern', entry: { provider: 'github', scopes: { required: ['repo'], allow: ['admin:org'] } } },
      legacy: { era: 'legacy', entry: { provider: 'github', toolPrefix: 'old_' } },
    },
    { holdSeconds: 1 },
  );

  const first = async (sub: string) => {
    const res = await rawCall(stack.mcpUrl, await stack.token(sub), {
      method: 'tools/call',
      params: { name: 'github_confirm', arguments: {}, _meta: envelope() },
    });
    assert.equal(res.json.result?.resultType, 'input_required', res.text);
    return res.json.result as { inputRequests: Record<string, unknown>; requestState: string };
  };
  const repeat = async (sub: string, requestState: string, inputResponses: Record<string, unknown>) =>
    rawCall(stack.mcpUrl, await stack.token(sub), {
      method: 'tools/call',
      params: { name: 'github_confirm', arguments: {}, requestState, inputResponses, _meta: envelope() },
    });

  it("relays the upstream's inputRequests, each question led by its name, and hands it back its own requestState byte-exact with the answer as given: accept, decline, cancel", async () => {
    await connectGitHub(stack, 'rita', 'octocat');
    const answers: ElicitAnswer[] = [{ action: 'accept', content: { note: 'yes «really»' } }, { action: 'decline' }, { action: 'cancel' }];
    for (const answer of answers) {
      const asked = await first('rita');
      assert.deepEqual(asked.inputRequests, askedBy('github', CONFIRM_REQUESTS), 'the upstream’s inputRequests, led by its name');
      assert.notEqual(asked.requestState, 'upstream-opaque-state');
      assert.ok(!asked.requestState.includes('upstream-opaque-state'), 'the upstream state is sealed, not readable');
      const done = await repeat('rita', asked.requestState, { confirm: answer });
      assert.equal(done.json.result?.isError, undefined, done.text);
      assert.equal(resultText(done.json.result), `confirmed: ${answer.action}`);
      const received = github.calls('confirm').at(-1)!;
      assert.equal(received.requestState, 'upstream-opaque-state', 'its own state, byte-exact');
      assert.deepEqual(received.inputResponses, { confirm: answer }, 'the answer as given');
      assert.equal(received.who, 'octocat');
    }

    // The official client, answering the relayed form itself.
    const forms: Array<{ message: string; schema: unknown }> = [];
    const client = await clientAs(stack, 'rita', {
      onForm: async (message, schema) => {
        forms.push({ message, schema });
        return { action: 'accept', content: {} };
      },
    });
    const result = await closing(client, (c) => c.callTool({ name: 'github_confirm', arguments: {} }));
    assert.equal(resultText(result), 'confirmed: accept');
    assert.deepEqual(forms, [{ message: 'github asks: Really?', schema: { type: 'object', properties: {} } }]);
    assert.equal(github.calls('confirm').at(-1)!.requestState, 'upstream-opaque-state');
  });

  it('refuses a tampered state and a state replayed by another user with -32602, forwarding neither', async () => {
    await connectGitHub(stack, 'tess', 'octocat');
    await connectGitHub(stack, 'ugo', 'hubot');
    const asked = await first('tess');
    const calls = github.calls('confirm').length;
    const s = asked.requestState;
    const i = Math.floor(s.length / 2);
    const tampered = s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
    const bad = await repeat('tess', tampered, { confirm: { action: 'accept', content: {} } });
    assert.equal(bad.json.error?.code, -32602, bad.text);
    const foreign = await repeat('ugo', asked.requestState, { confirm: { action: 'accept', content: {} } });
    assert.equal(foreign.json.error?.code, -32602, foreign.text);
    assert.equal(github.calls('confirm').length, calls, 'nothing reached the upstream');
    // The owner's state still works.
    const done = await repeat('tess', asked.requestState, { confirm: { action: 'accept', content: {} } });
    assert.equal(resultText(done.json.result), 'confirmed: accept', done.text);
  });

  it('answers a 403 insufficient_scope with the incremental-scope elicitation for exactly the missing scopes; the repeat reaches the upstream with the new token', async () => {
    const old = await connectGitHub(stack, 'sam', 'octocat', { scopes: ['repo'] });
    github.faults.forbiddenScope = 'repo admin:org';
    const browser = new Browser();
    const asked: Array<{ url: string; message: string }> = [];
    try {
      const client = await clientAs(stack, 'sam', {
        onUrl: async (url, message) => {
          asked.push({ url, message });
          const page = await completeConnect(browser, url, 'sam', { githubLogin: 'octocat' });
          assert.equal(page.status, 200);
          delete github.faults.forbiddenScope;
          return { action: 'accept' };
        },
      });
      const result = await closing(client, (c) => c.callTool({ name: 'github_echo', arguments: { text: 'scoped' } }));
      assert.equal(resultText(result), 'scoped');
      assert.equal(asked.length, 1);
      assert.match(asked[0]!.url, /\/connect\/github\?req=[A-Za-z0-9_-]{43}$/);
      assert.match(asked[0]!.message, /\(admin:org\)/, 'exactly the missing scope');
      assert.doesNotMatch(asked[0]!.message, /\brepo\b.*admin:org|admin:org.*\brepo\b/);
      const scopes = (await readConnection(stack.env, 'sam', 'github'))!.scopes.split(' ');
      assert.ok(scopes.includes('admin:org') && scopes.includes('repo'), scopes.join(' '));
      const calls = github.calls('echo').filter((r) => (r.arguments as { text?: string }).text === 'scoped');
      assert.equal(calls.at(0)!.token, old.accessToken, 'the first try with the old token');
      assert.notEqual(calls.at(-1)!.token, old.accessToken, 'the repeat with the new token');
      assert.equal(calls.at(-1)!.who, 'octocat');
    } finally {
      delete github.faults.forbiddenScope;
    }
  });

  it("keeps two users apart under concurrent calls, in both eras: each upstream call carries its own user's token, each 2025-11-25 session is its user's", async () => {
    const tokens = {
      kim: (await connectGitHub(stack, 'kim', 'octocat')).accessToken,
      lou: (await connectGitHub(stack, 'lou', 'hubot')).accessToken,
    };
    const login = { kim: 'octocat', lou: 'hubot' } as const;
    const mcp = { kim: await stack.token('kim'), lou: await stack.token('lou') };
    const calls = Array.from({ length: 12 }, (_, i) => {
      const who = i % 2 === 0 ? 'kim' : 'lou';
      const name = i % 4 < 2 ? 'github_echo' : 'old_echo';
      return { who, name, text: `${who}-${i}` } as const;
    });
    const results = await Promise.all(
      calls.map((c) =>
        rawCall(stack.mcpUrl, mcp[c.who], {
          method: 'tools/call',
          params: { name: c.name, arguments: { text: c.text }, _meta: envelope() },
        }),
      ),
    );
    results.forEach((r, i) => {
      const c = calls[i]!;
      assert.deepEqual(r.json.result?.structuredContent, { text: c.text, who: login[c.who] }, r.text);
      const seen = (c.name === 'github_echo' ? github : legacy)
        .calls('echo')
        .find((x) => (x.arguments as { text?: string }).text === c.text)!;
      assert.equal(seen.token, tokens[c.who], `${c.text} went with its own user's token`);
    });
    const sessionsOf = (who: 'kim' | 'lou') =>
      new Set(
        legacy
          .calls('echo')
          .filter((x) => ((x.arguments as { text?: string }).text ?? '').startsWith(`${who}-`))
          .map((x) => x.sessionId),
      );
    const [k, l] = [sessionsOf('kim'), sessionsOf('lou')];
    assert.ok(k.size > 0 && l.size > 0);
    assert.ok(![...k].some((id) => id === undefined || l.has(id)), 'no 2025-11-25 session shared between the two users');
    for (const r of [...github.requests, ...legacy.requests])
      for (const v of Object.values(r.headers)) assert.ok(!v.includes(mcp.kim) && !v.includes(mcp.lou), 'no MCP access token upstream');
  });

  it("relays the sandbox GitHub MCP endpoint's delete_repository form confirmation as GitHub's own server would ask it", async () => {
    // The stand-in's /mcp (the sandbox's stand-in for GitHub's remote server) as a second upstream.
    const sandboxUrl = `${stack.github.webUrl}/mcp`;
    writeFileSync(
      file.path,
      JSON.stringify({
        upstreams: [...entries(), { id: 'sandbox', url: sandboxUrl, provider: 'github', scopes: ['repo'], toolPrefix: 'ghmcp_' }],
      }),
    );
    await stack.restart();
    const { accessToken } = await connectGitHub(stack, 'vic', 'octocat', { scopes: ['repo', 'delete_repo'] });
    const call = async (name: string, args: Record<string, unknown>, more: Record<string, unknown> = {}) =>
      rawCall(stack.mcpUrl, await stack.token('vic'), {
        method: 'tools/call',
        params: { name, arguments: args, ...more, _meta: envelope() },
      });
    const made = await call('ghmcp_create_issue', { owner: 'octocat', repo: 'doomed', title: 'before the end' });
    assert.equal(made.json.result?.isError, undefined, made.text);

    const target = { owner: 'octocat', repo: 'doomed' };
    const direct = await rawCall(sandboxUrl, accessToken, {
      method: 'tools/call',
      params: { name: 'delete_repository', arguments: target, _meta: envelope() },
    });
    assert.equal(direct.json.result?.resultType, 'input_required', direct.text);
    const askedUs = async () => {
      const res = await call('ghmcp_delete_repository', target);
      assert.equal(res.json.result?.resultType, 'input_required', res.text);
      assert.deepEqual(
        res.json.result.inputRequests,
        askedBy('sandbox', direct.json.result.inputRequests),
        'the form as the sandbox asks it, led by its name',
      );
      return res.json.result.requestState as string;
    };
    const kept = await call('ghmcp_delete_repository', target, {
      requestState: await askedUs(),
      inputResponses: { delete_repository_confirmation: { action: 'decline' } },
    });
    assert.equal(resultText(kept.json.result), 'Repository deletion was not confirmed. The repository was not deleted.');
    const gone = await call('ghmcp_delete_repository', target, {
      requestState: await askedUs(),
      inputResponses: { delete_repository_confirmation: { action: 'accept', content: { repository_name: 'octocat/doomed' } } },
    });
    assert.equal(resultText(gone.json.result), 'Repository octocat/doomed was deleted.', gone.text);
  });
});

describe('gateway end to end: an auth: mcp upstream configured in PROVIDERS_FILE, through the broker', () => {
  let stack: Stack;
  let tracker: ProtectedUpstream;
  let mcpServer: Server | undefined;
  let file: { path: string; remove(): void } | undefined;
  const mcpTokens: string[] = [];

  before(async () => {
    // The upstream's port bound first, so the file can name it; the broker's start-up discovery fails
    // until the upstream is there and is retried on first use.
    mcpServer = await bindUpstreamServer();
    file = providersFile({ upstreams: [{ id: 'tracker', url: `http://127.0.0.1:${portOf(mcpServer)}/mcp`, auth: 'mcp' }] });
    stack = await startStack({ holdSeconds: 1, env: { PROVIDERS_FILE: file.path } });
    tracker = await startProtectedUpstream({ mcpServer });
  });
  after(async () => {
    // Whatever `before` got to: a server left listening would keep the shard's process alive.
    await (stack as Stack | undefined)?.close();
    if ((tracker as ProtectedUpstream | undefined) !== undefined) await tracker.close();
    else mcpServer?.close();
    file?.remove();
  });

  const token = async (sub: string) => {
    const t = await stack.token(sub);
    mcpTokens.push(t);
    return t;
  };
  const names = async (sub: string) => {
    const client = await modernClient({ url: stack.mcpUrl, token: await token(sub) });
    return closing(client, async (c) => (await c.listTools()).tools.map((t) => t.name));
  };

  it('lists tracker_connect before anyone connected, asks at the call with a URL elicitation to /connect/tracker, forwards with the user’s own upstream token, then lists live', async () => {
    const before = await names('ann');
    assert.ok(before.includes('tracker_connect'), before.join(' '));
    assert.ok(!before.includes('tracker_whoami'));

    const browser = new Browser();
    const links: string[] = [];
    const client = await modernClient({
      url: stack.mcpUrl,
      token: await token('ann'),
      onUrl: async (url) => {
        links.push(url);
        let page = await browser.open(url);
        if (/Development sign-in/.test(page.html)) page = await browser.submit(page, { fields: { login: 'ann' } });
        assert.match(page.html, /Connect Tracker|tracker/i);
        page = await browser.submit(page, { button: 'allow' });
        assert.ok(page.url.startsWith(tracker.issuer), `at the upstream's own AS: ${page.trail.join(' -> ')}`);
        page = await browser.submit(page, { fields: { login: 'ann-at-tracker' } });
        assert.equal(page.status, 200, page.html);
        return { action: 'accept' };
      },
    });
    const result = await closing(client, (c) => c.callTool({ name: 'tracker_whoami', arguments: {} }));
    assert.equal(links.length, 1);
    assert.match(links[0]!, /\/connect\/tracker\?req=[A-Za-z0-9_-]{43}$/);
    assert.equal(resultText(result), 'you are ann-at-tracker');

    const claims = tracker.accepted.at(-1)!;
    assert.equal(claims.sub, 'ann-at-tracker');
    assert.ok([claims.aud].flat().includes(tracker.url), `aud = the upstream's URL: ${String(claims.aud)}`);

    const live = await names('ann');
    assert.ok(live.includes('tracker_whoami'), live.join(' '));
    assert.ok(!live.includes('tracker_connect'));
    // Another user, not connected: the connect tool, never what ann's token listed, never a call with anyone's token.
    const accepted = tracker.accepted.length;
    const other = await names('bea');
    assert.ok(!other.includes('tracker_whoami') && other.includes('tracker_connect'), other.join(' '));
    assert.equal(tracker.accepted.length, accepted, 'bea caused no upstream call');
  });

  it('relays its -32042 link to its own authorization server, led by its name, and refuses one elsewhere', async () => {
    const shown: Array<[string, string]> = [];
    const client = await modernClient({
      url: stack.mcpUrl,
      token: await token('ann'),
      onUrl: async (url, message) => (shown.push([url, message]), { action: 'decline' }),
    });
    const account = `${tracker.issuer}/account?from=tracker`;
    const declined = await closing(client, (c) => c.callTool({ name: 'tracker_open_link', arguments: { url: account } }));
    assert.deepEqual(shown, [[account, 'tracker asks: Confirm your tracker account.']]);
    assert.match(resultText(declined), /tracker's link was not opened/);
    const elsewhere = await closing(await modernClient({ url: stack.mcpUrl, token: await token('ann') }), (c) =>
      c.callTool({ name: 'tracker_open_link', arguments: { url: 'https://evil.example/account' } }),
    );
    assert.equal(elsewhere.isError, true);
    assert.match(resultText(elsewhere), /"tracker" asked you to open a link outside its own site/);
  });

  it('never lets an MCP access token of the broker reach the upstream: every bearer it saw is its own AS’s', async () => {
    assert.ok(tracker.bearers.length > 0);
    for (const bearer of tracker.bearers) {
      assert.ok(!mcpTokens.includes(bearer), 'not an MCP access token');
      assert.notEqual(decodeJwt(bearer).iss, stack.idp.issuer, "not a token of the broker's IdP");
    }
  });
});
