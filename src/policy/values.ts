import type { CelInput } from '@bufbuild/cel';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';

/** JSON nested deeper than this is cut (the rest reads as null): a condition never needs it, and recursion stays bounded. */
const MAX_DEPTH = 32;

/**
 * A JSON value as CEL sees it: objects become maps, arrays lists, whole numbers (safe integers) CEL
 * `int` and other numbers `double`, so `args.count > 3` and `size(args.labels) == 2` both read as
 * written (CEL compares int and double with each other; arithmetic mixing them needs `3.0` or `int(x)`).
 */
export function celValue(value: unknown, depth = 0): CelInput {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isSafeInteger(value) ? BigInt(value) : value;
    case 'bigint':
      return value;
    case 'object':
      if (depth >= MAX_DEPTH) return null;
      if (value instanceof Date) return timestampFromDate(value) as unknown as CelInput;
      if (Array.isArray(value)) return value.map((v) => celValue(v, depth + 1)) as CelInput;
      return new Map(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, celValue(v, depth + 1)])) as CelInput;
    default:
      return null;
  }
}

/** The five hints MCP defines for a tool: a condition reads each of them, null where the tool declared none. */
export const TOOL_HINTS = ['title', 'readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const;

/** A tool's annotations with every MCP hint present (null when undeclared), so `tool.annotations.destructiveHint == true` never errors. */
export function annotationsValue(annotations: Record<string, unknown>): CelInput {
  const value = celValue(annotations);
  const map = value instanceof Map ? (value as Map<string, CelInput>) : new Map<string, CelInput>();
  for (const hint of TOOL_HINTS) if (!map.has(hint)) map.set(hint, null);
  return map as CelInput;
}
