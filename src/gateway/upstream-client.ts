/**
 * The broker as a client of one upstream MCP server (Streamable HTTP), in either protocol era.
 *
 * Why not the SDK's `Client`: it validates every result against the content-block types it knows
 * (an upstream's newer block, or an extra field on a known one, would be refused or dropped, and
 * results must pass through unchanged), it probes `server/discover` or runs `initialize` on every
 * connect (we want one probe per process and upstream), and its transport hides the HTTP status
 * and `WWW-Authenticate` of a 401/403, which decide what the broker does next. What is needed
 * here is small: one POST per call, a JSON or SSE answer read within a byte bound, and for a
 * 2025-11-25 upstream its `initialize` and `Mcp-Session-Id`.
 *
 * Nothing of the broker's client is sent: headers are built here from scratch (the user's
 * provider token as Bearer, or none), so neither the broker's MCP access token nor any other
 * header of the caller can reach an upstream. Connections are pooled per upstream and kept alive
 * (src/gateway/upstream-http.ts); each answer is read once, as one buffer or as its event stream.
 */
import type { IncomingMessage } from 'node:http';
import type { ConfiguredUpstream } from '../config/upstreams.js';
import type { Logger } from '../log.js';
import { Lru } from '../lru.js';
import { MAX_UPSTREAM_JSON_DEPTH, tooDeep } from './bounds.js';
import { discard, headerOf, readAnswerBody, RedirectRefused, UpstreamHttp } from './upstream-http.js';

export const MODERN_VERSION = '2026-07-28';
export const LEGACY_VERSION = '2025-11-25';
const META_PREFIX = 'io.modelcontextprotocol/';

export type FailureReason =
  | 'timeout'
  | 'unavailable'
  | 'http_error'
  | 'malformed'
  | 'too_large'
  /** JSON nested deeper than the broker's bound (src/gateway/bounds.ts). */
  | 'too_deep'
  /** A tools/list over one of the broker's bounds (src/gateway/bounds.ts). */
  | 'over_bounds'
  | 'elicitation_unsupported';

/** What one request to an upstream came to. `detail` is for logs only (never shown, never a secret). */
export type UpstreamOutcome =
  | { kind: 'result'; result: Record<string, unknown> }
  | { kind: 'input_required'; inputRequests: Record<string, unknown>; requestState: string | undefined; result: Record<string, unknown> }
  | { kind: 'unauthorized'; wwwAuthenticate: string | undefined }
  | { kind: 'forbidden'; wwwAuthenticate: string | undefined }
  /** The upstream answered with a JSON-RPC error (an unknown tool, invalid params…). */
  | { kind: 'rpc_error'; code: number; message: string; data?: unknown }
  | { kind: 'failed'; reason: FailureReason; detail: string };

export interface UpstreamCaller {
  /** Whose call this is, as a cache key for the 2025-11-25 session (principal); never sent. */
  key: string;
  /** The access token to send as Bearer; undefined for `auth: none`. */
  token: string | undefined;
  /** Capabilities to declare on a 2026-07-28 request (the caller's, so an upstream may ask it for input). */
  capabilities?: Record<string, unknown>;
  signal?: AbortSignal | undefined;
  /**
   * When (epoch ms) the whole operation this request is part of must be done — a forwarded call's
   * list check, call and retry, or a listing's pages — if sooner than the upstream's own timeout.
   */
  deadline?: number;
}

export interface UpstreamClientOptions {
  /** The most bytes an answer (a JSON body, or a whole SSE stream) may have. */
  maxResultBytes: number;
  /** 2025-11-25 sessions kept, one per principal (default 1,000). */
  maxSessions?: number;
  clientInfo: { name: string; version: string };
  log: Logger;
}

type Message = { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown; result?: unknown; error?: unknown };
type Session = { id: string | null; version: string };

/** Ends a call with `outcome` from anywhere in its steps. */
class Stop extends Error {
  constructor(readonly outcome: UpstreamOutcome) {
    super(outcome.kind);
  }
}

const failed = (reason: FailureReason, detail: string) => new Stop({ kind: 'failed', reason, detail });

export class UpstreamClient {
  /** Learnt once per process: a `server/discover` that names 2026-07-28, else the 2025-11-25 handshake. */
  #era: 'modern' | 'legacy' | undefined;
  readonly #sessions: Lru<string, Promise<Session>>;
  readonly #http: UpstreamHttp;
  #nextId = 1;

  constructor(
    readonly upstream: ConfiguredUpstream,
    private readonly options: UpstreamClientOptions,
  ) {
    this.#sessions = new Lru(options.maxSessions ?? 1_000);
    this.#http = new UpstreamHttp(upstream.url, upstream.id);
  }

  /** The era learnt so far (for tests and logs). */
  get era(): 'modern' | 'legacy' | undefined {
    return this.#era;
  }

  /** Sends `method` with `params` (whose `_meta` must already be free of `io.modelcontextprotocol/` keys). */
  async request(method: 'tools/call' | 'tools/list', params: Record<string, unknown>, caller: UpstreamCaller): Promise<UpstreamOutcome> {
    // One controller for the deadline and the caller's abort (AbortSignal.timeout + AbortSignal.any
    // cost ~15 µs per call in Node 20, this ~1 µs).
    const budget = Math.min(this.upstream.timeoutMs, (caller.deadline ?? Infinity) - Date.now());
    if (budget <= 0) return this.#timeoutOutcome();
    const controller = new AbortController();
    const signal = controller.signal;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new DOMException(`no answer within ${this.upstream.timeoutMs} ms`, 'TimeoutError'));
    }, budget);
    timer.unref();
    const callerSignal = caller.signal;
    const onCallerAbort = () => controller.abort(callerSignal?.reason);
    if (callerSignal?.aborted) onCallerAbort();
    else callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
    try {
      const era = this.#era ?? (await this.#discover(caller, signal));
      return era === 'modern' ? await this.#modern(method, params, caller, signal) : await this.#legacy(method, params, caller, signal);
    } catch (err) {
      if (err instanceof Stop) return err.outcome;
      if (timedOut) return this.#timeoutOutcome();
      if (signal.aborted) return { kind: 'failed', reason: 'unavailable', detail: 'the caller went away' };
      return { kind: 'failed', reason: 'unavailable', detail: describe(err) };
    } finally {
      clearTimeout(timer);
      callerSignal?.removeEventListener('abort', onCallerAbort);
    }
  }

  #timeoutOutcome(): UpstreamOutcome {
    return { kind: 'failed', reason: 'timeout', detail: `no answer within ${this.upstream.timeoutMs} ms` };
  }

  /** Forgets every 2025-11-25 session and closes the pooled connections (shutdown, tests). */
  close(): void {
    this.#sessions.clear();
    this.#http.close();
  }

  #headers(caller: UpstreamCaller, extra: Record<string, string>): Record<string, string> {
    return {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(caller.token !== undefined ? { authorization: `Bearer ${caller.token}` } : {}),
      ...extra,
    };
  }

  #envelope(caller: UpstreamCaller): Record<string, unknown> {
    return {
      [`${META_PREFIX}protocolVersion`]: MODERN_VERSION,
      [`${META_PREFIX}clientInfo`]: this.options.clientInfo,
      [`${META_PREFIX}clientCapabilities`]: caller.capabilities ?? {},
    };
  }

  #post(headers: Record<string, string>, body: unknown, signal: AbortSignal): Promise<IncomingMessage> {
    return this.#http.post(headers, JSON.stringify(body), signal);
  }

  async #discover(caller: UpstreamCaller, signal: AbortSignal): Promise<'modern' | 'legacy'> {
    const id = `discover-${this.#nextId++}`;
    const res = await this.#post(
      this.#headers(caller, { 'mcp-protocol-version': MODERN_VERSION, 'mcp-method': 'server/discover' }),
      { jsonrpc: '2.0', id, method: 'server/discover', params: { _meta: this.#envelope(caller) } },
      signal,
    );
    refuseAuthFailures(res);
    // A server error says nothing about the era: learn it on a later call rather than guess.
    if (status(res) >= 500) {
      discard(res);
      throw failed('http_error', `HTTP ${status(res)} to server/discover`);
    }
    let era: 'modern' | 'legacy' = 'legacy';
    if (ok(res)) {
      const message = await this.#readAnswer(res, id, signal, async () => undefined).catch((err: unknown) => {
        if (err instanceof Stop && err.outcome.kind === 'failed' && ['too_large', 'too_deep'].includes(err.outcome.reason)) throw err;
        return undefined;
      });
      const versions = (message?.result as { supportedVersions?: unknown } | undefined)?.supportedVersions;
      if (Array.isArray(versions) && versions.includes(MODERN_VERSION)) era = 'modern';
    } else discard(res);
    this.#era = era;
    this.options.log.info('upstream_era', { upstream: this.upstream.id, era });
    return era;
  }

  async #modern(method: string, params: Record<string, unknown>, caller: UpstreamCaller, signal: AbortSignal): Promise<UpstreamOutcome> {
    const id = this.#nextId++;
    const meta = { ...(params._meta as Record<string, unknown> | undefined), ...this.#envelope(caller) };
    const name: Record<string, string> = method === 'tools/call' && typeof params.name === 'string' ? { 'mcp-name': params.name } : {};
    const res = await this.#post(
      this.#headers(caller, { 'mcp-protocol-version': MODERN_VERSION, 'mcp-method': method, ...name }),
      { jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } },
      signal,
    );
    return classify(await this.#answerOf(res, id, signal, async () => undefined));
  }

  async #legacy(method: string, params: Record<string, unknown>, caller: UpstreamCaller, signal: AbortSignal): Promise<UpstreamOutcome> {
    // 2025-11-25 has no input_required vocabulary: a repeat after a relayed -32042 is the plain call again.
    params = Object.fromEntries(Object.entries(params).filter(([k]) => k !== 'inputResponses' && k !== 'requestState'));
    const key = caller.key;
    for (let attempt = 0; ; attempt++) {
      const session = await this.#session(key, caller, signal);
      const id = this.#nextId++;
      const res = await this.#post(this.#sessionHeaders(caller, session), { jsonrpc: '2.0', id, method, params }, signal);
      // The session expired, or this upstream instance never had it: establish a new one, once.
      if (status(res) === 404 && session.id !== null && attempt === 0) {
        discard(res);
        this.#sessions.delete(key);
        this.options.log.info('upstream_session_renewed', { upstream: this.upstream.id });
        continue;
      }
      let declined = false;
      const message = await this.#answerOf(res, id, signal, async (request) => {
        // Our /mcp is stateless: there is no open stream to the broker's client to relay this on.
        if (request.method === 'elicitation/create') declined = true;
        await this.#reply(caller, session, request, signal);
      });
      if (declined)
        return {
          kind: 'failed',
          reason: 'elicitation_unsupported',
          detail: 'the upstream sent elicitation/create mid-call; it was declined',
        };
      return classify(message);
    }
  }

  #sessionHeaders(caller: UpstreamCaller, session: Session): Record<string, string> {
    return this.#headers(caller, {
      'mcp-protocol-version': session.version,
      ...(session.id !== null ? { 'mcp-session-id': session.id } : {}),
    });
  }

  /** The caller's 2025-11-25 session with this upstream, established once (concurrent calls share the handshake). */
  #session(key: string, caller: UpstreamCaller, signal: AbortSignal): Promise<Session> {
    let session = this.#sessions.get(key);
    if (!session) {
      session = this.#initialize(caller, signal);
      this.#sessions.set(key, session);
      session.catch(() => this.#sessions.delete(key));
    }
    return session;
  }

  async #initialize(caller: UpstreamCaller, signal: AbortSignal): Promise<Session> {
    const id = this.#nextId++;
    const res = await this.#post(
      this.#headers(caller, {}),
      {
        jsonrpc: '2.0',
        id,
        method: 'initialize',
        params: {
          protocolVersion: LEGACY_VERSION,
          // Declared so an upstream that wants input says so (declined, with a clear tool error) rather than failing oddly.
          capabilities: { elicitation: { form: {}, url: {} } },
          clientInfo: this.options.clientInfo,
        },
      },
      signal,
    );
    const message = await this.#answerOf(res, id, signal, async () => undefined);
    const result = message.result as { protocolVersion?: unknown } | undefined;
    if (!result || typeof result.protocolVersion !== 'string') throw failed('malformed', 'initialize answered without a protocolVersion');
    const session: Session = { id: headerOf(res, 'mcp-session-id') ?? null, version: result.protocolVersion };
    const ack = await this.#post(this.#sessionHeaders(caller, session), { jsonrpc: '2.0', method: 'notifications/initialized' }, signal);
    refuseAuthFailures(ack);
    discard(ack);
    return session;
  }

  /** Answers a request the upstream sent us mid-call: decline input, refuse the rest. */
  async #reply(caller: UpstreamCaller, session: Session, request: Message, signal: AbortSignal): Promise<void> {
    const reply =
      request.method === 'elicitation/create'
        ? { result: { action: 'decline' } }
        : request.method === 'ping'
          ? { result: {} }
          : { error: { code: -32601, message: 'Method not found' } };
    discard(await this.#post(this.#sessionHeaders(caller, session), { jsonrpc: '2.0', id: request.id, ...reply }, signal));
  }

  /** The JSON-RPC answer to `id` in `res`, after mapping HTTP failures to outcomes. */
  async #answerOf(
    res: IncomingMessage,
    id: unknown,
    signal: AbortSignal,
    onRequest: (request: Message) => Promise<void>,
  ): Promise<Message> {
    refuseAuthFailures(res);
    if (!ok(res)) {
      const text = await readBoundedText(res, this.options.maxResultBytes).catch(() => '');
      const error = parseMessage(text)?.error as { code?: unknown; message?: unknown } | undefined;
      if (status(res) < 500 && error && typeof error.code === 'number')
        throw new Stop({ kind: 'rpc_error', code: error.code, message: String(error.message ?? '') });
      throw failed('http_error', `HTTP ${status(res)}`);
    }
    return this.#readAnswer(res, id, signal, onRequest);
  }

  async #readAnswer(
    res: IncomingMessage,
    id: unknown,
    signal: AbortSignal,
    onRequest: (request: Message) => Promise<void>,
  ): Promise<Message> {
    const type = headerOf(res, 'content-type') ?? '';
    if (/^application\/json\b/i.test(type)) {
      const message = parseMessage(await readBoundedText(res, this.options.maxResultBytes));
      if (!message || message.id !== id) throw failed('malformed', 'the answer is not a JSON-RPC response to our request');
      return message;
    }
    if (/^text\/event-stream\b/i.test(type)) return this.#readStream(res, id, signal, onRequest);
    discard(res);
    throw failed('malformed', `unexpected content type ${JSON.stringify(type.slice(0, 60))}`);
  }

  /** Reads SSE events until the response to `id`; requests from the upstream go to `onRequest`, notifications are dropped. */
  async #readStream(
    res: IncomingMessage,
    id: unknown,
    signal: AbortSignal,
    onRequest: (request: Message) => Promise<void>,
  ): Promise<Message> {
    const decoder = new TextDecoder();
    let buffered = '';
    let total = 0;
    try {
      for await (const value of res as AsyncIterable<Buffer>) {
        if (signal.aborted) throw signal.reason;
        total += value.byteLength;
        if (total > this.options.maxResultBytes) throw failed('too_large', `the event stream passed ${this.options.maxResultBytes} bytes`);
        buffered += decoder.decode(value, { stream: true });
        for (let end = eventEnd(buffered); end; end = eventEnd(buffered)) {
          const data = buffered
            .slice(0, end.at)
            .split(/\r?\n/)
            .filter((line) => line.startsWith('data:'))
            .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
            .join('\n');
          buffered = buffered.slice(end.at + end.length);
          if (!data) continue;
          const message = parseMessage(data);
          if (!message) throw failed('malformed', 'an event is not JSON');
          if (typeof message.method === 'string' && message.id !== undefined) await onRequest(message);
          else if (message.id === id && (message.result !== undefined || message.error !== undefined)) return message;
        }
      }
      if (!res.complete) throw signal.aborted ? signal.reason : failed('unavailable', 'the event stream was cut off');
      throw failed('malformed', 'the event stream ended without an answer');
    } finally {
      if (!res.complete) res.destroy();
    }
  }
}

const status = (res: IncomingMessage): number => res.statusCode ?? 0;
const ok = (res: IncomingMessage): boolean => status(res) >= 200 && status(res) < 300;

function refuseAuthFailures(res: IncomingMessage): void {
  if (status(res) === 401 || status(res) === 403) {
    discard(res);
    throw new Stop({ kind: status(res) === 401 ? 'unauthorized' : 'forbidden', wwwAuthenticate: headerOf(res, 'www-authenticate') });
  }
}

/** The response message as an outcome: a JSON-RPC error, an input request, or a result. */
function classify(message: Message): UpstreamOutcome {
  if (message.error !== undefined) {
    const error = message.error as { code?: unknown; message?: unknown; data?: unknown };
    if (typeof error.code !== 'number') return { kind: 'failed', reason: 'malformed', detail: 'an error without a numeric code' };
    return {
      kind: 'rpc_error',
      code: error.code,
      message: String(error.message ?? ''),
      ...(error.data !== undefined ? { data: error.data } : {}),
    };
  }
  const result = message.result;
  if (!result || typeof result !== 'object' || Array.isArray(result))
    return { kind: 'failed', reason: 'malformed', detail: 'the result is not an object' };
  const r = result as Record<string, unknown>;
  if (r.resultType === 'input_required') {
    const inputRequests = r.inputRequests && typeof r.inputRequests === 'object' ? (r.inputRequests as Record<string, unknown>) : {};
    return {
      kind: 'input_required',
      inputRequests,
      requestState: typeof r.requestState === 'string' ? r.requestState : undefined,
      result: r,
    };
  }
  return { kind: 'result', result: r };
}

/** The body as text, refusing more than `max` bytes without buffering them. */
async function readBoundedText(res: IncomingMessage, max: number): Promise<string> {
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > max) {
    res.destroy();
    throw failed('too_large', `the answer declares ${declared} bytes, over ${max}`);
  }
  const body = await readAnswerBody(res, max);
  if (!body) throw failed('too_large', `the answer passed ${max} bytes`);
  return body.toString('utf8');
}

/**
 * The JSON-RPC message in `text`, or undefined when it is none. One nested deeper than the bound
 * ends the call: V8 parses far deeper than it can serialise, so such an answer would fail only
 * later, when the broker writes its own answer (or stores a tool list), past every deadline.
 */
function parseMessage(text: string): Message | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (tooDeep(value)) throw failed('too_deep', `the answer nests deeper than ${MAX_UPSTREAM_JSON_DEPTH} levels`);
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Message) : undefined;
}

function eventEnd(buffer: string): { at: number; length: number } | undefined {
  const m = /\r?\n\r?\n/.exec(buffer);
  return m ? { at: m.index, length: m[0].length } : undefined;
}

function describe(err: unknown): string {
  if (err instanceof RedirectRefused) return err.message;
  const code =
    (err as { code?: unknown; cause?: { code?: unknown } } | undefined)?.code ?? (err as { cause?: { code?: unknown } })?.cause?.code;
  return typeof code === 'string' ? code : err instanceof Error ? err.message.slice(0, 200) : 'unknown';
}

/** `_meta` without the protocol's own keys (which belong to each hop, not to the payload). */
export function foreignMeta(meta: unknown): Record<string, unknown> | undefined {
  if (!meta || typeof meta !== 'object' || Array.isArray(meta)) return undefined;
  const kept = Object.entries(meta as Record<string, unknown>).filter(([k]) => !k.startsWith(META_PREFIX));
  return kept.length ? Object.fromEntries(kept) : undefined;
}
