import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction, Socket } from 'node:net';
import type { EgressRefusal, EgressRule, EgressTarget } from './egress-rule.js';

/** Thrown when the egress rule refuses a destination: nothing was sent there. */
export class EgressRefused extends Error {
  override name = 'EgressRefused';
  constructor(readonly reason: EgressRefusal) {
    super(`refused by the egress rule: ${reason}`);
  }
}

/** Thrown when an answer is over the bound its fetch was made with. */
export class ResponseTooLarge extends Error {
  override name = 'ResponseTooLarge';
}

/** The EgressRefused in `err` or the causes it wraps (openid-client wraps what its fetch throws). */
export function egressRefusalIn(err: unknown): EgressRefused | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) if (e instanceof EgressRefused) return e;
  return undefined;
}

export interface EgressRequestInit {
  method?: string;
  headers?: HeadersInit;
  body?: string | URLSearchParams | Uint8Array | ArrayBuffer | null;
  signal?: AbortSignal | null;
  /** Accepted for fetch's shape; redirects are never followed whatever it says. */
  redirect?: RequestRedirect;
}

export type EgressFetch = (input: string | URL, init?: EgressRequestInit) => Promise<Response>;

export interface EgressFetchOptions {
  /** The most bytes an answer may have: past it the request is cut and {@link ResponseTooLarge} thrown. */
  maxBytes: number;
  /** The whole request, answer read included; a caller's own signal may end it sooner. */
  timeoutMs: number;
}

/** A DNS lookup that refuses a name when any address it resolves to is refused (no mixing a public address with an inner one). */
function checkingLookup(rule: EgressRule, target: EgressTarget): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      const refused = addresses.map((a) => rule.refuseConnection(target, a.address)).find(Boolean);
      if (refused || addresses.length === 0) return callback(new EgressRefused(refused ?? 'not-an-address'), '', 0);
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

function bodyOf(init: EgressRequestInit, headers: Headers): Buffer | undefined {
  const body = init.body;
  if (body === undefined || body === null) return undefined;
  if (body instanceof URLSearchParams) {
    if (!headers.has('content-type')) headers.set('content-type', 'application/x-www-form-urlencoded;charset=UTF-8');
    return Buffer.from(body.toString());
  }
  if (typeof body === 'string') return Buffer.from(body);
  return Buffer.from(body instanceof ArrayBuffer ? new Uint8Array(body) : body);
}

function plainHeaders(headers: Headers): Record<string, string> {
  const plain: Record<string, string> = {};
  headers.forEach((value, name) => {
    plain[name] = value;
  });
  return plain;
}

function responseOf(res: IncomingMessage, body: Buffer<ArrayBuffer>): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers))
    for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(name, v);
  const status = res.statusCode ?? 0;
  const noBody = status === 204 || status === 205 || status === 304;
  return new Response(noBody ? null : body, { status, statusText: res.statusMessage ?? '', headers });
}

/**
 * A fetch under `rule`: the URL is checked before anything is sent (scheme; the address when it is
 * an IP literal), every address a name resolves to is checked before connecting, and the socket's
 * own remote address is checked once connected, before a byte of the request is written, so a DNS
 * answer that changes between lookups gains nothing. Redirects are never followed (a 3xx is
 * returned as it is), the answer is read into memory up to `maxBytes`, and the whole exchange
 * ends at `timeoutMs`. Network failures throw like fetch (`TypeError` with the cause).
 */
export function egressFetch(rule: EgressRule, options: EgressFetchOptions): EgressFetch {
  return async (input, init = {}) => {
    const url = new URL(input);
    const refusedUrl = rule.refuseUrl(url);
    if (refusedUrl) throw new EgressRefused(refusedUrl);
    const target: EgressTarget = { protocol: url.protocol, hostname: url.hostname, port: url.port };
    const headers = new Headers(init.headers);
    const body = bodyOf(init, headers);
    const signal = init.signal
      ? AbortSignal.any([init.signal, AbortSignal.timeout(options.timeoutMs)])
      : AbortSignal.timeout(options.timeoutMs);
    signal.throwIfAborted();
    const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise<Response>((resolve, reject) => {
      const fail = (err: unknown) => {
        if (err instanceof EgressRefused || err instanceof ResponseTooLarge) reject(err);
        else if (signal.aborted) reject(signal.reason instanceof Error ? signal.reason : new DOMException('aborted', 'AbortError'));
        else reject(new TypeError('fetch failed', { cause: err }));
      };
      const req = request(url, {
        method: init.method ?? 'GET',
        headers: plainHeaders(headers),
        // A socket of its own: nothing checked once is reused for another host.
        agent: false,
        lookup: checkingLookup(rule, target),
        signal,
      });
      req.on('error', fail);
      req.once('socket', (socket: Socket) => {
        const verify = () => {
          const refused = rule.refuseConnection(target, socket.remoteAddress ?? '');
          if (refused) req.destroy(new EgressRefused(refused));
          else req.end(body);
        };
        if (socket.connecting) socket.once('connect', verify);
        else verify();
      });
      req.once('response', (res) => {
        if (Number(res.headers['content-length']) > options.maxBytes) {
          req.destroy(new ResponseTooLarge(`over ${options.maxBytes} bytes`));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.byteLength;
          if (size > options.maxBytes) req.destroy(new ResponseTooLarge(`over ${options.maxBytes} bytes`));
          else chunks.push(chunk);
        });
        res.once('end', () => {
          try {
            resolve(responseOf(res, Buffer.concat(chunks)));
          } catch (err) {
            fail(err);
          }
        });
        res.once('error', fail);
      });
    });
  };
}
