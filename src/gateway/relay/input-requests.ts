/**
 * Which of an upstream's input requests may reach the client, and how they are worded there. The
 * client shows a relayed question in the broker's voice (it knows no other server), so:
 *
 * - only what the broker offered the upstream is relayed: elicitation, in the modes this very
 *   request's client declared (src/gateway/forward.ts passes no other capability on). Sampling,
 *   roots, an unknown method or mode, or a mode the client did not declare is refused, not relayed;
 * - a link is shown only on an origin the upstream may send people to: its own, its authorization
 *   server's (`auth: mcp`), or one the operator listed for it (`elicitationOrigins`);
 * - every question starts with the upstream's name, so the person knows who is asking.
 *
 * One refused request refuses the whole round: the upstream asked for all of them together.
 */
import type { ClientCapabilities, InputRequests } from '@modelcontextprotocol/server';
import { supportsFormElicitation, supportsUrlElicitation } from '../../mcp/index.js';
import { M } from './messages.js';

/** Input the broker never offered the upstream, by what it is. */
export type UnofferedInput = 'sampling' | 'roots' | 'url' | 'form' | 'other';

export type InputRefusal =
  { reason: 'not_offered'; input: UnofferedInput } | { reason: 'foreign_link'; origin: string } | { reason: 'malformed' };

export interface InputRules {
  /** The upstream's display name, which leads every relayed question. */
  asker: string;
  /** What this request's client declared it can answer. */
  capabilities: ClientCapabilities | undefined;
  /** Whether a link to `origin` may be shown for this upstream. */
  allowsOrigin(origin: string): Promise<boolean>;
}

/** A URL elicitation as both eras carry it (2025-11-25 adds an `elicitationId`). */
export interface LinkRequest {
  url: string;
  message: string;
}

/** The requests as the client may see them, or why they may not. */
export async function vetInputRequests(
  requests: Record<string, unknown>,
  rules: InputRules,
): Promise<{ ok: true; inputRequests: InputRequests } | { ok: false; refusal: InputRefusal }> {
  const vetted: Record<string, unknown> = {};
  for (const [key, request] of Object.entries(requests)) {
    const { method, params } = (isObject(request) ? request : {}) as { method?: unknown; params?: unknown };
    if (method === 'sampling/createMessage') return refused({ reason: 'not_offered', input: 'sampling' });
    if (method === 'roots/list') return refused({ reason: 'not_offered', input: 'roots' });
    if (method !== 'elicitation/create') return refused(typeof method === 'string' ? { reason: 'not_offered', input: 'other' } : MALFORMED);
    if (!isObject(params) || typeof params.message !== 'string') return refused(MALFORMED);
    const mode = params.mode ?? 'form';
    if (mode === 'url') {
      if (!supportsUrlElicitation(rules.capabilities)) return refused({ reason: 'not_offered', input: 'url' });
      const link = await vetLink({ url: params.url as string, message: params.message }, rules);
      if (!link.ok) return link;
      vetted[key] = { method, params: { ...params, ...link.link } };
    } else if (mode === 'form') {
      if (!supportsFormElicitation(rules.capabilities)) return refused({ reason: 'not_offered', input: 'form' });
      if (!isObject(params.requestedSchema)) return refused(MALFORMED);
      vetted[key] = { method, params: { ...params, message: M.asks(rules.asker, params.message) } };
    } else return refused({ reason: 'not_offered', input: 'other' });
  }
  return { ok: true, inputRequests: vetted as InputRequests };
}

/** One link to show (a URL elicitation's `url` and `message`): on an allowed origin, its message led by the asker's name. */
export async function vetLink(
  link: { url: unknown; message: unknown },
  rules: Pick<InputRules, 'asker' | 'allowsOrigin'>,
): Promise<{ ok: true; link: LinkRequest } | { ok: false; refusal: InputRefusal }> {
  if (typeof link.url !== 'string' || typeof link.message !== 'string') return refused(MALFORMED);
  const url = URL.parse(link.url);
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) return refused(MALFORMED);
  // Credentials before the host (`https://github.com@evil.example/`) only ever serve to mislead.
  if (url.username || url.password || !(await rules.allowsOrigin(url.origin)))
    return refused({ reason: 'foreign_link', origin: url.origin });
  return { ok: true, link: { url: link.url, message: M.asks(rules.asker, link.message) } };
}

const MALFORMED: InputRefusal = { reason: 'malformed' };

function refused(refusal: InputRefusal): { ok: false; refusal: InputRefusal } {
  return { ok: false, refusal };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return !!value && typeof value === 'object' && !Array.isArray(value);
}
