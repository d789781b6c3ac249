import type { CallToolResult } from '@modelcontextprotocol/server';

/** A normal result that reports nothing was done (declines and cancels are not errors). */
export function nothingDone(text: string, structured: Record<string, unknown> = { status: 'not_done' }): CallToolResult {
  return { content: [{ type: 'text', text }], structuredContent: structured };
}

export function toolError(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

/** Appended to every tool result that touched a simulated provider. */
export function sandboxNote(provider: { sandbox: boolean; displayName: string }): string {
  return provider.sandbox ? ` [${provider.displayName}: simulated for development, not the real service]` : '';
}
