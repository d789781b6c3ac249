import type { GatewaySeams } from '../seams.js';
import { G } from '../messages.js';
import { toolError } from '../../mcp/results.js';
import { readRelayedRepeat, relayInputRequired, type RelayDeps } from './relay.js';
import { scopeChallengeGate } from './scope-challenge.js';

/** The gateway's seams (src/gateway/seams.ts) answered by the relay: nested MRTR and scope challenges. */
export function relaySeams(relay: RelayDeps): GatewaySeams {
  // The state is bound to the name the client called, which carries the upstream's prefix.
  const calledName = (call: { upstream: { toolPrefix: string }; tool: string }) => `${call.upstream.toolPrefix}${call.tool}`;
  return {
    async onScopeChallenge(call, wwwAuthenticate) {
      // An `auth: none` upstream has no connection whose scopes could grow.
      if (!call.provider) return toolError(G.needsMoreAccess(call.upstream.id));
      const gate = await scopeChallengeGate(
        call.ctx,
        call.facts,
        call.deps,
        call.provider,
        G.purpose(call.upstream.displayName, call.tool),
        call.upstream.scopes,
        wwwAuthenticate,
        call.upstream.id,
      );
      // ok: true never comes back (the gate answers "named nothing we can fix" instead); be safe anyway.
      return gate.ok ? toolError(G.needsMoreAccess(call.upstream.id)) : gate.result;
    },
    async relayInputRequired(call, upstream) {
      return relayInputRequired(call.ctx, relay, {
        upstream: call.upstream.id,
        tool: calledName(call),
        inputRequests: upstream.inputRequests as Parameters<typeof relayInputRequired>[2]['inputRequests'],
        requestState: upstream.requestState,
      });
    },
    async repeatParams(call) {
      const repeat = readRelayedRepeat(call.ctx, relay, { upstream: call.upstream.id, tool: calledName(call) });
      if (!repeat) return undefined;
      return { inputResponses: repeat.inputResponses, ...(repeat.requestState !== undefined ? { requestState: repeat.requestState } : {}) };
    },
  };
}
