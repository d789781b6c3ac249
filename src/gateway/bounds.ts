/**
 * What an upstream's answers are held to before the broker uses them, beside the byte bound
 * (`UPSTREAM_MAX_RESULT_BYTES`). Each bound is generous for a real server; past one, the answer is
 * refused as a whole: that upstream's call fails, or its listing is skipped for that user.
 */
import { MAX_TOOL_NAME_LENGTH } from '../config/upstreams.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../http/web-adapter.js';

/** JSON nesting an upstream message may have: the bound the broker's own `/mcp` holds clients to. */
export const MAX_UPSTREAM_JSON_DEPTH = MAX_JSON_DEPTH;
/** Tools one upstream may list (all pages together). */
export const MAX_UPSTREAM_TOOLS = 1_000;
/** A tool's name, unprefixed: MCP's own rule. */
export const MAX_UPSTREAM_TOOL_NAME = MAX_TOOL_NAME_LENGTH;
export const MAX_UPSTREAM_TOOL_TITLE = 1_024;
export const MAX_UPSTREAM_TOOL_DESCRIPTION = 16_384;

/** Whether a parsed upstream message nests deeper than {@link MAX_UPSTREAM_JSON_DEPTH}. */
export function tooDeep(message: unknown): boolean {
  return nestsDeeperThan(message, MAX_UPSTREAM_JSON_DEPTH);
}

/** Why `tools` (one upstream's whole listing) is over a bound, for the log; undefined when it is within them all. */
export function listingOverBounds(tools: ReadonlyArray<{ name: string; title?: unknown; description?: unknown }>): string | undefined {
  if (tools.length > MAX_UPSTREAM_TOOLS) return `more than ${MAX_UPSTREAM_TOOLS} tools`;
  for (const tool of tools) {
    if (tool.name.length > MAX_UPSTREAM_TOOL_NAME) return `a name longer than ${MAX_UPSTREAM_TOOL_NAME} characters`;
    if (typeof tool.title === 'string' && tool.title.length > MAX_UPSTREAM_TOOL_TITLE)
      return `a title longer than ${MAX_UPSTREAM_TOOL_TITLE} characters`;
    if (typeof tool.description === 'string' && tool.description.length > MAX_UPSTREAM_TOOL_DESCRIPTION)
      return `a description longer than ${MAX_UPSTREAM_TOOL_DESCRIPTION} characters`;
  }
  return undefined;
}
