import { isSpecType } from '@modelcontextprotocol/server';
import type { Principal } from '../auth/principal.js';
import { TOOL_NAME, type ConfiguredUpstream } from '../config/upstreams.js';
import type { ConnectionService } from '../connections/index.js';
import type { Logger } from '../log.js';
import type { Provider } from '../providers/provider.js';
import type { Store } from '../store/index.js';
import { Lru } from '../lru.js';
import { G } from './messages.js';
import { allowedByFilters, CONNECT_TOOL } from './names.js';
import type { UpstreamClient, UpstreamOutcome } from './upstream-client.js';
import { listingOverBounds, MAX_UPSTREAM_TOOLS, tooDeep } from './bounds.js';
import { backgroundFailure } from '../observability/process-guards.js';
import { scopeList } from '../providers/scopes.js';

/** A tool definition as an upstream lists it: passed on as is, only renamed. */
export type ToolDefinition = Record<string, unknown> & { name: string };

export interface CatalogOptions {
  store: Store;
  connections: ConnectionService;
  log: Logger;
  clients: ReadonlyMap<string, UpstreamClient>;
  /** The provider whose connection an upstream uses; undefined for `auth: none`. */
  providerOf(upstream: ConfiguredUpstream): Provider | undefined;
  builtins: ReadonlySet<string>;
  /** How long a user's live list is reused (default 60 s). */
  liveTtlMs?: number;
  /** Live lists kept, one per (principal, upstream) (default 1,000). */
  maxLive?: number;
}

/** Pages of a tools/list followed at most: an upstream cannot keep a listing going forever. */
const MAX_PAGES = 20;
/** How often the definitions other instances stored are read again. */
const STORED_REFRESH_MS = 60_000;

/**
 * What tools/list shows of the upstreams, per user: the live list fetched with the user's own
 * token (cached per principal and upstream, briefly), else the declared tools, else — for an
 * `auth: none` upstream, or one whose operator set `tools.shareSeen` — the last definitions any
 * instance saw, else the upstream's connect tool. Never a shared credential, never another user's
 * entry, and never a question to the user: listing asks nothing.
 */
export class Catalog {
  readonly #live: Lru<string, ToolDefinition[]>;
  /** Upstream id → the definitions last stored (unprefixed, unfiltered) and their JSON. */
  #stored = new Map<string, { tools: ToolDefinition[]; json: string }>();
  #storedAt = 0;
  #storedLoad: Promise<void> | undefined;
  readonly #warned = new Set<string>();
  readonly #callable = new WeakMap<readonly ToolDefinition[], Map<string, ToolDefinition>>();

  constructor(
    readonly upstreams: readonly ConfiguredUpstream[],
    private readonly options: CatalogOptions,
  ) {
    this.#live = new Lru(options.maxLive ?? 1_000, options.liveTtlMs ?? 60_000);
  }

  /** Reads the stored definitions (start-up, and every minute after on use). */
  async loadStored(): Promise<ReadonlyMap<string, readonly ToolDefinition[]>> {
    const rows = await this.options.store.upstreamTools.all();
    const next = new Map<string, { tools: ToolDefinition[]; json: string }>();
    for (const row of rows) {
      const parsed = safeParse(row.definitions_json);
      // Written by any instance, perhaps one that held upstreams to no bound yet.
      const tools = tooDeep(parsed) ? undefined : definitionsOf(parsed);
      if (tools && !listingOverBounds(tools)) next.set(row.upstream, { tools, json: row.definitions_json });
    }
    this.#stored = next;
    this.#storedAt = Date.now();
    return new Map([...next].map(([id, v]) => [id, v.tools]));
  }

  /** Every upstream's tools for `principal`, prefixed and filtered, in configuration order. */
  async listFor(principal: Principal): Promise<ToolDefinition[]> {
    if (Date.now() - this.#storedAt > STORED_REFRESH_MS)
      await (this.#storedLoad ??= this.loadStored()
        .then(() => undefined)
        .catch((err: unknown) => this.options.log.warn('upstream_tools_load_failed', { message: describe(err) }))
        .finally(() => (this.#storedLoad = undefined)));
    const lists = await Promise.all(this.upstreams.map((u) => this.#toolsFor(u, principal)));
    return lists.flat();
  }

  /** Forgets `principal`'s live list of `upstream` (after a connect, the next listing fetches anew). */
  forget(principal: Principal, upstream: ConfiguredUpstream): void {
    this.#live.delete(liveKey(principal, upstream));
  }

  async #toolsFor(upstream: ConfiguredUpstream, principal: Principal): Promise<ToolDefinition[]> {
    const live = await this.#liveFor(upstream, principal);
    if (live) return this.#present(upstream, live, true);
    const declared = upstream.tools.declared as ToolDefinition[] | undefined;
    if (declared?.length) return this.#present(upstream, declared, false);
    const stored = sharesSeen(upstream) ? this.#stored.get(upstream.id)?.tools : undefined;
    if (stored?.length) return this.#present(upstream, stored, false);
    return [connectTool(upstream)];
  }

  /**
   * The tools of `upstream` that `principal` may call, unprefixed: their live list (reused, else
   * fetched now with their own token, done by `deadline`), else the declared tools. When neither is
   * known, `outcome` is what the upstream answered the listing (undefined: no usable connection).
   */
  async callableTools(
    principal: Principal,
    upstream: ConfiguredUpstream,
    deadline: number,
  ): Promise<{ names: ReadonlyMap<string, ToolDefinition> } | { outcome: UpstreamOutcome | undefined }> {
    const live = await this.#fetchLive(upstream, principal, deadline);
    const declared = upstream.tools.declared as ToolDefinition[] | undefined;
    const known = Array.isArray(live) ? live : declared?.length ? declared : undefined;
    if (known) return { names: this.#callableNames(upstream, known) };
    return { outcome: Array.isArray(live) || live === null ? undefined : live };
  }

  /** The unprefixed names of `tools` the caller may call, with their definitions, worked out once per list (every forwarded call asks). */
  #callableNames(upstream: ConfiguredUpstream, tools: readonly ToolDefinition[]): Map<string, ToolDefinition> {
    let names = this.#callable.get(tools);
    if (!names) {
      names = new Map(this.#present(upstream, tools, false).map((t) => [t.name.slice(upstream.toolPrefix.length), t]));
      this.#callable.set(tools, names);
    }
    return names;
  }

  /** The live list with the caller's own usable token, or undefined when there is none (or the upstream failed). */
  async #liveFor(upstream: ConfiguredUpstream, principal: Principal): Promise<ToolDefinition[] | undefined> {
    const live = await this.#fetchLive(upstream, principal);
    return Array.isArray(live) ? live : undefined;
  }

  /**
   * The live list (reused for a while), else what the upstream answered instead (logged), else null
   * when the caller has no usable connection. All its pages share one deadline (by default the
   * upstream's timeout): a slow upstream holds up the user's whole tools/list no longer than that.
   * A listing over a bound (src/gateway/bounds.ts) is refused whole: neither cached, stored nor shown.
   */
  async #fetchLive(
    upstream: ConfiguredUpstream,
    principal: Principal,
    deadline = Date.now() + upstream.timeoutMs,
  ): Promise<ToolDefinition[] | UpstreamOutcome | null> {
    const key = liveKey(principal, upstream);
    const cached = this.#live.get(key);
    if (cached) return cached;
    const token = await this.#tokenFor(upstream, principal);
    if (token === null) return null;
    const client = this.options.clients.get(upstream.id)!;
    const refused = (outcome: UpstreamOutcome) => {
      this.options.log.warn('upstream_list_failed', {
        upstream: upstream.id,
        outcome: outcome.kind,
        ...(outcome.kind === 'failed' ? { reason: outcome.reason, detail: outcome.detail } : {}),
      });
      return outcome;
    };
    const tools: ToolDefinition[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const outcome = await client.request('tools/list', cursor ? { cursor } : {}, { key: principalKey(principal), token, deadline });
      if (outcome.kind !== 'result') return refused(outcome);
      const entries = outcome.result.tools;
      if (!Array.isArray(entries)) return refused({ kind: 'failed', reason: 'malformed', detail: 'tools is not a list' });
      // Counted before each definition is checked: the check is the costly part.
      if (tools.length + entries.length > MAX_UPSTREAM_TOOLS)
        return refused({ kind: 'failed', reason: 'over_bounds', detail: `the listing has more than ${MAX_UPSTREAM_TOOLS} tools` });
      const listed = definitionsOf(entries)!;
      if (listed.length < entries.length)
        this.options.log.warn('upstream_tools_malformed', { upstream: upstream.id, left: entries.length - listed.length });
      tools.push(...listed);
      const over = listingOverBounds(tools);
      if (over) return refused({ kind: 'failed', reason: 'over_bounds', detail: `the listing has ${over}` });
      cursor = typeof outcome.result.nextCursor === 'string' && outcome.result.nextCursor ? outcome.result.nextCursor : undefined;
      if (!cursor) break;
    }
    this.#live.set(key, tools);
    this.#remember(upstream, tools).catch(backgroundFailure('upstream_tools_remember'));
    return tools;
  }

  /** The access token to list with: null when the caller has no usable connection (listing never asks). */
  async #tokenFor(upstream: ConfiguredUpstream, principal: Principal): Promise<string | undefined | null> {
    const provider = this.options.providerOf(upstream);
    if (!provider) return undefined;
    try {
      const usable = await this.options.connections.usable(principal, provider);
      if (usable.kind !== 'ok') return null;
      const granted = scopeList(usable.connection.row.scopes);
      if (provider.missingScopes(granted, upstream.scopes).length > 0) return null;
      return usable.connection.tokens.accessToken;
    } catch (err) {
      this.options.log.warn('upstream_list_no_token', { upstream: upstream.id, message: describe(err) });
      return null;
    }
  }

  /** Stores the definitions when they changed: public metadata, shared with every instance. */
  async #remember(upstream: ConfiguredUpstream, tools: ToolDefinition[]): Promise<void> {
    const json = JSON.stringify(tools);
    if (this.#stored.get(upstream.id)?.json === json) return;
    this.#stored.set(upstream.id, { tools, json });
    await this.options.store.upstreamTools
      .put(upstream.id, json)
      .catch((err: unknown) => this.options.log.warn('upstream_tools_write_failed', { upstream: upstream.id, message: describe(err) }));
  }

  /** Filters applied, names prefixed; a live name that would shadow a built-in (or the connect tool) is hidden. */
  #present(upstream: ConfiguredUpstream, tools: readonly ToolDefinition[], live: boolean): ToolDefinition[] {
    const shown: ToolDefinition[] = [];
    for (const tool of tools) {
      if (!allowedByFilters(upstream, tool.name)) continue;
      const name = `${upstream.toolPrefix}${tool.name}`;
      // Shadowing a built-in or the connect tool, or past MCP's name rules once prefixed: hidden.
      if (this.options.builtins.has(name) || tool.name === CONNECT_TOOL || !TOOL_NAME.test(name)) {
        if (live && !this.#warned.has(name)) {
          this.#warned.add(name);
          this.options.log.warn('upstream_tool_hidden', { upstream: upstream.id, tool: tool.name, name });
        }
        continue;
      }
      shown.push({ ...tool, name });
    }
    return shown;
  }
}

/**
 * Whether the definitions seen by one user may be shown to another: a list fetched with a user's
 * token is what that token could see (private names, descriptions), so only when it was fetched
 * with no credentials, or the operator says the upstream's list is the same for everyone.
 */
function sharesSeen(upstream: ConfiguredUpstream): boolean {
  return upstream.auth.kind === 'none' || upstream.tools.shareSeen === true;
}

export function principalKey(principal: Principal): string {
  return `${principal.issuer}\0${principal.subject}`;
}

function liveKey(principal: Principal, upstream: ConfiguredUpstream): string {
  return `${principalKey(principal)}\0${upstream.id}`;
}

/** The broker's own tool that stands for an upstream nobody has shown us the tools of yet. */
export function connectTool(upstream: ConfiguredUpstream): ToolDefinition {
  return {
    name: `${upstream.toolPrefix}${CONNECT_TOOL}`,
    title: `Connect ${upstream.displayName}`,
    description: G.connectToolDescription(upstream.displayName),
    inputSchema: { type: 'object', properties: {} },
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  };
}

/**
 * The tool definitions in `value`, when it is a list: those MCP's Tool schema accepts (the SDK's
 * own check). One that fails it would make the client refuse the whole tools/list — the built-in
 * tools and every other upstream's with it — so it is left out.
 */
function definitionsOf(value: unknown): ToolDefinition[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value.filter((t): t is ToolDefinition => isSpecType.Tool(t));
}

function safeParse(json: string): unknown {
  try {
    return JSON.parse(json);
  } catch {
    return undefined;
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message.slice(0, 200) : String(err);
}
