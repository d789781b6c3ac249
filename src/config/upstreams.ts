import { z } from 'zod';
import { entryProblem, forEachEntry, readConfigSections } from './file.js';
import { envPrefix } from './providers.js';
import { httpsOrLoopbackUrl } from './url-rule.js';

/** MCP's tool-name rule (2025-11-25 and later): these characters, at most 128 of them. */
export const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
export const MAX_TOOL_NAME_LENGTH = 128;

/** A tool an upstream is known to offer, listed for users who have not connected it yet. */
export interface DeclaredTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
}

/** How the broker authenticates its calls to an upstream MCP server. */
export type UpstreamAuth =
  /** The caller's connection to a configured provider: its access token as Bearer. */
  | { kind: 'provider'; provider: string }
  /**
   * The upstream's own MCP authorization (discovered; the connection is made by src/providers/mcp-auth/),
   * with the client the operator registered there, if any (`<ID>_CLIENT_ID` / `<ID>_CLIENT_SECRET`).
   */
  | { kind: 'mcp'; clientId?: string; clientSecret?: string }
  /** No credentials (the caller is still a verified MCP user of the broker). */
  | { kind: 'none' };

/** One remote MCP server behind the broker (PROVIDERS_FILE `upstreams:`). */
export interface ConfiguredUpstream {
  id: string;
  url: URL;
  auth: UpstreamAuth;
  /** What the upstream needs at least (provider and mcp upstreams). */
  scopes: string[];
  /**
   * Every scope a 403 scope challenge of this upstream may ask the user to add (`scopes.allow`
   * beside `scopes.required`); undefined: `scopes` alone.
   */
  allowedScopes?: string[];
  /** Put before each of its tool names: `<id>_` with `-` → `_` by default. */
  toolPrefix: string;
  /**
   * `shareSeen`: users who have not connected are shown the definitions other users' listings
   * fetched (the operator's opt-in; by default they see `declared`, else the connect tool).
   */
  tools: { include?: string[]; exclude?: string[]; declared?: DeclaredTool[]; shareSeen?: boolean };
  timeoutMs: number;
  /** Calls one principal may have in flight to this upstream at once (default {@link DEFAULT_CALLS_IN_FLIGHT_PER_USER}). */
  callsInFlightPerUser?: number;
  /**
   * What pages and messages call the upstream: the operator's `name:` (or its old spelling
   * `displayName:`), else its id — never anything the upstream itself sends.
   */
  displayName: string;
  /**
   * Origins beside its own (and, for `auth: mcp`, its authorization server's) that the upstream may
   * send people to with a URL elicitation; normalised `scheme://host[:port]` (none when absent).
   */
  elicitationOrigins?: string[];
}

export interface GatewayConfig {
  upstreams: ConfiguredUpstream[];
  /** Provider id → false: that provider's built-in tools are not served (a deployment takes them from an upstream). */
  builtinTools: Record<string, boolean>;
}

/** How a configured provider looks to this loader: its scope names where scopes apply, else undefined. */
export type KnownProviders = ReadonlyMap<string, { scopes: readonly string[] | undefined }>;

/** Providers that have built-in tools, which `builtinTools: { <id>: false }` may switch off. */
export const PROVIDERS_WITH_BUILTIN_TOOLS: readonly string[] = ['github'];

const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_CALLS_IN_FLIGHT_PER_USER = 4;

const jsonSchemaObject = z.record(z.string(), z.unknown()).refine((s) => s.type === 'object', 'must be a JSON Schema with type "object"');

const declaredTool = z
  .object({
    name: z.string().regex(TOOL_NAME, 'letters, digits, _ . and - only, at most 128'),
    title: z.string().min(1).optional(),
    description: z.string().optional(),
    inputSchema: jsonSchemaObject,
    outputSchema: jsonSchemaObject.optional(),
    annotations: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

/** Exactly `scheme://host[:port]`, https unless loopback (as ALLOWED_ORIGINS). */
const origin = httpsOrLoopbackUrl.refine(
  (v) => /^https?:\/\/[^/?#@\\]+$/i.test(v),
  'must be an origin, scheme://host[:port] and nothing else',
);

const upstreamUrl = httpsOrLoopbackUrl.refine((v) => {
  const u = new URL(v);
  return !u.username && !u.password && !u.hash;
}, 'must not carry credentials or a fragment');

const scopeName = z.string().min(1);

const upstreamSchema = z
  .object({
    id: z.string().regex(/^[a-z][a-z0-9-]{1,31}$/, 'lower-case letters, digits and -, starting with a letter'),
    url: upstreamUrl,
    provider: z.string().min(1).optional(),
    auth: z.enum(['mcp', 'none']).optional(),
    name: z.string().min(1).max(60).optional(),
    /** The old spelling of `name`. */
    displayName: z.string().min(1).max(60).optional(),
    scopes: z
      .union([z.array(scopeName), z.object({ required: z.array(scopeName).default([]), allow: z.array(scopeName).default([]) }).strict()])
      .optional(),
    toolPrefix: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'letters, digits, _ . and - only, at most 64')
      .optional(),
    tools: z
      .object({
        include: z.array(z.string().min(1)).optional(),
        exclude: z.array(z.string().min(1)).optional(),
        declared: z.array(declaredTool).optional(),
        shareSeen: z.boolean().optional(),
      })
      .strict()
      .optional(),
    timeoutMs: z.number().int().min(100).max(600_000).optional(),
    callsInFlightPerUser: z.number().int().min(1).max(64).optional(),
    elicitationOrigins: z.array(origin).optional(),
  })
  .strict()
  .refine((u) => (u.provider === undefined) !== (u.auth === undefined), {
    message: 'needs exactly one of provider: <id> or auth: mcp|none',
    path: ['auth'],
  })
  .refine((u) => u.name === undefined || u.displayName === undefined, {
    message: 'set name or its old spelling displayName, not both',
    path: ['name'],
  })
  .refine((u) => u.auth !== 'none' || u.scopes === undefined, {
    message: 'applies only to provider: and auth: mcp upstreams',
    path: ['scopes'],
  });

/** Every key an `upstreams:` entry may have (docs/configuration.md's table is checked against it). */
export const UPSTREAM_KEYS: readonly string[] = Object.keys(upstreamSchema.shape);

/** `my-tracker` → `my_tracker_`. */
export function defaultToolPrefix(id: string): string {
  return `${id.replace(/-/g, '_')}_`;
}

/**
 * PROVIDERS_FILE's `upstreams:` and `builtinTools:` (none without the file or the sections). Every
 * problem is one line naming `upstreams.<id>.<field>`. Upstream URLs come only from here: nothing a
 * client sends can aim the broker elsewhere.
 */
export function loadGateway(env: NodeJS.ProcessEnv, providers: KnownProviders): GatewayConfig {
  if (!env.PROVIDERS_FILE) return { upstreams: [], builtinTools: {} };
  const sections = readConfigSections(env.PROVIDERS_FILE);
  return { upstreams: readUpstreams(sections.upstreams, providers, env), builtinTools: readBuiltinTools(sections.builtinTools, providers) };
}

function readBuiltinTools(input: unknown, providers: KnownProviders): Record<string, boolean> {
  if (input === undefined) return {};
  const parsed = z.record(z.string(), z.boolean()).safeParse(input);
  if (!parsed.success)
    entryProblem('builtinTools', { path: parsed.error.issues[0]!.path, message: 'must map provider ids to true or false' });
  for (const id of Object.keys(parsed.data)) {
    if (!PROVIDERS_WITH_BUILTIN_TOOLS.includes(id))
      entryProblem(`builtinTools.${id}`, {
        path: [],
        message: `${providers.has(id) ? 'this provider has' : 'no such provider with'} no built-in tools (only ${PROVIDERS_WITH_BUILTIN_TOOLS.join(', ')})`,
      });
  }
  return parsed.data;
}

/** An `auth: mcp` upstream's pre-registered client, from `<ID>_CLIENT_ID` / `<ID>_CLIENT_SECRET` (optional: it may register itself). */
function mcpAuth(env: NodeJS.ProcessEnv, id: string): UpstreamAuth {
  const prefix = envPrefix(id);
  const clientId = env[`${prefix}_CLIENT_ID`]?.trim();
  const clientSecret = env[`${prefix}_CLIENT_SECRET`]?.trim();
  return { kind: 'mcp', ...(clientId ? { clientId, ...(clientSecret ? { clientSecret } : {}) } : {}) };
}

/** `scopes:` as a list, or `{ required, allow }`: the scopes the upstream needs at least. */
function requiredScopes(scopes: string[] | { required: string[] } | undefined): string[] {
  return scopes === undefined ? [] : Array.isArray(scopes) ? scopes : scopes.required;
}

/** The scopes a scope challenge of `upstream` may ask for: `scopes.allow` and `scopes.required` (or the `scopes` list). */
export function allowedScopesOf(upstream: Pick<ConfiguredUpstream, 'scopes' | 'allowedScopes'>): string[] {
  return upstream.allowedScopes ?? upstream.scopes;
}

function readUpstreams(list: unknown, providers: KnownProviders, env: NodeJS.ProcessEnv): ConfiguredUpstream[] {
  const upstreams: ConfiguredUpstream[] = [];
  forEachEntry('upstreams', list, upstreamSchema, (u, named) => {
    if (u.provider !== undefined) {
      const known = providers.get(u.provider);
      if (!known) entryProblem(named, { path: ['provider'], message: `"${u.provider}" is not a provider this broker connects to` });
      const unknown = known.scopes ? requiredScopes(u.scopes).find((s) => !known.scopes!.includes(s)) : undefined;
      if (unknown)
        entryProblem(named, {
          path: Array.isArray(u.scopes) ? ['scopes'] : ['scopes', 'required'],
          message: `"${unknown}" is not a scope of ${u.provider}`,
        });
    }
    // An `auth: mcp` upstream becomes a provider of its own under its id (its /connect page).
    if (u.auth === 'mcp' && providers.has(u.id))
      entryProblem(named, { path: ['id'], message: `"${u.id}" is already a provider id; an auth: mcp upstream needs an id of its own` });
    const toolPrefix = u.toolPrefix ?? defaultToolPrefix(u.id);
    const longest = (names: string[]) => names.reduce((a, b) => (b.length > a.length ? b : a), 'connect');
    const declaredNames = (u.tools?.declared ?? []).map((t) => t.name);
    if (toolPrefix.length + longest(declaredNames).length > MAX_TOOL_NAME_LENGTH)
      entryProblem(named, {
        path: ['toolPrefix'],
        message: `makes "${toolPrefix}${longest(declaredNames)}" longer than MCP's ${MAX_TOOL_NAME_LENGTH} characters`,
      });
    const seen = new Set<string>();
    for (const name of declaredNames) {
      if (seen.has(name)) entryProblem(named, { path: ['tools', 'declared'], message: `"${name}" is declared twice` });
      seen.add(name);
    }
    const other = upstreams.find((x) => x.toolPrefix.startsWith(toolPrefix) || toolPrefix.startsWith(x.toolPrefix));
    if (other)
      entryProblem(named, {
        path: ['toolPrefix'],
        message: `"${toolPrefix}" and upstream "${other.id}"'s "${other.toolPrefix}" overlap (neither may begin the other)`,
      });
    upstreams.push({
      id: u.id,
      url: new URL(u.url),
      auth:
        u.provider !== undefined ? { kind: 'provider', provider: u.provider } : u.auth === 'mcp' ? mcpAuth(env, u.id) : { kind: 'none' },
      scopes: requiredScopes(u.scopes),
      ...(u.scopes && !Array.isArray(u.scopes) ? { allowedScopes: [...new Set([...u.scopes.required, ...u.scopes.allow])] } : {}),
      toolPrefix,
      tools: {
        ...(u.tools?.include ? { include: u.tools.include } : {}),
        ...(u.tools?.exclude ? { exclude: u.tools.exclude } : {}),
        ...(u.tools?.declared ? { declared: u.tools.declared as DeclaredTool[] } : {}),
        ...(u.tools?.shareSeen ? { shareSeen: true } : {}),
      },
      timeoutMs: u.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      callsInFlightPerUser: u.callsInFlightPerUser ?? DEFAULT_CALLS_IN_FLIGHT_PER_USER,
      displayName: u.name ?? u.displayName ?? u.id,
      elicitationOrigins: (u.elicitationOrigins ?? []).map((o) => new URL(o).origin),
    });
  });
  return upstreams;
}
