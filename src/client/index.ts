/**
 * `mcp-connect-broker/client`: connections for your own MCP servers.
 *
 * A tool of a service built on `@modelcontextprotocol/server` gets the signed-in user's provider
 * token from the broker (RFC 8693 token exchange) — or, when the user has not connected yet, asks
 * them with a URL elicitation of the broker's own connect page, and carries on once they did:
 *
 * ```ts
 * const broker = connectBroker({ url: 'https://broker.example.com', clientId: 'issue-bot', clientSecret, stateKey });
 * server.registerTool('create_issue', { inputSchema }, (args, ctx) =>
 *   broker.withToken(ctx, { provider: 'github', scopes: ['public_repo'], purpose: 'create the issue', tool: 'create_issue', args },
 *     async (token, info) => { … }));
 * ```
 *
 * The helper depends on nothing of the broker's server side: only the SDK, Web Crypto and jose
 * (for `private_key_jwt` assertions).
 */
import {
  inputRequired,
  inputResponse,
  ProtocolError,
  ProtocolErrorCode,
  UrlElicitationRequiredError,
  type CallToolResult,
  type InputRequiredResult,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { JWK } from 'jose';
import { callerOf, isModernEra, supportsUrlElicitation, type Caller } from './context.js';
import { exchange, MAX_WAIT_SECONDS, type ClientAuth, type ExchangeOutcome, type ExchangeTransport } from './exchange.js';
import { DENIAL_META_KEY, messages, providerDisplayName, shown } from './messages.js';
import { argsDigest, open, seal, stateCipherKey, StateError, type SealedPayload, type StateRefusal } from './state.js';

export { StateError, type StateRefusal } from './state.js';

/** The key of the helper's one input request, the same on every round. */
export const CONNECT_INPUT_KEY = 'connect_account';

export interface BrokerOptions {
  /** The broker's public URL (its `PUBLIC_URL`), e.g. `https://broker.example.com`. */
  url: string | URL;
  /** This service's id, as declared under `services:` in the broker's configuration. */
  clientId: string;
  /** For `auth: client_secret_basic`: the secret the broker knows as `SERVICE_<ID>_SECRET`. */
  clientSecret?: string;
  /** For `auth: private_key_jwt` (RFC 7523): a private key whose public half is in the service's `jwksUri`. */
  privateKey?: CryptoKey | JWK;
  /** The `kid` of `privateKey` in that JWKS. */
  keyId?: string;
  /** The assertion's signing algorithm (default: the JWK's `alg`, else `ES256`). */
  algorithm?: string;
  /**
   * At least 32 bytes, the same on every instance of the service: seals the requestState the
   * client carries between rounds (AES-256-GCM), so it can be neither read nor altered.
   */
  stateKey: string | Uint8Array;
  /** How long an open connect request may be answered, in seconds (default 900). */
  stateTtlSeconds?: number;
  /** How long a repeat waits for the user's flow to settle at the broker, in seconds (default 20, at most 50). */
  waitSeconds?: number;
  /** Timeout of one call to the broker, in milliseconds, on top of `waitSeconds` (default 10 000). */
  timeoutMs?: number;
  /** The token endpoint, if not `<url>/oauth/token`. */
  tokenEndpoint?: string | URL;
  /** A fetch implementation (default: the global one). */
  fetch?: typeof globalThis.fetch;
  /** Diagnostics for the service's logs (why a state was refused, which broker error came back); never a secret. */
  onError?: (error: Error) => void;
}

export interface TokenRequest {
  /** The broker's provider id, e.g. `github`. */
  provider: string;
  /** The provider scopes this call needs. */
  scopes?: readonly string[];
  /** Completes "so I can …" in what the user is asked: `create the issue`. */
  purpose: string;
  /** The tool's name: the requestState is valid for this tool only. */
  tool: string;
  /** The tool's arguments: the requestState is valid for exactly these only. */
  args?: unknown;
  /** How the provider is called in messages (default: GitHub for `github`, else the id). */
  providerName?: string;
}

/** What the callback learns besides the token. */
export interface TokenInfo {
  provider: string;
  /** The scopes the connection holds. */
  scope: string[];
  /** Seconds the token stays valid, when the provider says. */
  expiresIn?: number;
  /** The provider account's login, when the broker names it. */
  login?: string;
}

export type ToolAnswer = CallToolResult | InputRequiredResult;

export interface Broker {
  /**
   * Runs `run` with the caller's provider token, or answers what the assistant must do first
   * (open the connect link; link the account at /connections; nothing was done). The token is
   * never part of any answer: a result of `run` that contains it is withheld.
   */
  withToken(
    ctx: ServerContext,
    request: TokenRequest,
    run: (token: string, info: TokenInfo) => Promise<CallToolResult>,
  ): Promise<ToolAnswer>;
  /**
   * Optional: pass as `ServerOptions.requestState` (`new McpServer(info, { requestState: broker.requestState })`)
   * so that a tampered, foreign or expired state is refused by the SDK with JSON-RPC -32602 before
   * any tool runs. Only for servers whose tools carry no requestState of their own.
   */
  readonly requestState: { verify(state: string, ctx: ServerContext): Promise<unknown> };
  /** `<url>/connections`, where users link accounts by hand. */
  readonly connectionsUrl: string;
}

/** A state the helper's own verify hook already opened; only this module can make one. */
class OpenedState {
  constructor(readonly payload: SealedPayload) {}
}

export function connectBroker(options: BrokerOptions): Broker {
  const base = new URL(options.url);
  if (base.protocol !== 'https:' && !(base.protocol === 'http:' && isLoopback(base.hostname)))
    throw new TypeError('The broker url must be https:// (http:// only on a loopback host)');
  const brokerRoot = new URL(base.pathname.endsWith('/') ? base.href : `${base.href}/`);
  const tokenEndpoint = new URL(options.tokenEndpoint ?? new URL('oauth/token', brokerRoot));
  // The client secret and the user's token go here: never to another origin than the broker's.
  if (tokenEndpoint.origin !== base.origin) throw new TypeError("The tokenEndpoint must be on the broker url's origin");
  const connectionsUrl = new URL('connections', brokerRoot).href;
  const waitSeconds = Math.min(MAX_WAIT_SECONDS, Math.max(0, options.waitSeconds ?? 20));
  const ttlSeconds = options.stateTtlSeconds ?? 900;
  const onError = options.onError ?? (() => undefined);
  const keyBytes =
    typeof options.stateKey === 'string' ? new TextEncoder().encode(options.stateKey).byteLength : options.stateKey.byteLength;
  if (keyBytes < 32) throw new RangeError('stateKey must be at least 32 bytes (the same on every instance of the service)');
  const keyPromise = stateCipherKey(options.stateKey);
  keyPromise.catch(() => undefined); // reported on first use

  let auth: ClientAuth;
  if (options.privateKey) {
    const jwkAlg = 'kty' in options.privateKey && typeof options.privateKey.alg === 'string' ? options.privateKey.alg : undefined;
    auth = {
      method: 'private_key_jwt',
      clientId: options.clientId,
      privateKey: options.privateKey,
      ...(options.keyId ? { keyId: options.keyId } : {}),
      algorithm: options.algorithm ?? jwkAlg ?? 'ES256',
    };
  } else if (options.clientSecret) {
    auth = { method: 'client_secret_basic', clientId: options.clientId, clientSecret: options.clientSecret };
  } else throw new TypeError('connectBroker needs clientSecret (client_secret_basic) or privateKey (private_key_jwt)');

  const transport: ExchangeTransport = {
    tokenEndpoint,
    auth,
    fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
    timeoutMs: options.timeoutMs ?? 10_000,
  };

  const refuseState = (reason: StateRefusal): never => {
    onError(new StateError(reason));
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, messages.invalidState, { reason: 'invalid_request_state' });
  };

  async function openState(raw: unknown, caller: Caller, request: TokenRequest): Promise<SealedPayload> {
    const expect = { tool: request.tool, args: await argsDigest(request.args) };
    let payload: SealedPayload;
    if (raw instanceof OpenedState) {
      if (raw.payload.tool !== expect.tool) return refuseState('tool');
      if (raw.payload.args !== expect.args) return refuseState('args');
      payload = raw.payload;
    } else {
      if (typeof raw !== 'string') return refuseState('malformed');
      try {
        payload = await open(await keyPromise, caller.principal, raw, expect);
      } catch (err) {
        if (err instanceof StateError) return refuseState(err.reason);
        throw err;
      }
    }
    // Both ways in: a state made for another provider's connection does not belong to this call.
    if (payload.provider !== request.provider) return refuseState('tool');
    return payload;
  }

  async function withToken(
    ctx: ServerContext,
    request: TokenRequest,
    run: (token: string, info: TokenInfo) => Promise<CallToolResult>,
  ): Promise<ToolAnswer> {
    const name = request.providerName ?? providerDisplayName(request.provider);
    const scopes = [...(request.scopes ?? [])];
    const caller = callerOf(ctx);
    if (!caller) return toolError(messages.notSignedIn);

    const raw = ctx.mcpReq.requestState<unknown>();
    let pending: SealedPayload | undefined;
    if (raw !== undefined) {
      pending = await openState(raw, caller, request);
      const answer = inputResponse(ctx.mcpReq.inputResponses, CONNECT_INPUT_KEY);
      if (answer.kind === 'elicit' && answer.action !== 'accept')
        return pending.awaiting.kind === 'connect'
          ? nothingDone(messages.declined(name), { status: 'not_connected', reason: answer.action })
          : nothingDone(messages.approvalDeclined(request.purpose), { status: 'approval_required', reason: answer.action });
    }

    const outcome: ExchangeOutcome = await exchange(
      transport,
      {
        subjectToken: caller.token,
        provider: request.provider,
        scopes,
        // A state awaiting an approval carries no id: the broker knows the call by its subject.
        ...(pending
          ? {
              ...(pending.awaiting.kind === 'connect' ? { connectRequest: pending.awaiting.connectRequest } : { holdForApproval: true }),
              waitSeconds,
            }
          : {}),
      },
      ctx.mcpReq.signal,
    );

    switch (outcome.kind) {
      case 'token': {
        const info: TokenInfo = {
          provider: request.provider,
          scope: outcome.scope,
          ...(outcome.expiresIn !== undefined ? { expiresIn: outcome.expiresIn } : {}),
          ...(outcome.login ? { login: outcome.login } : {}),
        };
        return runWithoutLeaking(outcome.accessToken, info, run, name, onError);
      }
      case 'access_denied':
        // The operator's policy (or an approver) refused: its own words, as the broker gave them.
        if (outcome.reason === 'denied' && outcome.description)
          return nothingDone(messages.refusedByPolicy(shown(outcome.description)), { status: 'refused', reason: 'policy' });
        return nothingDone(messages.denied(name, outcome.reason), { status: 'not_connected', reason: outcome.reason });
      case 'approval_required': {
        if (new URL(outcome.approvalUri).origin !== base.origin) {
          onError(new Error('the broker answered with an approval link on another origin; refused'));
          return toolError(messages.brokerError(name, 'invalid_response', 'the approval link is not on the broker', scopes, base.origin));
        }
        const message = messages.approvalPending(request.purpose);
        if (!isModernEra(ctx))
          throw new UrlElicitationRequiredError(
            [{ mode: 'url', message, url: outcome.approvalUri, elicitationId: globalThis.crypto.randomUUID() }],
            message,
          );
        if (!supportsUrlElicitation(ctx))
          return {
            ...nothingDone(messages.approvalLinkInResult(request.purpose, outcome.approvalUri), {
              status: 'approval_required',
              reason: 'approval_required',
              provider: request.provider,
              approval_url: outcome.approvalUri,
            }),
            _meta: { [DENIAL_META_KEY]: { reason: 'approval_required', remediationHints: [{ type: 'url', url: outcome.approvalUri }] } },
          };
        const state = await seal(await keyPromise, caller.principal, {
          tool: request.tool,
          args: await argsDigest(request.args),
          provider: request.provider,
          scopes,
          awaiting: { kind: 'approval' },
          exp: Math.floor(Date.now() / 1000) + ttlSeconds,
        });
        return inputRequired({
          inputRequests: { [CONNECT_INPUT_KEY]: inputRequired.elicitUrl({ message, url: outcome.approvalUri }) },
          requestState: state,
        });
      }
      case 'error': {
        onError(new Error(`token exchange failed: ${outcome.error} (HTTP ${outcome.status})`));
        return toolError(
          messages.brokerError(name, outcome.error, shown(outcome.description), scopes, base.origin, outcome.retryAfterSeconds),
        );
      }
      case 'interaction_required': {
        if (new URL(outcome.connectUri).origin !== base.origin) {
          onError(new Error('the broker answered with a connect link on another origin; refused'));
          return toolError(messages.brokerError(name, 'invalid_response', 'the connect link is not on the broker', scopes, base.origin));
        }
        const message =
          outcome.reason === 'reauth_required'
            ? messages.reconnect(name, request.purpose)
            : outcome.reason === 'insufficient_scope'
              ? messages.moreAccess(name, request.purpose, outcome.missingScopes)
              : messages.connect(name, request.purpose);
        if (!isModernEra(ctx))
          throw new UrlElicitationRequiredError(
            [{ mode: 'url', message, url: outcome.connectUri, elicitationId: globalThis.crypto.randomUUID() }],
            message,
          );
        // No URL elicitation to carry it: the broker's link goes in the result (bound to the user,
        // single-use, short-lived, so the model may see it); a plain repeat exchanges again and the
        // broker answers the same open link until the user finishes.
        if (!supportsUrlElicitation(ctx)) {
          const result = nothingDone(
            messages.linkInResult(name, outcome.reason, outcome.missingScopes, outcome.connectUri, request.purpose),
            {
              status: 'not_connected',
              reason: outcome.reason,
              provider: request.provider,
              connect_url: outcome.connectUri,
              missing_scopes: outcome.reason === 'insufficient_scope' ? outcome.missingScopes : [],
            },
          );
          return {
            ...result,
            _meta: {
              [DENIAL_META_KEY]: { reason: outcome.reason, remediationHints: [{ type: 'url', url: outcome.connectUri }] },
            },
          };
        }
        const state = await seal(await keyPromise, caller.principal, {
          tool: request.tool,
          args: await argsDigest(request.args),
          provider: request.provider,
          scopes,
          awaiting: { kind: 'connect', connectRequest: outcome.connectRequest },
          exp: Math.floor(Date.now() / 1000) + ttlSeconds,
        });
        return inputRequired({
          inputRequests: { [CONNECT_INPUT_KEY]: inputRequired.elicitUrl({ message, url: outcome.connectUri }) },
          requestState: state,
        });
      }
    }
  }

  const requestState = {
    async verify(state: string, ctx: ServerContext): Promise<unknown> {
      const caller = callerOf(ctx);
      if (!caller) throw new StateError('sealed');
      // Tool and arguments are not visible here; withToken compares them.
      return new OpenedState(await open(await keyPromise, caller.principal, state, undefined));
    },
  };

  return { withToken, requestState, connectionsUrl };
}

async function runWithoutLeaking(
  token: string,
  info: TokenInfo,
  run: (token: string, info: TokenInfo) => Promise<CallToolResult>,
  name: string,
  onError: (e: Error) => void,
): Promise<CallToolResult> {
  let result: CallToolResult;
  try {
    result = await run(token, info);
  } catch (err) {
    // The SDK shows a thrown error's message to the assistant: never with the token in it.
    const message = err instanceof Error ? err.message : String(err);
    if (message.includes(token)) {
      onError(new Error('the tool threw an error containing the provider token; withheld'));
      return toolError(messages.tokenInResult(name));
    }
    throw err;
  }
  if (JSON.stringify(result).includes(token)) {
    onError(new Error('the tool returned the provider token; withheld'));
    return toolError(messages.tokenInResult(name));
  }
  return result;
}

function nothingDone(text: string, structured: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text }], structuredContent: structured };
}

function toolError(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

function isLoopback(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
}
