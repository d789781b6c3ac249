// What the helper reads from the tool's request context: who is calling (from the token the
// service's own bearer verification accepted), in which protocol era, with which capabilities.
import { CLIENT_CAPABILITIES_META_KEY, type ClientCapabilities, type ServerContext } from '@modelcontextprotocol/server';
import type { Principal } from './state.js';

export interface Caller {
  token: string;
  principal: Principal;
}

const text = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);

/**
 * The subject token and its principal (`iss`, `sub`).
 *
 * The claims are taken from `authInfo.extra` when the service's verifier put them there
 * (`{ iss, sub }` or `{ principal: { issuer, subject } }`), otherwise read from the JWT payload
 * WITHOUT verifying it again: `ctx.http.authInfo` exists only after the service's bearer
 * verification accepted this very token, and that verification is what makes them trustworthy.
 * The broker verifies the token once more before it exchanges anything.
 */
export function callerOf(ctx: ServerContext): Caller | undefined {
  const info = ctx.http?.authInfo;
  const token = text(info?.token);
  if (!info || !token) return undefined;
  const extra = (info.extra ?? {}) as Record<string, unknown>;
  const nested = (extra.principal ?? {}) as Record<string, unknown>;
  let issuer = text(extra.iss) ?? text(nested.issuer);
  let subject = text(extra.sub) ?? text(nested.subject);
  if (!issuer || !subject) {
    const claims = jwtClaims(token);
    issuer = text(claims?.iss);
    subject = text(claims?.sub);
  }
  return issuer && subject ? { token, principal: { issuer, subject } } : undefined;
}

function jwtClaims(token: string): Record<string, unknown> | undefined {
  const part = token.split('.')[1];
  if (!part || !/^[A-Za-z0-9_-]+$/.test(part)) return undefined;
  try {
    const v: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return v && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** 2026-07-28 requests carry a per-request `_meta` envelope; 2025-11-25 ones do not. */
export function isModernEra(ctx: ServerContext): boolean {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  return envelope !== undefined && Object.keys(envelope).length > 0;
}

export function supportsUrlElicitation(ctx: ServerContext): boolean {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  const caps = envelope?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined;
  return !!caps?.elicitation && (caps.elicitation as Record<string, unknown>).url !== undefined;
}
