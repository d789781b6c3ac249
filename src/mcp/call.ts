import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  type AuthInfo,
  type ClientCapabilities,
  type McpRequestContext,
  type ProtocolEra,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { claimsFromAuthInfo, principalFromAuthInfo } from '../auth/bearer.js';
import type { Principal } from '../auth/principal.js';
import { sha256Base64url } from '../crypto/index.js';
import { withFields, type Logger } from '../log.js';

/**
 * One MCP request as the broker serves it, built once where the HTTP request becomes an MCP call
 * ({@link mcpCallOf}, in the per-request server factory) and passed explicitly to every tool and
 * to the gateway.
 */
export interface McpCall {
  /** The caller, from the bearer token the HTTP layer verified; tool arguments never name it. */
  principal: Principal;
  /** The verified access token's claims, for policy conditions (`principal.claims`). */
  claims: Readonly<Record<string, unknown>>;
  era: ProtocolEra;
  /** The JSON-RPC method; for a `tools/call` the tool's name and a digest of its arguments ('' otherwise). */
  method: string;
  tool: string;
  argsDigest: string;
  /** A `tools/call`'s arguments as the client sent them ({} when none): what a policy condition reads as `args`. */
  args: unknown;
  /** Declared on this very request (2026-07-28); undefined on the stateless 2025-11-25 leg. */
  capabilities: ClientCapabilities | undefined;
  /** The client's title or name, as it introduced itself (2026-07-28). */
  clientName: string | undefined;
  /** The client's `clientInfo.name`, as it introduced itself (2026-07-28; '' otherwise): self-declared, never proof. */
  clientId: string;
  /** Log lines of this request, carrying its request id. */
  log: Logger;
}

/** What the HTTP layer read of the request, before the SDK chose an era. */
interface HttpFacts {
  method: string;
  tool: string;
  argsDigest: string;
  args: unknown;
  meta: Record<string, unknown> | undefined;
  requestId: string | undefined;
}

const KEY = 'mcpCall';

/**
 * The verified `authInfo` with what the HTTP layer read of the body attached: the SDK hands
 * `authInfo`, unchanged, to the server factory and to every handler, and is the only channel it
 * offers. This used to travel in an AsyncLocalStorage, whose promise hooks cost every request
 * ~60 µs of CPU, about a tenth of a bare MCP server's (see docs/performance.md).
 */
export function withHttpFacts(authInfo: AuthInfo, body: unknown, requestId: string | undefined): AuthInfo {
  const msg = (body && typeof body === 'object' && !Array.isArray(body) ? body : {}) as {
    method?: unknown;
    params?: { name?: unknown; arguments?: unknown; _meta?: unknown };
  };
  const params = msg.params && typeof msg.params === 'object' ? msg.params : {};
  const meta = params._meta && typeof params._meta === 'object' ? (params._meta as Record<string, unknown>) : undefined;
  const facts: HttpFacts = {
    method: typeof msg.method === 'string' ? msg.method : '',
    tool: typeof params.name === 'string' ? params.name : '',
    argsDigest: sha256Base64url(canonicalJson(params.arguments ?? {})),
    args: params.arguments ?? {},
    meta,
    requestId,
  };
  return { ...authInfo, extra: { ...authInfo.extra, [KEY]: facts } };
}

function httpFactsOf(authInfo: AuthInfo | undefined): HttpFacts | undefined {
  const facts = authInfo?.extra?.[KEY] as HttpFacts | undefined;
  return facts && typeof facts.method === 'string' && typeof facts.tool === 'string' && typeof facts.argsDigest === 'string'
    ? facts
    : undefined;
}

/**
 * The call a per-request server serves, from the request context the SDK gives its factory.
 * @throws {Error} on a request that the HTTP layer did not authenticate (never served).
 */
export function mcpCallOf(rc: Pick<McpRequestContext, 'era' | 'authInfo'>, log: Logger): McpCall {
  const principal = principalFromAuthInfo(rc.authInfo);
  const facts = httpFactsOf(rc.authInfo);
  if (!principal || !facts) throw new Error('This request is not authenticated.');
  const modern = rc.era === 'modern';
  return {
    principal,
    claims: claimsFromAuthInfo(rc.authInfo),
    era: rc.era,
    method: facts.method,
    tool: facts.tool,
    argsDigest: facts.argsDigest,
    args: facts.args,
    capabilities: modern ? (facts.meta?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined) : undefined,
    clientName: modern ? clientNameOf(facts.meta?.[CLIENT_INFO_META_KEY]) : undefined,
    clientId: modern ? clientIdOf(facts.meta?.[CLIENT_INFO_META_KEY]) : '',
    log: facts.requestId === undefined ? log : withFields(log, { reqId: facts.requestId }),
  };
}

/**
 * What a signed requestState is bound to, for the SDK's codec, which calls its binding with a
 * handler's context: the principal and the call, read the way {@link mcpCallOf} reads them.
 * Undefined (fail closed) without either, or when the SDK serves another method than the HTTP layer read.
 */
export function stateBindingOf(ctx: ServerContext): { principal: Principal; method: string; tool: string; argsDigest: string } | undefined {
  const principal = principalFromAuthInfo(ctx.http?.authInfo);
  const facts = httpFactsOf(ctx.http?.authInfo);
  if (!principal || !facts || facts.method !== ctx.mcpReq.method) return undefined;
  return { principal, method: facts.method, tool: facts.tool, argsDigest: facts.argsDigest };
}

function clientNameOf(info: unknown): string | undefined {
  const i = info as { name?: unknown; title?: unknown } | undefined;
  const name = typeof i?.title === 'string' ? i.title : i?.name;
  return typeof name === 'string' ? name : undefined;
}

function clientIdOf(info: unknown): string {
  const name = (info as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' ? name : '';
}

export function supportsUrlElicitation(caps: ClientCapabilities | undefined): boolean {
  return !!caps?.elicitation && (caps.elicitation as Record<string, unknown>).url !== undefined;
}

/** `elicitation: {}` means form mode, for backwards compatibility. */
export function supportsFormElicitation(caps: ClientCapabilities | undefined): boolean {
  const e = caps?.elicitation as Record<string, unknown> | undefined;
  return !!e && (e.form !== undefined || Object.keys(e).length === 0);
}

/** JSON with object keys sorted at every level, so equal arguments digest equally. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
