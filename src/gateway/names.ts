import { ConfigError } from '../config/errors.js';
import type { ConfiguredUpstream } from '../config/upstreams.js';

/** The tool a listed or called name stands for. */
export type ToolRoute =
  | { kind: 'tool'; upstream: ConfiguredUpstream; name: string; allowed: boolean }
  /** `<prefix>connect`: the broker's own tool that connects the upstream (reserved in every prefix). */
  | { kind: 'connect'; upstream: ConfiguredUpstream };

export const CONNECT_TOOL = 'connect';

/** Whether the upstream's filters let its tool `name` (unprefixed) through. */
export function allowedByFilters(upstream: ConfiguredUpstream, name: string): boolean {
  const { include, exclude } = upstream.tools;
  return (!include || include.includes(name)) && !exclude?.includes(name);
}

/**
 * Names never collide: built-in tools first, then the one upstream whose prefix begins the name
 * (prefixes never begin one another, see src/config/upstreams.ts).
 */
export class ToolNames {
  constructor(
    readonly upstreams: readonly ConfiguredUpstream[],
    readonly builtins: ReadonlySet<string>,
  ) {}

  isBuiltin(name: string): boolean {
    return this.builtins.has(name);
  }

  route(name: string): ToolRoute | undefined {
    if (this.builtins.has(name)) return undefined;
    const upstream = this.upstreams.find((u) => name.startsWith(u.toolPrefix) && name.length > u.toolPrefix.length);
    if (!upstream) return undefined;
    const rest = name.slice(upstream.toolPrefix.length);
    if (rest === CONNECT_TOOL) return { kind: 'connect', upstream };
    return { kind: 'tool', upstream, name: rest, allowed: allowedByFilters(upstream, rest) };
  }

  /**
   * Refuses, with one line naming both, any two tools the configuration makes share a name: the
   * switched-on built-ins, each upstream's declared tools and its connect tool. The definitions
   * last seen are the upstream's, not the operator's: one that collides is no reason to refuse to
   * start (the listing hides it, as it hides a live one), so it is only returned, for a warning.
   */
  assertNoCollisions(stored: ReadonlyMap<string, readonly { name: string }[]>): Array<{ upstream: string; tool: string; name: string }> {
    const owners = new Map<string, string>();
    const claim = (name: string, owner: string) => {
      const other = owners.get(name);
      if (other !== undefined && other !== owner)
        throw new ConfigError(
          `PROVIDERS_FILE: tool name ${name} is both ${other} and ${owner} (switch the built-in tools off with builtinTools, or give the upstream another toolPrefix)`,
        );
      owners.set(name, owner);
    };
    for (const name of this.builtins) claim(name, 'the built-in tool');
    for (const u of this.upstreams) {
      claim(`${u.toolPrefix}${CONNECT_TOOL}`, `upstream "${u.id}"'s connect tool`);
      for (const t of u.tools.declared ?? [])
        if (allowedByFilters(u, t.name)) claim(`${u.toolPrefix}${t.name}`, `upstream "${u.id}"'s ${t.name}`);
    }
    const hidden: Array<{ upstream: string; tool: string; name: string }> = [];
    for (const u of this.upstreams)
      for (const t of stored.get(u.id) ?? []) {
        const name = `${u.toolPrefix}${t.name}`;
        const other = owners.get(name);
        if (t.name !== CONNECT_TOOL && allowedByFilters(u, t.name) && other !== undefined && other !== `upstream "${u.id}"'s ${t.name}`)
          hidden.push({ upstream: u.id, tool: t.name, name });
      }
    return hidden;
  }
}
