// Upstream scope challenges (issue 13, "tokens go wrong upstream too"): an upstream's 403 with a
// WWW-Authenticate scope challenge becomes the incremental-scope elicitation for exactly the
// missing scopes, also scopes the provider definition does not describe (src/gateway/relay/).
// The parser is checked on its own and with properties (fast-check); the gate at the function
// level against a real broker stack (test IdP, GitHub stand-in, the consent pages in a browser).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { CallToolResult, InputRequiredResult, ServerContext } from '@modelcontextprotocol/server';
import fc from 'fast-check';
import { principalFromVerifiedClaims, type Principal } from '../src/auth/principal.js';
import { bearerChallenge, parseChallenges, scopeChallengeGate, scopesToAskFor } from '../src/gateway/relay/scope-challenge.js';
import { MAX_CHALLENGED_SCOPES, MAX_HEADER_LENGTH } from '../src/providers/www-authenticate.js';
import { mcpCallOf, withHttpFacts, type ConnectionNeed } from '../src/mcp/index.js';
import { builtInDefinitions } from '../src/providers/presets.js';
import { OAuthProvider } from '../src/providers/oauth-provider.js';
import { providerDefinitionSchema } from '../src/providers/definition.js';
import { Browser, textOf } from './support/browser.js';
import { readConnection, seedGitHubConnection } from './support/seed.js';
import { startStack, type Stack } from './support/stack.js';

describe('WWW-Authenticate parsing', () => {
  it('reads RFC 6750 Bearer challenges with quoted strings, escapes, several challenges in one header', () => {
    const header =
      'Basic realm="a, \\"quoted\\" realm", Bearer realm="mcp", error="insufficient_scope", ' +
      'scope="repo admin:org", error_description="needs \\"admin:org\\"", resource_metadata="https://up.example/.well-known/oauth-protected-resource/mcp", ' +
      'DPoP algs="ES256", Negotiate abc+/==';
    assert.deepEqual(parseChallenges(header), [
      { scheme: 'basic', params: { realm: 'a, "quoted" realm' } },
      {
        scheme: 'bearer',
        params: {
          realm: 'mcp',
          error: 'insufficient_scope',
          scope: 'repo admin:org',
          error_description: 'needs "admin:org"',
          resource_metadata: 'https://up.example/.well-known/oauth-protected-resource/mcp',
        },
      },
      { scheme: 'dpop', params: { algs: 'ES256' } },
      { scheme: 'negotiate', params: {}, token68: 'abc+/==' },
    ]);
    assert.deepEqual(bearerChallenge(header), {
      error: 'insufficient_scope',
      scope: ['repo', 'admin:org'],
      description: 'needs "admin:org"',
      resourceMetadata: 'https://up.example/.well-known/oauth-protected-resource/mcp',
    });
    // Case-insensitive scheme and names, token values, BWS around "=", empty list elements.
    assert.deepEqual(bearerChallenge(',  BEARER Error = insufficient_scope ,, Scope=repo ,'), {
      error: 'insufficient_scope',
      scope: ['repo'],
    });
  });

  it('takes an ambiguous or malformed header as no challenge at all', () => {
    for (const bad of [
      'Bearer scope="repo", scope="admin:org"', // a name twice
      'Bearer scope="repo', // unterminated
      'Bearer scope="re\\\u0001po"', // a quoted-pair of a control character
      'Bearer scope=re po', // a token value with a space
      'Bearer =x',
      `Bearer scope="${'a'.repeat(MAX_HEADER_LENGTH)}"`,
    ]) {
      assert.deepEqual(parseChallenges(bad), [], bad);
      assert.equal(bearerChallenge(bad), undefined, bad);
    }
    assert.equal(bearerChallenge('Basic realm="x"'), undefined, 'no Bearer challenge');
    assert.equal(bearerChallenge(undefined), undefined);
    // Scopes that break RFC 6749's scope-token grammar, or too many, are not asked for.
    assert.deepEqual(bearerChallenge('Bearer error="insufficient_scope", scope="repo a\\\\b"'), { error: 'insufficient_scope' });
    const many = Array.from({ length: MAX_CHALLENGED_SCOPES + 1 }, (_, i) => `s${i}`).join(' ');
    assert.deepEqual(bearerChallenge(`Bearer scope="${many}"`), {});
  });

  // Properties: any list of challenges, written out with any legal spacing, quoting and escaping, reads back as it was.
  const token = fc.stringMatching(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,12}$/);
  const qdtext = fc.stringMatching(/^[\t !#-[\]-~]{0,20}$/);
  const quotedValue = fc.array(fc.oneof(qdtext, fc.constantFrom('"', '\\')), { maxLength: 4 }).map((parts) => parts.join(''));
  const ows = fc.constantFrom('', ' ', '\t', '  ');
  const params = fc.uniqueArray(fc.tuple(token, fc.oneof(token, quotedValue), fc.boolean(), ows, ows), {
    selector: ([name]) => name.toLowerCase(),
    maxLength: 5,
  });
  const token68 = fc.stringMatching(/^[A-Za-z0-9\-._~+/]{1,16}={0,2}$/);
  const challenge = fc.record({ scheme: token, body: fc.oneof(params, token68) });

  it('reads back any list of challenges it is given, whatever the spacing and quoting (property)', () => {
    fc.assert(
      fc.property(fc.array(challenge, { minLength: 1, maxLength: 4 }), ows, (challenges, sep) => {
        const header = challenges
          .map(({ scheme, body }) => {
            if (typeof body === 'string') return `${scheme} ${body}`;
            const written = body.map(([name, value, quote, a, b]) => {
              const mustQuote = quote || !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(value);
              return `${name}${a}=${b}${mustQuote ? `"${value.replace(/["\\]/g, (c) => `\\${c}`)}"` : value}`;
            });
            return written.length ? `${scheme} ${written.join(`${sep},${sep}`)}` : scheme;
          })
          .join(`${sep},${sep}`);
        const expected = challenges.map(({ scheme, body }) =>
          typeof body === 'string'
            ? { scheme: scheme.toLowerCase(), params: {}, token68: body }
            : { scheme: scheme.toLowerCase(), params: Object.fromEntries(body.map(([name, value]) => [name.toLowerCase(), value])) },
        );
        assert.deepEqual(
          parseChallenges(header).map((c) => ({ ...c, params: { ...c.params } })),
          expected,
          header,
        );
      }),
      { numRuns: 500 },
    );
  });

  it('never throws and stays bounded on arbitrary input (property)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (s) => {
        const parsed = parseChallenges(s);
        assert.ok(parsed.length <= s.length);
        const b = bearerChallenge(s);
        assert.ok(!b?.scope || b.scope.length <= MAX_CHALLENGED_SCOPES);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('scopesToAskFor', () => {
  const github = new OAuthProvider({
    definition: providerDefinitionSchema.parse(
      builtInDefinitions({
        githubWebUrl: new URL('https://github.com'),
        githubApiUrl: new URL('https://api.github.com'),
        githubAppType: 'oauth-app',
      })[0]!,
    ),
    clientId: 'x',
    clientSecret: 'y',
    timeoutMs: 1000,
  });

  it('is exactly what the grant lacks of base and challenged scopes, broader granted scopes covering narrower ones', () => {
    assert.deepEqual(scopesToAskFor(github, ['read:user'], ['repo'], ['admin:org', 'repo']), ['repo', 'admin:org']);
    assert.deepEqual(scopesToAskFor(github, ['repo'], ['repo'], ['public_repo', 'admin:org']), ['admin:org']);
    assert.deepEqual(scopesToAskFor(github, ['repo', 'admin:org'], ['repo'], ['admin:org']), []);
  });
});

describe('scopeChallengeGate, at the function level against a real stack', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ env: { GITHUB_SCOPES: 'read:user' } });
  });
  after(() => stack.close());

  /** The context the SDK hands a tool, for a 2026-07-28 tools/call of `tool` by `principal`. */
  function toolCtx(principal: Principal, state?: unknown): ServerContext {
    const body = {
      method: 'tools/call',
      params: {
        name: 'github_delete_repo',
        arguments: { repo: 'acme/widgets' },
        _meta: {
          'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } },
          'io.modelcontextprotocol/clientInfo': { name: 'assistant', version: '1' },
        },
      },
    };
    return {
      mcpReq: {
        method: 'tools/call',
        requestState: () => state,
        inputResponses: state ? { connect_account: { action: 'accept' } } : undefined,
        signal: new AbortController().signal,
        envelope: {
          'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } },
          'io.modelcontextprotocol/clientInfo': { name: 'assistant', version: '1' },
        },
      },
      http: { authInfo: withHttpFacts({ token: 't', clientId: 'c', scopes: [], extra: { principal } }, body, undefined) },
    } as unknown as ServerContext;
  }

  /** What the gateway's tools/call asks of the connection, for `toolCtx(principal, state)`. */
  function need(principal: Principal, state: unknown, deps: ConnectionNeed['deps'], purpose: string, scopes: string[]): ConnectionNeed {
    const ctx = toolCtx(principal, state);
    const call = mcpCallOf({ era: 'modern', authInfo: ctx.http!.authInfo! }, deps.log);
    return { ctx, call, deps, provider: deps.providers.get('github')!, purpose, scopes };
  }

  /** `sub` connected to octocat with only read:user granted; the tool deps and the GitHub provider of the stack. */
  async function connectedWithReadUser(sub: string) {
    await seedGitHubConnection(stack, sub, 'octocat', ['read:user']);
    const deps = stack.broker.broker.toolDeps;
    return { deps, github: deps.providers.get('github')!, principal: principalFromVerifiedClaims(stack.idp.issuer, sub) };
  }

  const challenge =
    'Bearer error="insufficient_scope", scope="repo admin:org team:<b>&x", resource_metadata="https://up.example/.well-known/oauth-protected-resource"';

  it('asks for exactly the missing scopes, described or not; the consent page names the undescribed raw; GitHub is asked for them; the connection ends with them', async () => {
    const { deps, principal: nora } = await connectedWithReadUser('nora');

    /** The gate for the challenge above, as the tool github_delete_repo would call it for nora (with `state` on a repeat). */
    const gate = (state?: unknown) => scopeChallengeGate(need(nora, state, deps, 'delete acme/widgets', ['repo']), challenge, 'github');

    const first = await gate();
    assert.equal(first.ok, false);
    const asked = (first as { result: InputRequiredResult }).result;
    assert.equal(asked.resultType, 'input_required');
    const request = asked.inputRequests!.connect_account as { params: { url: string; message: string } };
    assert.match(request.params.message, /needs to grant more access \(repo, admin:org, team:<b>&x\)/);

    const browser = new Browser();
    let page = await browser.open(request.params.url);
    if (/Development sign-in/.test(page.html)) page = await browser.submit(page, { fields: { login: 'nora' } });
    const consent = page.html;
    assert.match(textOf(consent), /Read and write your public and private repositories/, 'a described scope keeps its words');
    // admin:org is one of GitHub's documented scopes: described, and flagged as destructive with a marker and words.
    assert.match(
      consent,
      /<li class="destructive"><strong class="danger-tag"><span aria-hidden="true">⚠ <\/span>Destructive:<\/strong> <span class="scope-desc">Fully manage your organizations[^<]*<\/span> <code class="muted small">admin:org<\/code>/,
    );
    assert.match(textOf(consent), /One permission below can delete things or take away access for good/);
    assert.match(consent, /A permission GitHub did not describe to us:<\/span> <code class="muted small">team:&lt;b&gt;&amp;x<\/code>/);
    assert.doesNotMatch(consent, /<b>&x/, 'escaped');
    assert.doesNotMatch(textOf(consent), /Read your GitHub profile/, 'only what is missing is listed');

    page = await browser.submit(page, { button: 'allow' });
    const authorize = new URL(page.trail.find((u) => u.includes('/login/oauth/authorize'))!);
    assert.deepEqual(authorize.searchParams.get('scope')!.split(' ').sort(), ['admin:org', 'read:user', 'repo', 'team:<b>&x']);
    page = await browser.submit(page, { button: 'authorize', fields: { login: 'octocat' } });
    assert.equal(page.status, 200);
    const scopes = (await readConnection(stack.env, 'nora', 'github'))!.scopes.split(' ');
    for (const s of ['repo', 'admin:org', 'team:<b>&x']) assert.ok(scopes.includes(s), `${s} in ${scopes.join(' ')}`);

    // The same challenge again, now that the connection has it all: nothing the user can fix.
    const state = await deps.codec.verify((asked as { requestState: string }).requestState, toolCtx(nora));
    const again = await gate(state);
    assert.deepEqual(again, {
      ok: false,
      result: {
        content: [
          {
            type: 'text',
            text: 'github refused the call with insufficient_scope but named no scope the connection lacks, so nothing was done.',
          },
        ],
        isError: true,
      },
    });
  });

  it('answers a challenge naming no scope, or only granted ones, with a tool error naming the upstream, and makes no link', async () => {
    const { deps, principal: omar } = await connectedWithReadUser('omar');
    for (const header of [
      'Bearer error="insufficient_scope"',
      'Bearer error="insufficient_scope", scope="read:user"',
      'Basic realm="x"',
      undefined,
    ]) {
      const gate = await scopeChallengeGate(need(omar, undefined, deps, 'list issues', ['repo']), header, 'gh-mcp');
      assert.equal(gate.ok, false);
      const result = (gate as { result: CallToolResult }).result;
      assert.equal(result.isError, true, String(header));
      assert.match(
        (result.content[0] as { text: string }).text,
        /^gh-mcp refused the call with insufficient_scope but named no scope the connection lacks/,
      );
    }
    assert.equal(await stack.broker.broker.store.pending.latestInFlight(omar, 'github'), undefined, 'no link was made');
  });
});
