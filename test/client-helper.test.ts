// The helper `mcp-connect-broker/client`, driven through real MCP servers (the example issue
// service on its own port, and small in-process ones) by the official SDK client in both eras,
// against a loopback stand-in of the broker's token endpoint that follows issue 12's wire format.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport, UrlElicitationRequiredError } from '@modelcontextprotocol/client';
import { McpServer, createMcpHandler, type CallToolResult } from '@modelcontextprotocol/server';
import { exportJWK, generateKeyPair } from 'jose';
import * as z from 'zod/v4';
import { connectBroker, type BrokerOptions } from '../src/client/index.js';
import { open, seal, stateCipherKey, StateError, type SealedPayload } from '../src/client/state.js';
import { idpTokenVerifier } from '../examples/issue-service/bearer.js';
import { startIssueService, type IssueService } from '../examples/issue-service/service.js';
import { startBrokerTokenStandIn, type BrokerTokenStandIn } from './support/broker-token-standin.js';
import { startGitHubStandIn, type GitHubStandIn } from './support/github-standin.js';
import { freePort, startIdp, type StartedIdp } from './support/idp.js';
import { envelope, legacyClient, modernClient, rawCall, resultText } from './support/mcp.js';

const SECRET = 'issue-bot-secret-' + 'x'.repeat(24);
const STATE_KEY = 'a-state-key-of-at-least-thirty-two-bytes!';
const ARGS = { owner: 'octo-org', repo: 'hello', title: 'Filed by the example service' };

describe('mcp-connect-broker/client, through the example issue service', () => {
  let idp: StartedIdp;
  let github: GitHubStandIn;
  let broker: BrokerTokenStandIn;
  let service: IssueService;
  let audience: string;
  let otherAudience: string;
  const principal = (sub: string) => `${idp.issuer}\0${sub}`;
  const token = (sub: string, aud = audience) => idp.mintAccessToken({ sub, aud });
  const diagnostics: string[] = [];

  before(async () => {
    audience = `http://127.0.0.1:${await freePort()}/mcp`;
    otherAudience = `http://127.0.0.1:${await freePort()}/mcp`;
    idp = await startIdp({
      clients: [{ client_id: 'assistant', client_secret: 'assistant-secret', redirect_uris: ['http://127.0.0.1/cb'] }],
      resource: audience,
    });
    github = await startGitHubStandIn();
    broker = await startBrokerTokenStandIn({
      issuer: idp.issuer,
      services: [
        { id: 'issue-bot', secret: SECRET, audiences: [audience], allow: { github: ['public_repo', 'repo'] } },
        { id: 'other-bot', secret: 'other-secret-'.padEnd(40, 'y'), audiences: [otherAudience], allow: { github: ['public_repo'] } },
      ],
    });
    service = await startIssueService({
      brokerUrl: broker.url,
      serviceId: 'issue-bot',
      serviceSecret: SECRET,
      stateKey: STATE_KEY,
      oidcIssuer: idp.issuer,
      audience,
      githubApiUrl: github.apiUrl,
      broker: { waitSeconds: 5 },
      log: (line) => diagnostics.push(line),
    });
  });
  after(async () => {
    await service?.close();
    await broker?.close();
    await github?.close();
    await idp?.close();
  });
  beforeEach(() => {
    broker.requests.length = 0;
    broker.override = undefined;
  });

  it('connected: the callback gets the GitHub token, creates the issue, and the result carries no token', async () => {
    const gh = github.issueTokenFor('octocat', { scopes: ['public_repo'] });
    broker.connect(principal('alice'), { token: gh.accessToken, scopes: ['public_repo'], login: 'octocat' });
    const before = github.issues.length;
    const client = await modernClient({ url: audience, token: await token('alice') });
    const result = await client.callTool({ name: 'create_issue', arguments: ARGS });
    await client.close();

    assert.equal(result.isError, undefined, resultText(result));
    assert.match(resultText(result), /^Created octo-org\/hello#\d+ as octocat: /);
    assert.equal(github.issues.length, before + 1);
    assert.equal(github.issues.at(-1)!.author, 'octocat');
    assert.ok(!JSON.stringify(result).includes(gh.accessToken), 'the provider token never reaches the client');
    assert.equal(broker.requests.length, 1);
    const fields = broker.requests[0]!.fields;
    assert.equal(broker.requests[0]!.service, 'issue-bot', 'Basic client authentication as the service');
    assert.equal(fields.grant_type, 'urn:ietf:params:oauth:grant-type:token-exchange');
    assert.equal(fields.subject_token_type, 'urn:ietf:params:oauth:token-type:access_token');
    assert.equal(fields.audience, 'github');
    assert.equal(fields.scope, 'public_repo');
    assert.equal(fields.connect_request, undefined);
  });

  it('not connected: input_required with one URL elicitation of connect_uri and an opaque sealed requestState', async () => {
    const res = await rawCall(audience, await token('carol'), {
      method: 'tools/call',
      params: { name: 'create_issue', arguments: ARGS, _meta: envelope() },
    });
    assert.equal(res.status, 200);
    const result = res.json.result;
    assert.equal(result.resultType, 'input_required');
    const requests = Object.entries(result.inputRequests as Record<string, any>);
    assert.equal(requests.length, 1);
    const [, request] = requests[0]!;
    assert.equal(request.method, 'elicitation/create');
    assert.equal(request.params.mode, 'url');
    const link = new URL(request.params.url);
    assert.equal(link.origin, broker.url, 'the connect link is on the broker');
    const connectRequest = link.searchParams.get('req')!;
    assert.ok(broker.pendingIds().includes(connectRequest));
    assert.match(request.params.message, /Connect your GitHub account so I can create the issue in octo-org\/hello/);
    // The token goes to this service (the helper's caller), not to "the connection broker" alone: said truthfully.
    assert.match(request.params.message, /the broker hands the token to this service, never to your assistant\./);
    assert.doesNotMatch(request.params.message, /stays with the connection broker/);

    const state: string = result.requestState;
    assert.match(state, /^mcbs1\.[A-Za-z0-9_-]+$/);
    const opened = Buffer.from(state.slice('mcbs1.'.length), 'base64url').toString('latin1');
    for (const readable of [connectRequest, 'github', 'create_issue', 'carol', 'public_repo', 'octo-org'])
      assert.ok(!opened.includes(readable) && !state.includes(readable), `nothing readable in the state (${readable})`);
  });

  it('repeat: exchanges with connect_request + wait, held until the flow settles, then the callback runs', async () => {
    const gh = github.issueTokenFor('hubot', { scopes: ['public_repo'] });
    const seen: string[] = [];
    const client = await modernClient({
      url: audience,
      token: await token('dave'),
      onUrl: async (url) => {
        seen.push(url);
        const id = new URL(url).searchParams.get('req')!;
        // The user finishes in the browser a little after the assistant answered "accept".
        setTimeout(() => broker.settle(id, 'completed', { token: gh.accessToken, login: 'hubot' }), 300);
        return { action: 'accept' };
      },
    });
    const result = await client.callTool({ name: 'create_issue', arguments: ARGS });
    await client.close();

    assert.equal(seen.length, 1, 'one elicitation');
    assert.equal(result.isError, undefined, resultText(result));
    assert.match(resultText(result), /as hubot/);
    assert.ok(!JSON.stringify(result).includes(gh.accessToken));
    assert.equal(broker.requests.length, 2);
    const repeat = broker.requests[1]!.fields;
    assert.equal(repeat.connect_request, new URL(seen[0]!).searchParams.get('req'));
    assert.equal(repeat.wait, '5');
  });

  for (const action of ['decline', 'cancel'] as const) {
    it(`${action} in the client: a normal "nothing was done" result, no exchange repeated`, async () => {
      const issues = github.issues.length;
      const client = await modernClient({ url: audience, token: await token(`erin-${action}`), onUrl: async () => ({ action }) });
      const result = await client.callTool({ name: 'create_issue', arguments: ARGS });
      await client.close();
      assert.equal(result.isError, undefined);
      assert.match(resultText(result), /GitHub was not connected \(you chose not to open the link\), so nothing was done/);
      assert.deepEqual(result.structuredContent, { status: 'not_connected', reason: action });
      assert.equal(broker.requests.length, 1, 'only the first exchange');
      assert.equal(github.issues.length, issues);
    });
  }

  it('access_denied on the repeat: "nothing was done", naming the reason', async () => {
    const client = await modernClient({
      url: audience,
      token: await token('frank'),
      onUrl: async (url) => {
        broker.settle(new URL(url).searchParams.get('req')!, 'account_linked_elsewhere');
        return { action: 'accept' };
      },
    });
    const result = await client.callTool({ name: 'create_issue', arguments: ARGS });
    await client.close();
    assert.equal(result.isError, undefined);
    assert.match(resultText(result), /that GitHub account is already linked to another user\), so nothing was done/);
    assert.deepEqual(result.structuredContent, { status: 'not_connected', reason: 'account_linked_elsewhere' });
  });

  it("approval_required (the operator's policy): a URL elicitation of the approval page; the repeat waits on it without a connect_request, then runs", async () => {
    const approvalUri = `${broker.url}/approvals/apr_test-approval`;
    const gh = github.issueTokenFor('hubot', { scopes: ['public_repo'] });
    broker.override = {
      status: 400,
      body: {
        error: 'interaction_required',
        error_description: 'waiting',
        reason: 'approval_required',
        approval_uri: approvalUri,
        expires_in: 900,
      },
    };
    const seen: string[] = [];
    const client = await modernClient({
      url: audience,
      token: await token('paula'),
      onUrl: async (url) => {
        seen.push(url);
        // Decided while the assistant repeats: the broker now hands the token over.
        broker.override = {
          status: 200,
          body: {
            access_token: gh.accessToken,
            issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
            token_type: 'Bearer',
            scope: 'public_repo',
          },
        };
        return { action: 'accept' };
      },
    });
    const result = await client.callTool({ name: 'create_issue', arguments: ARGS });
    await client.close();
    assert.deepEqual(seen, [approvalUri]);
    assert.equal(result.isError, undefined, resultText(result));
    assert.ok(!JSON.stringify(result).includes(gh.accessToken));
    assert.equal(broker.requests.length, 2);
    const repeat = broker.requests[1]!.fields;
    assert.equal(repeat.connect_request, undefined, 'an approval has no connect request');
    assert.equal(repeat.wait, '5', 'the repeat is held on the decision');
  });

  it('approval_required without URL elicitation: the approval link in the result; a policy refusal in its own words', async () => {
    const approvalUri = `${broker.url}/approvals/apr_test-approval`;
    broker.override = { status: 400, body: { error: 'interaction_required', reason: 'approval_required', approval_uri: approvalUri } };
    const client = await modernClient({ url: audience, token: await token('quinn'), capabilities: { form: true } });
    const result = await client.callTool({ name: 'create_issue', arguments: ARGS });
    assert.equal(result.isError, undefined);
    assert.deepEqual(result.structuredContent, {
      status: 'approval_required',
      reason: 'approval_required',
      provider: 'github',
      approval_url: approvalUri,
    });
    assert.ok(resultText(result).includes(`: ${approvalUri} ; then ask me again`), resultText(result));

    broker.override = {
      status: 400,
      body: { error: 'access_denied', error_description: 'issue-bot may get tokens only for users in eng.' },
    };
    const refused = await client.callTool({ name: 'create_issue', arguments: ARGS });
    await client.close();
    assert.equal(resultText(refused), 'issue-bot may get tokens only for users in eng. Nothing was done.');
    assert.deepEqual(refused.structuredContent, { status: 'refused', reason: 'policy' });

    // An approval link on another origin is never shown.
    broker.override = {
      status: 400,
      body: { error: 'interaction_required', reason: 'approval_required', approval_uri: 'https://evil.example/approvals/x' },
    };
    const foreign = await (
      await modernClient({ url: audience, token: await token('quinn') })
    ).callTool({ name: 'create_issue', arguments: ARGS });
    assert.equal(foreign.isError, true);
    assert.ok(!resultText(foreign).includes('evil.example'));
  });

  describe("a requestState that is not this call's", () => {
    const firstState = async (sub: string) => {
      const res = await rawCall(audience, await token(sub), {
        method: 'tools/call',
        params: { name: 'create_issue', arguments: ARGS, _meta: envelope() },
      });
      return res.json.result.requestState as string;
    };
    const repeat = async (sub: string, state: string, args: Record<string, string> = ARGS) =>
      rawCall(audience, await token(sub), {
        method: 'tools/call',
        params: {
          name: 'create_issue',
          arguments: args,
          inputResponses: { connect_account: { action: 'accept' } },
          requestState: state,
          _meta: envelope(),
        },
      });

    it('tampered: JSON-RPC -32602 before the tool runs', async () => {
      const state = await firstState('gina');
      const i = Math.floor(state.length / 2);
      const tampered = state.slice(0, i) + (state[i] === 'A' ? 'B' : 'A') + state.slice(i + 1);
      broker.requests.length = 0;
      const res = await repeat('gina', tampered);
      assert.equal(res.json.error?.code, -32602, res.text);
      assert.equal(res.json.error.data.reason, 'invalid_request_state');
      assert.equal(broker.requests.length, 0, 'no exchange with a tampered state');
    });

    it("another user's: JSON-RPC -32602", async () => {
      const state = await firstState('hank');
      broker.requests.length = 0;
      const res = await repeat('ivy', state);
      assert.equal(res.json.error?.code, -32602, res.text);
      assert.equal(broker.requests.length, 0);
    });

    it('other arguments: refused as an invalid requestState, no exchange', async () => {
      const state = await firstState('jack');
      broker.requests.length = 0;
      const res = await repeat('jack', state, { ...ARGS, repo: 'elsewhere' });
      assert.equal(res.json.result?.isError, true, res.text);
      assert.match(resultText(res.json.result), /Invalid or expired requestState/);
      assert.equal(broker.requests.length, 0);
    });
  });

  it("a client without URL elicitation gets the broker's connect link in the result, as text and as data", async () => {
    const client = await modernClient({ url: audience, token: await token('kate'), capabilities: { form: true } });
    const result = await client.callTool({ name: 'create_issue', arguments: ARGS });
    await client.close();
    assert.equal(result.isError, undefined);
    const data = result.structuredContent as { status: string; reason: string; connect_url: string; missing_scopes: string[] };
    assert.equal(data.status, 'not_connected');
    assert.equal(new URL(data.connect_url).origin, broker.url);
    assert.ok(resultText(result).includes(`: ${data.connect_url} ; then ask me again`), resultText(result));
    assert.deepEqual((result._meta as Record<string, unknown>)['mcp-connect-broker/authorization'], {
      reason: data.reason,
      remediationHints: [{ type: 'url', url: data.connect_url }],
    });
  });

  it('a 2025-11-25 client gets -32042 with the connect link', async () => {
    const client = await legacyClient({ url: audience, token: await token('liam') });
    await assert.rejects(client.callTool({ name: 'create_issue', arguments: ARGS }), (err: unknown) => {
      assert.ok(err instanceof UrlElicitationRequiredError);
      assert.equal(err.code, -32042);
      const [elicitation] = err.elicitations;
      assert.equal(new URL(elicitation!.url).origin, broker.url);
      assert.ok(broker.pendingIds().includes(new URL(elicitation!.url).searchParams.get('req')!));
      assert.ok(!broker.pendingIds().includes(elicitation!.elicitationId), 'the connect_request is not used as the elicitation id');
      return true;
    });
    await client.close();
  });

  it('broker errors become isError results that name the error and hold no secret', async () => {
    const subject = await token('mia');
    const cases: Array<{ status: number; body: unknown; headers?: Record<string, string>; expect: RegExp }> = [
      { status: 400, body: { error: 'invalid_scope' }, expect: /may not obtain public_repo at GitHub \(invalid_scope\)/ },
      { status: 400, body: { error: 'invalid_target' }, expect: /may not use GitHub through the connection broker \(invalid_target\)/ },
      {
        status: 400,
        body: { error: 'invalid_grant', error_description: 'expired' },
        expect: /did not accept your sign-in .*invalid_grant: expired/,
      },
      { status: 429, body: { error: 'rate_limited' }, headers: { 'retry-after': '7' }, expect: /busy; try again in 7 s/ },
      { status: 502, body: '<html>bad gateway</html>', expect: /refused the token exchange \(server_error\)/ },
    ];
    for (const c of cases) {
      broker.override = { status: c.status, body: c.body, ...(c.headers ? { headers: c.headers } : {}) };
      const res = await rawCall(audience, subject, {
        method: 'tools/call',
        params: { name: 'create_issue', arguments: ARGS, _meta: envelope() },
      });
      assert.equal(res.json.result?.isError, true, res.text);
      assert.match(resultText(res.json.result), c.expect);
      assert.ok(!res.text.includes(subject) && !res.text.includes(SECRET), 'no subject token or secret in the answer');
    }
  });

  it("refuses a connect link that is not on the broker's origin", async () => {
    broker.override = {
      status: 400,
      body: {
        error: 'interaction_required',
        reason: 'not_connected',
        missing_scopes: [],
        connect_uri: 'https://evil.example/connect',
        connect_request: 'x',
      },
    };
    const res = await rawCall(audience, await token('nina'), {
      method: 'tools/call',
      params: { name: 'create_issue', arguments: ARGS, _meta: envelope() },
    });
    assert.equal(res.json.result?.isError, true, res.text);
    assert.match(resultText(res.json.result), /the connect link is not on the broker/);
    assert.ok(!res.text.includes('evil.example'));
  });

  it('a wrong service secret: invalid_client, the operator is told to check the credentials', async () => {
    const wrong = await startIssueService({
      brokerUrl: broker.url,
      serviceId: 'other-bot',
      serviceSecret: 'not-the-secret-'.padEnd(40, 'z'),
      stateKey: STATE_KEY,
      oidcIssuer: idp.issuer,
      audience: otherAudience,
      githubApiUrl: github.apiUrl,
    });
    try {
      const res = await rawCall(otherAudience, await token('noah', otherAudience), {
        method: 'tools/call',
        params: { name: 'create_issue', arguments: ARGS, _meta: envelope() },
      });
      assert.equal(res.json.result?.isError, true);
      assert.match(
        resultText(res.json.result),
        /did not accept this service's credentials \(invalid_client: client authentication failed\)/,
      );
      assert.ok(!res.text.includes('not-the-secret'));
    } finally {
      await wrong.close();
    }
  });

  describe('in a server of its own, without the requestState hook', () => {
    /** An in-process MCP server whose tool uses `options`' broker; authInfo from the IdP verifier. */
    const inProcess = async (
      sub: string,
      options: Partial<BrokerOptions>,
      run: (token: string) => Promise<CallToolResult>,
      /** Pass authInfo without `extra`, as a verifier that keeps no claims would. */
      bare = false,
    ) => {
      const helper = connectBroker({ url: broker.url, clientId: 'issue-bot', clientSecret: SECRET, stateKey: STATE_KEY, ...options });
      const handler = createMcpHandler(() => {
        const server = new McpServer({ name: 'plain', version: '1.0.0' }, { capabilities: { tools: {} } });
        server.registerTool('peek', { inputSchema: z.object({ n: z.number() }) }, (args, ctx) =>
          helper.withToken(ctx, { provider: 'github', scopes: ['public_repo'], purpose: 'peek', tool: 'peek', args }, (t) => run(t)),
        );
        return server;
      });
      const verifier = idpTokenVerifier(idp.issuer, audience);
      const subject = await token(sub);
      return {
        call: async (body: Record<string, unknown>) => {
          const res = await handler.fetch(
            new Request(audience, {
              method: 'POST',
              headers: {
                'content-type': 'application/json',
                accept: 'application/json, text/event-stream',
                'mcp-protocol-version': '2026-07-28',
                'mcp-method': 'tools/call',
                'mcp-name': 'peek',
              },
              body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'peek', _meta: envelope(), ...body } }),
            }),
            { authInfo: bare ? { ...(await verifier.verifyAccessToken(subject)), extra: {} } : await verifier.verifyAccessToken(subject) },
          );
          return JSON.parse(await res.text());
        },
        close: () => handler.close(),
      };
    };

    it("takes iss and sub from the verified token's payload when authInfo.extra has none", async () => {
      const gh = github.issueTokenFor('octocat', { scopes: ['public_repo'] });
      broker.connect(principal('rosa'), { token: gh.accessToken, scopes: ['public_repo'], login: 'octocat' });
      let got = '';
      const s = await inProcess(
        'rosa',
        {},
        async (t) => {
          got = t;
          return { content: [{ type: 'text', text: 'ok' }] };
        },
        true,
      );
      const answer = await s.call({ arguments: { n: 1 } });
      assert.equal(resultText(answer.result), 'ok', JSON.stringify(answer));
      assert.equal(got, gh.accessToken);
      await s.close();
    });

    it('refuses a short stateKey and a plain-http broker off loopback at construction', () => {
      assert.throws(() => connectBroker({ url: broker.url, clientId: 'a', clientSecret: 'b', stateKey: 'too short' }), RangeError);
      assert.throws(
        () => connectBroker({ url: 'http://broker.example.com', clientId: 'a', clientSecret: 'b', stateKey: STATE_KEY }),
        TypeError,
      );
      assert.throws(() => connectBroker({ url: broker.url, clientId: 'a', stateKey: STATE_KEY }), /clientSecret .* or privateKey/);
      assert.throws(
        () =>
          connectBroker({
            url: broker.url,
            tokenEndpoint: 'https://elsewhere.example/oauth/token',
            clientId: 'a',
            clientSecret: 'b',
            stateKey: STATE_KEY,
          }),
        /tokenEndpoint must be on the broker url's origin/,
        'the secret and the user token never go to another origin',
      );
    });

    it('withholds a result that contains the provider token', async () => {
      const gh = github.issueTokenFor('octocat', { scopes: ['public_repo'] });
      broker.connect(principal('olga'), { token: gh.accessToken, scopes: ['public_repo'], login: 'octocat' });
      const s = await inProcess('olga', {}, async (t) => ({ content: [{ type: 'text', text: `here it is: ${t}` }] }));
      const answer = await s.call({ arguments: { n: 1 } });
      await s.close();
      assert.equal(answer.result.isError, true);
      assert.match(resultText(answer.result), /contained the GitHub access token, so it was withheld/);
      assert.ok(!JSON.stringify(answer).includes(gh.accessToken));
    });

    it('refuses a tampered or expired state inside the tool, without exchanging', async () => {
      const s = await inProcess('pete', { stateTtlSeconds: 0 }, async () => ({ content: [] }));
      const first = await s.call({ arguments: { n: 1 } });
      const state: string = first.result.requestState;
      broker.requests.length = 0;
      for (const candidate of [state, state.slice(0, -2) + (state.endsWith('AA') ? 'BB' : 'AA'), 'garbage']) {
        const again = await s.call({
          arguments: { n: 1 },
          inputResponses: { connect_account: { action: 'accept' } },
          requestState: candidate,
        });
        assert.equal(again.result?.isError, true, JSON.stringify(again));
        assert.match(resultText(again.result), /Invalid or expired requestState/);
      }
      await s.close();
      assert.equal(broker.requests.length, 0);
    });

    it('authenticates with private_key_jwt (RFC 7523) when given a private key', async () => {
      const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
      const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
      const keyed = await startBrokerTokenStandIn({
        issuer: idp.issuer,
        services: [{ id: 'tracker-bot', jwks: { keys: [jwk] }, audiences: [audience], allow: { github: ['public_repo'] } }],
      });
      try {
        const gh = github.issueTokenFor('octocat', { scopes: ['public_repo'] });
        keyed.connect(principal('quinn'), { token: gh.accessToken, scopes: ['public_repo'], login: 'octocat' });
        let got = '';
        const helper = connectBroker({ url: keyed.url, clientId: 'tracker-bot', privateKey, keyId: 'k1', stateKey: STATE_KEY });
        const handler = createMcpHandler(() => {
          const server = new McpServer({ name: 'keyed', version: '1.0.0' }, { capabilities: { tools: {} } });
          server.registerTool('peek', { inputSchema: z.object({}) }, (args, ctx) =>
            helper.withToken(ctx, { provider: 'github', scopes: ['public_repo'], purpose: 'peek', tool: 'peek', args }, async (t) => {
              got = t;
              return { content: [{ type: 'text', text: 'ok' }] };
            }),
          );
          return server;
        });
        const verifier = idpTokenVerifier(idp.issuer, audience);
        const authInfo = await verifier.verifyAccessToken(await token('quinn'));
        const client = new Client({ name: 't', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
        await client.connect(
          new StreamableHTTPClientTransport(new URL(audience), { fetch: (u, i) => handler.fetch(new Request(u, i), { authInfo }) }),
        );
        for (let i = 0; i < 2; i++) {
          const result = await client.callTool({ name: 'peek', arguments: {} });
          assert.equal(resultText(result), 'ok', JSON.stringify(result));
        }
        await client.close();
        await handler.close();
        assert.equal(got, gh.accessToken);
        assert.equal(keyed.requests.length, 2, 'two exchanges, each with a fresh assertion (jti is single-use)');
        assert.equal(keyed.requests[0]!.fields.client_assertion_type, 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer');
      } finally {
        await keyed.close();
      }
    });
  });
});

describe('mcp-connect-broker/client ships on its own', () => {
  it('imports nothing but the SDK, jose and its own modules (no broker internals, no express, no database, no node:crypto)', async () => {
    const { readdirSync, readFileSync } = await import('node:fs');
    const dir = new URL('../src/client/', import.meta.url);
    const imports = readdirSync(dir)
      .filter((f) => f.endsWith('.ts'))
      .flatMap((f) =>
        [...readFileSync(new URL(f, dir), 'utf8').matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)].map((m) => `${f}: ${m[1]}`),
      );
    assert.ok(imports.length >= 5, 'the scan sees the imports');
    const foreign = imports.filter((i) => !/: (\.\/[\w-]+\.js|@modelcontextprotocol\/server|jose)$/.test(i));
    assert.deepEqual(foreign, []);
  });
});

describe('the sealed requestState says what the next round awaits', () => {
  const principal = { issuer: 'https://idp.test', subject: 'ana' };
  const base = { tool: 'create_issue', args: 'digest', provider: 'github', scopes: ['repo'], exp: Math.floor(Date.now() / 1000) + 600 };

  it('a connect link by its connect_request id, an approval by name; an awaited connect without an id does not open', async () => {
    const key = await stateCipherKey(STATE_KEY);
    const connect = await open(
      key,
      principal,
      await seal(key, principal, { ...base, awaiting: { kind: 'connect', connectRequest: 'req-1' } }),
      undefined,
    );
    assert.deepEqual(connect.awaiting, { kind: 'connect', connectRequest: 'req-1' });
    const approval = await open(key, principal, await seal(key, principal, { ...base, awaiting: { kind: 'approval' } }), undefined);
    assert.deepEqual(approval.awaiting, { kind: 'approval' });
    const noId = await seal(key, principal, { ...base, awaiting: { kind: 'connect', connectRequest: '' } });
    await assert.rejects(open(key, principal, noId, undefined), (err: unknown) => err instanceof StateError && err.reason === 'malformed');
  });

  it('a state sealed before `awaiting` (a connect_request id, or "" for an approval) still opens, as what it meant', async () => {
    const key = await stateCipherKey(STATE_KEY);
    const old = (connectRequest: string) => seal(key, principal, { ...base, connectRequest } as unknown as SealedPayload);
    assert.deepEqual((await open(key, principal, await old('req-2'), undefined)).awaiting, { kind: 'connect', connectRequest: 'req-2' });
    assert.deepEqual((await open(key, principal, await old(''), undefined)).awaiting, { kind: 'approval' });
  });
});
