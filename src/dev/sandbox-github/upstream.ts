// The sandbox's MCP endpoint as the broker's `github` upstream in development mode (issue 13's
// `upstreams:` list in PROVIDERS_FILE): `npm run dev` writes this entry beside its `services:` one,
// so a newcomer who connects GitHub once (the sandbox) sees the upstream's tools appear.
//
// Naming: the broker's built-in GitHub tools are `github_create_issue` and `github_whoami`, so the
// default prefix `github_` would turn the upstream's `create_issue` into a second
// `github_create_issue` (start-up refuses the collision). A deployment that takes GitHub's tools
// from GitHub's own server switches the built-ins off (`builtinTools: { github: false }`) and keeps
// `github_`; development mode keeps both side by side, so the upstream's get a prefix of their own.

/** The `upstreams:` entry, in the shape the configuration file takes. */
export interface SandboxUpstreamEntry {
  id: 'github';
  url: string;
  provider: 'github';
  scopes: { required: string[]; allow: string[] };
  toolPrefix: string;
  /** How its questions are introduced ("GitHub MCP (sandbox) asks: …"). */
  name: string;
}

/** Development mode's prefix for the upstream's tools: `github_mcp_get_me`, `github_mcp_create_issue`… */
export const SANDBOX_UPSTREAM_TOOL_PREFIX = 'github_mcp_';

/**
 * The entry that makes the sandbox at `sandboxBase` (e.g. http://127.0.0.1:3000/sandbox/github) the
 * `github` upstream, authenticated with each user's `github` connection. `repo` is what its
 * writes need; delete_repository also needs `delete_repo`, which the upstream asks for with a
 * scope challenge when it is called (the broker's incremental-scope elicitation), so it is allowed
 * to (`scopes.allow`: a challenge for anything else is refused).
 */
export function sandboxGitHubUpstream(sandboxBase: string, toolPrefix: string = SANDBOX_UPSTREAM_TOOL_PREFIX): SandboxUpstreamEntry {
  return {
    id: 'github',
    url: `${sandboxBase.replace(/\/+$/, '')}/mcp`,
    provider: 'github',
    scopes: { required: ['repo'], allow: ['delete_repo'] },
    toolPrefix,
    name: 'GitHub MCP (sandbox)',
  };
}

/** The entry as the YAML lines of an `upstreams:` section, for a generated PROVIDERS_FILE. */
export function sandboxGitHubUpstreamYaml(entry: SandboxUpstreamEntry): string[] {
  return [
    'upstreams:',
    `  - id: ${entry.id}`,
    `    url: ${JSON.stringify(entry.url)}`,
    `    provider: ${entry.provider}`,
    `    scopes: { required: [${entry.scopes.required.join(', ')}], allow: [${entry.scopes.allow.join(', ')}] }`,
    `    toolPrefix: ${entry.toolPrefix}`,
    `    name: ${JSON.stringify(entry.name)}`,
  ];
}
