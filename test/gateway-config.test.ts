import assert from 'node:assert/strict';
import { McpAuthProvider } from '../src/providers/mcp-auth/index.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { createBroker } from '../src/broker.js';
import { ConfigError, loadConfig } from '../src/config/env.js';
import { createLogger } from '../src/log.js';
import { openStore } from '../src/store/index.js';
import { connectGitHub, providersFile, standInVerifier } from './support/gateway.js';
import { modernClient } from './support/mcp.js';
import { productionEnv } from './support/production-env.js';
import { startStack } from './support/stack.js';
import { startUpstreamServer } from './support/upstream-server.js';

const dir = mkdtempSync(join(tmpdir(), 'gateway-config-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** A valid environment whose PROVIDERS_FILE holds `content`. */
function envWith(content: unknown): NodeJS.ProcessEnv {
  const file = join(dir, `providers-${++n}.json`);
  writeFileSync(file, JSON.stringify(content));
  return productionEnv({ DATABASE_PATH: join(dir, `broker-${n}.db`), PROVIDERS_FILE: file });
}

function refuses(env: NodeJS.ProcessEnv, message: string): void {
  assert.throws(
    () => loadConfig(env),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
      assert.equal(err.message, message);
      return true;
    },
  );
}

const up = (fields: Record<string, unknown>) => ({
  upstreams: [{ id: 'tracker', url: 'https://mcp.tracker.example/mcp', auth: 'none', ...fields }],
});
const schema = { type: 'object', properties: {} };
/** `upstream` declaring one tool `name` (no live list needed to know it). */
const declaring = (upstream: Record<string, unknown>, name: string) => ({
  ...upstream,
  tools: { declared: [{ name, inputSchema: schema }] },
});
const GITHUB_UPSTREAM = { id: 'github', url: 'https://api.githubcopilot.com/mcp/', provider: 'github' };

describe('gateway configuration: upstreams: and builtinTools: in PROVIDERS_FILE', () => {
  it('reads upstreams alone, with their defaults: prefix <id>_ (- → _), 30 s timeout, the id as display name', () => {
    const config = loadConfig(
      envWith({
        upstreams: [
          { id: 'github', url: 'https://api.githubcopilot.com/mcp/', provider: 'github', scopes: ['repo'] },
          { id: 'my-tracker', url: 'https://mcp.tracker.example/mcp', auth: 'mcp', displayName: 'Tracker', scopes: ['read'] },
          { id: 'everything', url: 'http://127.0.0.1:3001/mcp', auth: 'none', toolPrefix: 'ev.', timeoutMs: 5000 },
        ],
        builtinTools: { github: false },
      }),
    );
    assert.deepEqual(
      config.upstreams.map((u) => [u.id, u.url.href, u.auth, u.scopes, u.toolPrefix, u.timeoutMs, u.displayName]),
      [
        ['github', 'https://api.githubcopilot.com/mcp/', { kind: 'provider', provider: 'github' }, ['repo'], 'github_', 30_000, 'github'],
        ['my-tracker', 'https://mcp.tracker.example/mcp', { kind: 'mcp' }, ['read'], 'my_tracker_', 30_000, 'Tracker'],
        ['everything', 'http://127.0.0.1:3001/mcp', { kind: 'none' }, [], 'ev.', 5000, 'everything'],
      ],
    );
    assert.deepEqual(config.builtinTools, { github: false });
    assert.equal(config.providers.length, 1, 'no providers: section needed');
    assert.equal(config.upstreamMaxResultBytes, 4 * 1024 * 1024);
  });

  it('has no upstreams without the file or the section', () => {
    const config = loadConfig(envWith({ services: [] }));
    assert.deepEqual([config.upstreams, config.builtinTools], [[], {}]);
  });

  it('refuses each broken rule with one line naming upstreams.<id>.<field>', () => {
    const cases: Array<[unknown, string]> = [
      [up({ id: 'Tracker' }), 'PROVIDERS_FILE upstreams.Tracker.id: lower-case letters, digits and -, starting with a letter'],
      [
        up({ url: 'http://mcp.tracker.example/mcp' }),
        'PROVIDERS_FILE upstreams.tracker.url: must use https:// (http:// is accepted only for loopback hosts)',
      ],
      [
        up({ url: 'https://user:pw@mcp.tracker.example/mcp' }),
        'PROVIDERS_FILE upstreams.tracker.url: must not carry credentials or a fragment',
      ],
      [up({ provider: 'github' }), 'PROVIDERS_FILE upstreams.tracker.auth: needs exactly one of provider: <id> or auth: mcp|none'],
      [up({ auth: undefined }), 'PROVIDERS_FILE upstreams.tracker.auth: needs exactly one of provider: <id> or auth: mcp|none'],
      [up({ auth: 'basic' }), 'PROVIDERS_FILE upstreams.tracker.auth: Invalid option: expected one of "mcp"|"none"'],
      [
        up({ auth: undefined, provider: 'gitlab' }),
        'PROVIDERS_FILE upstreams.tracker.provider: "gitlab" is not a provider this broker connects to',
      ],
      [
        up({ auth: undefined, provider: 'github', scopes: ['rule_the_world'] }),
        'PROVIDERS_FILE upstreams.tracker.scopes: "rule_the_world" is not a scope of github',
      ],
      [up({ scopes: ['read'] }), 'PROVIDERS_FILE upstreams.tracker.scopes: applies only to provider: and auth: mcp upstreams'],
      [
        up({ id: 'github', auth: 'mcp' }),
        'PROVIDERS_FILE upstreams.github.id: "github" is already a provider id; an auth: mcp upstream needs an id of its own',
      ],
      [up({ toolPrefix: 'has space' }), 'PROVIDERS_FILE upstreams.tracker.toolPrefix: letters, digits, _ . and - only, at most 64'],
      [
        up({ toolPrefix: 'p'.repeat(64), tools: { declared: [{ name: 'n'.repeat(70), inputSchema: schema }] } }),
        `PROVIDERS_FILE upstreams.tracker.toolPrefix: makes "${'p'.repeat(64)}${'n'.repeat(70)}" longer than MCP's 128 characters`,
      ],
      [
        up({ tools: { declared: [{ name: 'echo', inputSchema: { type: 'string' } }] } }),
        'PROVIDERS_FILE upstreams.tracker.tools.declared.0.inputSchema: must be a JSON Schema with type "object"',
      ],
      [
        up({ tools: { declared: [{ name: 'bad name', inputSchema: schema }] } }),
        'PROVIDERS_FILE upstreams.tracker.tools.declared.0.name: letters, digits, _ . and - only, at most 128',
      ],
      [up({ tools: { only: ['x'] } }), 'PROVIDERS_FILE upstreams.tracker.tools: Unrecognized key: "only"'],
      [up({ headers: { 'x-api-key': 'k' } }), 'PROVIDERS_FILE upstreams.tracker: Unrecognized key: "headers"'],
      [up({ timeoutMs: 10 }), 'PROVIDERS_FILE upstreams.tracker.timeoutMs: Too small: expected number to be >=100'],
      [{ upstreams: [up({}).upstreams[0], up({}).upstreams[0]] }, 'PROVIDERS_FILE upstreams.tracker: the id is declared twice'],
      [
        { upstreams: [up({}).upstreams[0], { id: 'tracker-two', url: 'https://two.example/mcp', auth: 'none', toolPrefix: 'tracker_t' }] },
        `PROVIDERS_FILE upstreams.tracker-two.toolPrefix: "tracker_t" and upstream "tracker"'s "tracker_" overlap (neither may begin the other)`,
      ],
      [{ builtinTools: { gitlab: false } }, 'PROVIDERS_FILE builtinTools.gitlab: no such provider with no built-in tools (only github)'],
      [{ builtinTools: { github: 'off' } }, 'PROVIDERS_FILE builtinTools.github: must map provider ids to true or false'],
      [{ upstreams: { id: 'x' } }, 'PROVIDERS_FILE upstreams must be a list'],
      [
        { nothing: [] },
        'PROVIDERS_FILE has unknown top-level key "nothing"; it may hold "providers", "services", "upstreams", "builtinTools", "webhooks", "policy"',
      ],
    ];
    for (const [content, message] of cases) refuses(envWith(content), message);
  });

  it('reads elicitationOrigins as origins, and refuses anything but https (or loopback http) scheme://host[:port]', () => {
    const config = loadConfig(envWith(up({ elicitationOrigins: ['https://login.tracker.example', 'http://127.0.0.1:8080'] })));
    assert.deepEqual(config.upstreams[0]!.elicitationOrigins, ['https://login.tracker.example', 'http://127.0.0.1:8080']);
    assert.deepEqual(loadConfig(envWith(up({}))).upstreams[0]!.elicitationOrigins, [], 'none by default');
    const refused = 'PROVIDERS_FILE upstreams.tracker.elicitationOrigins.0:';
    refuses(
      envWith(up({ elicitationOrigins: ['https://login.tracker.example/start'] })),
      `${refused} must be an origin, scheme://host[:port] and nothing else`,
    );
    refuses(
      envWith(up({ elicitationOrigins: ['https://user@login.tracker.example'] })),
      `${refused} must be an origin, scheme://host[:port] and nothing else`,
    );
    refuses(
      envWith(up({ elicitationOrigins: ['http://login.tracker.example'] })),
      `${refused} must use https:// (http:// is accepted only for loopback hosts)`,
    );
    refuses(
      envWith(up({ elicitationOrigins: 'https://login.tracker.example' })),
      'PROVIDERS_FILE upstreams.tracker.elicitationOrigins: Invalid input: expected array, received string',
    );
  });

  it('makes an auth: mcp upstream a provider of its own under its id, with the client pre-registered in <ID>_CLIENT_ID', async () => {
    const upstreams = [{ id: 'tracker', url: 'https://mcp.tracker.example/mcp', auth: 'mcp', displayName: 'Tracker' }];
    const config = loadConfig({ ...envWith({ upstreams }), TRACKER_CLIENT_ID: 'pre-registered', TRACKER_CLIENT_SECRET: 's3cret' });
    assert.deepEqual(config.upstreams[0]!.auth, { kind: 'mcp', clientId: 'pre-registered', clientSecret: 's3cret' });
    assert.deepEqual(loadConfig(envWith({ upstreams })).upstreams[0]!.auth, { kind: 'mcp' }, 'without the variables it registers itself');
    const broker = await createBroker(config, createLogger('error'));
    try {
      const provider = broker.toolDeps.providers.get('tracker');
      assert.ok(provider instanceof McpAuthProvider);
      assert.equal(provider.displayName, 'Tracker');
    } finally {
      await broker.close();
    }
  });

  it('refuses to start on two tools with one name, naming both: built-ins, declared tools and connect tools', async () => {
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [GITHUB_UPSTREAM, 'create_issue', `tool name github_create_issue is both the built-in tool and upstream "github"'s create_issue`],
      [
        { id: 'lists', url: 'https://lists.example/mcp', auth: 'none', toolPrefix: 'list_' },
        'connections',
        `tool name list_connections is both the built-in tool and upstream "lists"'s connections`,
      ],
      [
        { id: 'tracker', url: 'https://t.example/mcp', auth: 'none' },
        'connect',
        `tool name tracker_connect is both upstream "tracker"'s connect tool and upstream "tracker"'s connect`,
      ],
    ];
    for (const [upstream, tool, message] of cases) {
      await assert.rejects(
        createBroker(loadConfig(envWith({ upstreams: [declaring(upstream, tool)] })), createLogger('error')),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError, String(err));
          assert.equal(err.problems.length, 1);
          assert.ok(err.message.startsWith(`PROVIDERS_FILE: ${message} (`), err.message);
          return true;
        },
      );
    }
    // The same declared tool with the built-ins switched off starts.
    const env = envWith({ upstreams: [declaring(GITHUB_UPSTREAM, 'create_issue')], builtinTools: { github: false } });
    const broker = await createBroker(loadConfig(env), createLogger('error'));
    await broker.close();
  });

  it("starts although the definitions last seen collide with a built-in (the upstream's list, not the configuration), and logs the hidden name", async () => {
    // An upstream that later lists a whoami must not keep every instance from starting again.
    const env = envWith({ upstreams: [{ id: 'tracker', url: 'https://t.example/mcp', auth: 'none', toolPrefix: 'github_' }] });
    const store = await openStore(loadConfig(env).database);
    await store.upstreamTools.put(
      'tracker',
      JSON.stringify([
        { name: 'whoami', inputSchema: schema },
        { name: 'other', inputSchema: schema },
      ]),
    );
    await store.close();
    const lines: string[] = [];
    const broker = await createBroker(
      loadConfig(env),
      createLogger('warn', (l) => lines.push(l)),
    );
    await broker.close();
    const hidden = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'upstream_tool_hidden' || l.event === 'upstream_tool_hidden');
    assert.equal(hidden.length, 1, lines.join('\n'));
    assert.equal(hidden[0]!.name, 'github_whoami');
  });

  it("with builtinTools: { github: false } serves the upstream's github_create_issue and github_whoami instead of the built-ins; the account tools stay", async () => {
    let stack: Awaited<ReturnType<typeof startStack>> | undefined;
    const upstream = await startUpstreamServer({
      era: 'modern',
      verify: standInVerifier(() => stack!.github),
      tools: [
        { name: 'create_issue', description: 'Upstream create_issue', inputSchema: schema },
        { name: 'whoami', description: 'Upstream whoami', inputSchema: schema },
      ],
    });
    const file = providersFile({ upstreams: [{ id: 'github', url: upstream.url, provider: 'github' }], builtinTools: { github: false } });
    try {
      stack = await startStack({ env: { PROVIDERS_FILE: file.path } });
      const client = await modernClient({ url: stack.mcpUrl, token: await stack.token('nora') });
      try {
        let names = (await client.listTools()).tools.map((t) => t.name).sort();
        assert.deepEqual(names, ['connect_account', 'disconnect_account', 'github_connect', 'list_connections'], 'not connected yet');
        await connectGitHub(stack, 'nora', 'octocat');
        const { tools } = await client.listTools();
        names = tools.map((t) => t.name).sort();
        assert.deepEqual(names, ['connect_account', 'disconnect_account', 'github_create_issue', 'github_whoami', 'list_connections']);
        assert.equal(tools.find((t) => t.name === 'github_create_issue')!.description, 'Upstream create_issue');
        const whoami = await client.callTool({ name: 'github_whoami', arguments: {} });
        assert.deepEqual(whoami.structuredContent, { who: 'octocat' }, "the upstream's whoami answered, not the built-in");
      } finally {
        await client.close();
      }
    } finally {
      await stack?.close();
      await upstream.close();
      file.remove();
    }
  });
});
