import type { ServerContext } from '@modelcontextprotocol/server';
import { deriveKey, Sealer } from '../../crypto/index.js';
import { stateBindingOf, type StateSigner } from '../../mcp/index.js';

/**
 * The largest upstream `requestState` the broker carries inside its own (bytes of UTF-8). Ours
 * travels through the client on every round, so an upstream cannot make it grow without bound.
 */
export const MAX_UPSTREAM_STATE_BYTES = 16 * 1024;

/** What a sealed upstream state is bound to: the caller, the upstream, and the very call. */
export interface UpstreamBinding {
  issuer: string;
  subject: string;
  upstream: string;
  method: string;
  /** The tool name the client called (the broker's, prefixed). */
  tool: string;
  argsDigest: string;
}

/** What the gateway carries in our requestState across a relayed round: the upstream, and its own state sealed. */
export type UpstreamState = { kind: 'upstream'; upstream: string; sealed: string };

/** Our state as the verify hook hands it to the tool: the upstream's own state already opened. */
export type OpenedUpstreamState = UpstreamState & { opened: { state?: string } };

export function isUpstreamState(state: { kind: string }): state is UpstreamState | OpenedUpstreamState {
  return state.kind === 'upstream';
}

/** Thrown when a sealed upstream state does not open under this binding (moved, altered, other key). */
export class UpstreamStateRefused extends Error {
  override name = 'UpstreamStateRefused';
}

/**
 * AES-256-GCM sealing of an upstream's `requestState` before it goes into ours: the client holds
 * it but reads nothing of it, and the binding is the additional data, so a state moved to another
 * user, upstream, tool or arguments fails to open — besides failing our HMAC's own binding. The key
 * is derived from BROKER_SECRET under its own label, so every instance opens what any other sealed.
 */
export class UpstreamStates {
  readonly #sealer: Sealer;

  constructor(brokerSecret: Buffer) {
    this.#sealer = new Sealer([deriveKey(brokerSecret, 'upstream-request-state')]);
  }

  /** `state` undefined: the upstream sent input requests without a state of its own. */
  seal(state: string | undefined, binding: UpstreamBinding): string {
    return this.#sealer.seal(JSON.stringify(state === undefined ? {} : { state }), context(binding)).value;
  }

  /** @throws {UpstreamStateRefused} when `sealed` does not open under `binding`. */
  open(sealed: string, binding: UpstreamBinding): { state?: string } {
    let plain: unknown;
    try {
      plain = JSON.parse(this.#sealer.open({ keyId: this.#sealer.keyId, value: sealed }, context(binding)));
    } catch {
      throw new UpstreamStateRefused('the upstream state does not open under this binding');
    }
    const state = (plain as { state?: unknown } | null)?.state;
    if (plain === null || typeof plain !== 'object' || (state !== undefined && typeof state !== 'string'))
      throw new UpstreamStateRefused('the upstream state is not what the broker sealed');
    return state === undefined ? {} : { state };
  }
}

function context(b: UpstreamBinding) {
  // Length-prefixed, so no choice of names can make two bindings serialise alike.
  const rest = ['upstream-request-state', b.upstream, b.method, b.tool, b.argsDigest].map((p) => `${p.length}:${p}`).join(';');
  return { issuer: b.issuer, subject: b.subject, provider: rest };
}

/**
 * The binding of the call `ctx` serves for `upstream`: the verified principal and the call scope the
 * HTTP layer attached (method, tool name, arguments digest). Fails closed without either.
 */
export function bindingOf(ctx: ServerContext, upstream: string): UpstreamBinding {
  const call = stateBindingOf(ctx);
  if (!call) throw new Error('an upstream state needs a verified principal and the call it belongs to');
  return {
    issuer: call.principal.issuer,
    subject: call.principal.subject,
    upstream,
    method: call.method,
    tool: call.tool,
    argsDigest: call.argsDigest,
  };
}

/**
 * The `requestState.verify` hook of the broker's McpServer: our HMAC codec first (principal,
 * method, tool, arguments), then, for a relayed upstream state, the AEAD opening under the same
 * binding. Any failure throws, which the SDK answers with its frozen -32602 before a tool runs;
 * the tool gets the upstream's state already opened.
 */
export function verifyToolState(deps: { codec: Pick<StateSigner<unknown>, 'verify'>; upstreamStates: UpstreamStates }) {
  return async (state: string, ctx: ServerContext): Promise<{ kind: string } | OpenedUpstreamState> => {
    // The codec only verifies what it minted, and every state minted has a `kind`.
    const payload = (await deps.codec.verify(state, ctx)) as { kind: string };
    if (!isUpstreamState(payload)) return payload;
    if (typeof payload.upstream !== 'string' || typeof payload.sealed !== 'string') throw new UpstreamStateRefused('malformed');
    return { ...payload, opened: deps.upstreamStates.open(payload.sealed, bindingOf(ctx, payload.upstream)) };
  };
}
