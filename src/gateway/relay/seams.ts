import { UrlElicitationRequiredError } from '@modelcontextprotocol/server';
import type { GatewaySeams, SeamCall } from '../seams.js';
import { G } from '../messages.js';
import { randomId } from '../../crypto/index.js';
import { toolError } from '../../mcp/index.js';
import { vetInputRequests, vetLink, type InputRefusal, type InputRules } from './input-requests.js';
import { M } from './messages.js';
import { readRelayedRepeat, relayInputRequired, type RelayDeps } from './relay.js';
import { scopeChallengeGate, scopesNotAllowed } from './scope-challenge.js';
import { allowedScopesOf } from '../../config/upstreams.js';

/**
 * The gateway's seams (src/gateway/seams.ts) answered by the relay: nested MRTR and a 2025-11-25
 * upstream's -32042 links (what they ask vetted first, src/gateway/relay/input-requests.ts), and
 * scope challenges.
 */
export function relaySeams(relay: RelayDeps): GatewaySeams {
  // The state is bound to the name the client called, which carries the upstream's prefix.
  const calledName = (call: { upstream: { toolPrefix: string }; tool: string }) => `${call.upstream.toolPrefix}${call.tool}`;
  const relayInput: GatewaySeams['relayInputRequired'] = async (call, upstream) => {
    // The SDK's stateless 2025-11-25 leg has no way to ask; say so in the broker's words.
    if (call.mcp.era === 'legacy') return toolError(M.legacyClientCannotAnswer(call.upstream.id));
    const vetted = await vetInputRequests(upstream.inputRequests, inputRules(call));
    if (!vetted.ok) return refuse(call, vetted.refusal);
    return relayInputRequired(call.ctx, relay, {
      upstream: call.upstream.id,
      tool: calledName(call),
      inputRequests: vetted.inputRequests,
      requestState: upstream.requestState,
    });
  };
  return {
    async onScopeChallenge(call, wwwAuthenticate) {
      // An `auth: none` upstream has no connection whose scopes could grow.
      if (!call.provider) return toolError(G.needsMoreAccess(call.upstream.id));
      // A provider's connection serves every upstream and service of that provider: widen it only
      // as far as the operator allowed this upstream. An `auth: mcp` connection is the upstream's own.
      const outside =
        call.upstream.auth.kind === 'provider' ? scopesNotAllowed(call.provider, allowedScopesOf(call.upstream), wwwAuthenticate) : [];
      if (outside.length > 0) {
        call.deps.log.warn('upstream_scope_refused', { upstream: call.upstream.id, tool: call.tool, scopes: outside.join(' ') });
        return toolError(G.scopesNotAllowed(call.upstream.id, outside));
      }
      const gate = await scopeChallengeGate(
        {
          ctx: call.ctx,
          call: call.mcp,
          deps: call.deps,
          provider: call.provider,
          purpose: G.purpose(call.upstream.displayName, call.tool),
          scopes: call.upstream.scopes,
        },
        wwwAuthenticate,
        call.upstream.id,
      );
      // ok: true never comes back (the gate answers "named nothing we can fix" instead); be safe anyway.
      return gate.ok ? toolError(G.needsMoreAccess(call.upstream.id)) : gate.result;
    },
    relayInputRequired: relayInput,
    async relayUrlElicitations(call, data) {
      const asked = (data as { elicitations?: unknown } | null | undefined)?.elicitations;
      if (!Array.isArray(asked) || asked.length === 0) return refuse(call, { reason: 'malformed' });
      if (call.mcp.era === 'legacy') {
        // Passed on as the broker's own gate answers a 2025-11-25 client: -32042, then a plain repeat.
        const rules = inputRules(call);
        const links = [];
        for (const e of asked as Array<{ url?: unknown; message?: unknown; elicitationId?: unknown }>) {
          const link = await vetLink({ url: e?.url, message: e?.message }, rules);
          if (!link.ok) return refuse(call, link.refusal);
          const id = typeof e.elicitationId === 'string' && e.elicitationId.length <= 256 ? e.elicitationId : randomId();
          links.push({ mode: 'url' as const, ...link.link, elicitationId: id });
        }
        throw new UrlElicitationRequiredError(links, links[0]!.message);
      }
      const inputRequests = Object.fromEntries(
        asked.map((e: { url?: unknown; message?: unknown } | null, i) => [
          `link_${i + 1}`,
          { method: 'elicitation/create', params: { mode: 'url', url: e?.url, message: e?.message } },
        ]),
      );
      return relayInput(call, { inputRequests, requestState: undefined });
    },
    async repeatParams(call) {
      const repeat = readRelayedRepeat(call.ctx, relay, { upstream: call.upstream.id, tool: calledName(call) });
      if (!repeat) return undefined;
      return { inputResponses: repeat.inputResponses, ...(repeat.requestState !== undefined ? { requestState: repeat.requestState } : {}) };
    },
  };
}

/** What an upstream may ask this call's client: what the client declared, in links to the upstream's own sites. */
function inputRules(call: SeamCall): InputRules {
  const { upstream, provider } = call;
  return {
    asker: upstream.displayName,
    capabilities: call.mcp.capabilities,
    async allowsOrigin(origin) {
      if (origin === upstream.url.origin || upstream.elicitationOrigins?.includes(origin)) return true;
      if (upstream.auth.kind !== 'mcp' || !provider) return false;
      // Its authorization server is known once discovered (the connect flow did; cached after).
      await provider.prepare().catch(() => undefined);
      return origin === provider.authorizationOrigin;
    },
  };
}

/** A tool error naming the upstream, and a log line saying what it asked for (an origin at most, never a URL). */
function refuse(call: SeamCall, refusal: InputRefusal) {
  const id = call.upstream.id;
  call.deps.log.warn('upstream_input_refused', { upstream: id, tool: call.tool, ...refusal });
  switch (refusal.reason) {
    case 'not_offered':
      return toolError(M.inputNotOffered(id, refusal.input));
    case 'foreign_link':
      return toolError(M.foreignLink(id));
    case 'malformed':
      return toolError(M.inputMalformed(id));
  }
}
