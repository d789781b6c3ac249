import type { CallToolResult } from '@modelcontextprotocol/server';
import { z } from 'zod';

/**
 * Where a result that says "connect first", "more access needed" or "refused" carries the same as
 * data, shaped after the proposed structured authorization denials (SEP-2643), under our own key
 * until that lands: `reason`, the id of the flow it belongs to, and what would fix it.
 */
export const DENIAL_META_KEY = 'mcp-connect-broker/authorization';

export interface Denial {
  reason: string;
  /** The connect flow (pending connection) the denial belongs to; an id, never an authority. */
  authorizationContextId?: string;
  remediationHints?: Array<{ type: 'url'; url: string }>;
}

export function withDenial<R extends CallToolResult>(result: R, denial: Denial): R {
  return { ...result, _meta: { ...result._meta, [DENIAL_META_KEY]: denial } };
}

/**
 * The fields a tool's structured output carries when it answers with the connect link itself (a
 * client that cannot open a URL elicitation): part of every connection-gated tool's output schema.
 */
export const CONNECT_LINK_OUTPUT = {
  provider: z.string().optional(),
  connect_url: z.string().optional(),
  missing_scopes: z.array(z.string()).optional(),
  /** The link's short form for another device (RFC 8628's names): open `verification_uri`, type `user_code`. */
  user_code: z.string().optional(),
  verification_uri: z.string().optional(),
  /** A call waiting for approval, for a client without URL elicitation: the requester's status page and its expiry (src/mcp/policy.ts). */
  approval_url: z.string().optional(),
  expires_at: z.string().optional(),
};

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
