import { createRequestStateCodec, type RequestStateCodec, type ServerContext } from '@modelcontextprotocol/server';
import { deriveKey } from '../crypto/index.js';
import { stateBindingOf } from './call.js';

/**
 * What the built-in tools carry across a round trip. Signed, not encrypted: nothing secret goes in
 * here in the clear.
 */
export type BuiltinState =
  | { kind: 'connect'; pid: string }
  | { kind: 'confirm_disconnect'; provider: string }
  /** A call waiting for approval (src/mcp/policy.ts): the repeat holds on the request the gate names. */
  | { kind: 'approval'; rid: string };

/**
 * The codec as one user of it sees it: it mints its own states (`S`), and what it verifies may be
 * anyone's, since one codec (one key) serves the built-in tools and a request router alike.
 */
export interface StateSigner<S> {
  mint(payload: S, ctx: ServerContext): Promise<string>;
  verify(state: string, ctx: ServerContext): Promise<unknown>;
}

/**
 * The SDK's HMAC codec, bound to the principal (iss + sub of the verified token), the method, the
 * tool and a digest of its arguments: state replayed by another user, on another tool, or with other
 * arguments fails verification and the SDK answers -32602 before any tool code runs. One codec (one
 * key) signs the built-ins' states and those a request router adds (`S`).
 */
export function createToolStateCodec<S extends { kind: string } = BuiltinState>(
  brokerSecret: Buffer,
  ttlSeconds: number,
): RequestStateCodec<S> {
  return createRequestStateCodec<S>({
    key: deriveKey(brokerSecret, 'request-state'),
    ttlSeconds,
    bind: (ctx: ServerContext) => {
      const call = stateBindingOf(ctx);
      // Fail closed: a state is never minted or accepted bound to less than all of these.
      if (!call) throw new Error('requestState needs a verified principal and the call it belongs to');
      return [call.principal.issuer, call.principal.subject, call.method, call.tool, call.argsDigest].join('\0');
    },
  });
}
