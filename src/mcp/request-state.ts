import { createRequestStateCodec, type RequestStateCodec, type ServerContext } from '@modelcontextprotocol/server';
import { principalFromAuthInfo } from '../auth/bearer.js';
import { deriveKey } from '../crypto/index.js';
import { callScopeOf } from './call-scope.js';

/**
 * What our tools carry across a round trip. Signed, not encrypted: nothing secret goes in here in
 * the clear (an upstream's own state travels sealed, see src/gateway/relay/upstream-state.ts).
 */
export type ToolState =
  | { kind: 'connect'; pid: string }
  | { kind: 'confirm_disconnect'; provider: string }
  | { kind: 'upstream'; upstream: string; sealed: string };

/**
 * The SDK's HMAC codec, bound to the principal (iss + sub of the verified token), the method, the
 * tool and a digest of its arguments: state replayed by another user, on another tool, or with other
 * arguments fails verification and the SDK answers -32602 before any tool code runs.
 */
export function createToolStateCodec(brokerSecret: Buffer, ttlSeconds: number): RequestStateCodec<ToolState> {
  return createRequestStateCodec<ToolState>({
    key: deriveKey(brokerSecret, 'request-state'),
    ttlSeconds,
    bind: (ctx: ServerContext) => {
      const principal = principalFromAuthInfo(ctx.http?.authInfo);
      const call = callScopeOf(ctx.http?.authInfo);
      // Fail closed: a state is never minted or accepted bound to less than all of these.
      if (!principal || !call || call.method !== ctx.mcpReq.method)
        throw new Error('requestState needs a verified principal and the call it belongs to');
      return [principal.issuer, principal.subject, call.method, call.name, call.argsDigest].join('\0');
    },
  });
}
