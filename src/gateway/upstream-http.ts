/**
 * The gateway's HTTP to one upstream: POSTs over one keep-alive connection pool per upstream
 * (`node:http` / `node:https` agents), answers read as Node streams.
 *
 * Why not the global `fetch`: on the broker's busiest path (every forwarded `tools/call`) Node 20's
 * `fetch` cost ~250 µs of CPU per call (its WHATWG `Request`/`Headers`/`Response` objects, the body
 * sent as a web stream, the response body read through a web-stream reader) against ~40 µs for the
 * same POST through `node:http`; see bench/README.md, "Gateway throughput, afternoon of 2026-12-01".
 * What fetch gave is kept: connections reused (keep-alive, bounded per upstream), no redirect
 * followed (a 3xx is a failure, as `redirect: 'error'` made it), the call's deadline and the
 * caller's abort, and a CLIENT span carrying `traceparent` when tracing is on.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { injectTraceContext, SpanKind, SpanStatusCode, withSpan } from '../observability/tracing.js';

/** Connections kept per upstream at most (calls beyond wait for a free one). */
export const MAX_SOCKETS_PER_UPSTREAM = 64;
/** How long an idle pooled connection is kept when the upstream announces no `Keep-Alive: timeout`. */
const IDLE_SOCKET_MS = 15_000;

/** An upstream answered with a redirect: never followed (the upstream's address comes only from the configuration). */
export class RedirectRefused extends Error {
  constructor(readonly status: number) {
    super(`HTTP ${status} redirect refused`);
  }
}

export class UpstreamHttp {
  readonly #agent: HttpAgent;
  readonly #send: typeof httpRequest;
  readonly #target: RequestOptions;
  readonly #spanName: string;
  readonly #spanAttributes: Record<string, string | number>;

  constructor(
    readonly url: URL,
    upstreamId: string,
  ) {
    const tls = url.protocol === 'https:';
    const options = {
      keepAlive: true,
      maxSockets: MAX_SOCKETS_PER_UPSTREAM,
      maxFreeSockets: MAX_SOCKETS_PER_UPSTREAM,
      timeout: IDLE_SOCKET_MS,
    };
    this.#agent = tls ? new HttpsAgent(options) : new HttpAgent(options);
    this.#send = tls ? httpsRequest : httpRequest;
    this.#target = {
      protocol: url.protocol,
      hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: url.port || (tls ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      agent: this.#agent,
    };
    this.#spanName = `upstream ${upstreamId}`;
    // The method, host and port; never the path or query (as for every traced HTTP call).
    this.#spanAttributes = {
      'broker.upstream': upstreamId,
      'http.request.method': 'POST',
      'server.address': url.hostname,
      'server.port': Number(url.port) || (tls ? 443 : 80),
    };
  }

  /** POSTs `body` with `headers` (a content-length is added); resolves with the answer's head, its body unread. */
  post(headers: Record<string, string>, body: string, signal: AbortSignal): Promise<IncomingMessage> {
    return withSpan(
      this.#spanName,
      this.#spanAttributes,
      async (span) => {
        injectTraceContext(headers);
        const res = await this.#request(headers, body, signal);
        span?.setAttribute('http.response.status_code', res.statusCode ?? 0);
        if ((res.statusCode ?? 0) >= 500) span?.setStatus({ code: SpanStatusCode.ERROR });
        return res;
      },
      { kind: SpanKind.CLIENT },
    );
  }

  /** Closes the pooled connections (shutdown, tests). */
  close(): void {
    this.#agent.destroy();
  }

  #request(headers: Record<string, string>, body: string, signal: AbortSignal): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = this.#send({ ...this.#target, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, signal });
      req.once('error', reject);
      req.once('response', (res: IncomingMessage) => {
        const status = res.statusCode ?? 0;
        if (status >= 300 && status < 400) {
          discard(res);
          reject(new RedirectRefused(status));
        } else resolve(res);
      });
      req.end(body);
    });
  }
}

/** The answer's header `name` (lower case), as one string. */
export function headerOf(res: IncomingMessage, name: string): string | undefined {
  const value = res.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** How long a small unwanted body may take to drain before its connection is cut instead. */
const DRAIN_MS = 1000;

/**
 * Lets go of an answer whose body is not wanted: a small declared one is drained so its
 * connection goes back to the pool, anything else is cut (its connection closed). A drain that
 * stalls is cut too: nothing else would ever free that pooled connection (the agent's idle timeout
 * only closes free ones), and the pool is every user's.
 */
export function discard(res: IncomingMessage): void {
  if (res.complete) return;
  const declared = Number(res.headers['content-length']);
  if (!(Number.isFinite(declared) && declared <= 64 * 1024)) return void res.destroy();
  res.resume();
  const stalled = setTimeout(() => {
    if (!res.complete) res.destroy();
  }, DRAIN_MS).unref();
  res.once('close', () => clearTimeout(stalled));
}

/** The whole body, or undefined (the connection cut) as soon as it passes `max` bytes. */
export function readAnswerBody(res: IncomingMessage, max: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (value: Buffer | undefined, err?: unknown) => {
      res.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      if (err !== undefined) reject(err);
      else resolve(value);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > max) {
        res.destroy();
        done(undefined);
      } else chunks.push(chunk);
    };
    const onEnd = () => done(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    const onError = (err: unknown) => done(undefined, err);
    const onClose = () => {
      if (!res.complete) done(undefined, new Error('the answer was cut off'));
    };
    res.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}
