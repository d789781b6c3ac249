import type { IncomingMessage, ServerResponse } from 'node:http';
import { finished } from 'node:stream';
import type { Request, Response } from 'express';

/**
 * Express 5 <-> web-standard Request/Response, for the SDK's `handler.fetch`. The body is read by
 * us (bounded) so that size limits and parse errors are answered as JSON-RPC, not by Express.
 */

/** The body is over the limit (declared or streamed). */
export class BodyTooLarge extends Error {}

/** JSON nested deeper than this is refused before anything walks it: recursive walkers (our
 * argument digest, JSON.stringify, schema validation) overflow the stack at a few thousand levels. */
export const MAX_JSON_DEPTH = 64;

/** Whether arrays/objects in `value` nest deeper than `max`, found without recursion. */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const todo: Array<[unknown, number]> = [[value, 1]];
  for (let item = todo.pop(); item; item = todo.pop()) {
    const [v, depth] = item;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) todo.push([child, depth + 1]);
  }
  return false;
}

/**
 * Reads the whole body, refusing more than `limit` bytes without buffering them. A refusal leaves
 * the request open, the rest of its body unread: answer it with {@link answerThenDiscard}.
 */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new BodyTooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** How much of a refused body is still read after the answer, and for how long, before the connection is cut. */
export interface DiscardLimits {
  bytes: number;
  ms: number;
}

/** Enough for an ordinary client that sends its whole body before it reads (a few times the 1 MiB limit), and no more. */
export const DISCARD_LIMITS: DiscardLimits = { bytes: 16 * 1024 * 1024, ms: 10_000 };

/**
 * Answers a request whose body is refused (`status`, `body` as JSON, `Connection: close`) at once,
 * then reads and drops what the client still sends, up to `limits`, before closing. Closing with
 * unread bytes makes the kernel reset the connection, and a client still writing (undici's fetch,
 * for one) then reports a socket error instead of the answer; reading them lets it see the answer.
 * Past `limits.bytes` more bytes or `limits.ms`, the connection is cut: nobody makes us read forever.
 */
export function answerThenDiscard(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  body: unknown,
  limits: DiscardLimits = DISCARD_LIMITS,
): void {
  const payload = Buffer.from(JSON.stringify(body), 'utf8');
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': payload.length, Connection: 'close' });
  // The whole answer now, the end (which closes the connection) once the body is read.
  res.write(payload);
  let discarded = 0;
  const cut = (): void => {
    clearTimeout(timer);
    req.removeListener('data', count);
    res.destroy();
  };
  const count = (chunk: Buffer): void => {
    discarded += chunk.length;
    if (discarded > limits.bytes) cut();
  };
  const timer = setTimeout(cut, limits.ms);
  req.on('data', count);
  finished(req, (err) => {
    clearTimeout(timer);
    if (err) res.destroy();
    else res.end();
  });
  req.resume();
}

/**
 * A signal that aborts when the client goes away before its answer is written. Not on every
 * close: an abort builds a DOMException with its stack, 1.5 % of an exchange's CPU when it ran
 * after each answer.
 */
export function clientLeft(res: Response): AbortSignal {
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  return abort.signal;
}

/** A web Request for the SDK; closing the response aborts it (the SDK treats that as cancellation). */
export function toWebRequest(req: Request, res: Response, publicUrl: string, body: string | undefined): globalThis.Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name === 'content-length') continue;
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, value);
  }
  return new Request(new URL(req.originalUrl, publicUrl), {
    method: req.method,
    headers,
    signal: clientLeft(res),
    ...(body !== undefined ? { body } : {}),
  });
}

/**
 * Sends a web Response back through Express or a bare node:http server (test upstreams use it too).
 * A JSON answer goes whole, with its length, in one write of headers and body: streamed, it took
 * three (the headers, the chunk, the chunked ending), each waking the client. An event stream is
 * passed on as it comes.
 */
export async function sendWebResponse(res: ServerResponse, response: globalThis.Response): Promise<void> {
  res.statusCode = response.status;
  response.headers.forEach((value, name) => res.setHeader(name, value));
  if (!response.body) return void res.end();
  if (response.headers.get('content-type')?.startsWith('application/json')) {
    // A client gone while its call was held: nobody is left to answer.
    const answer = await response.arrayBuffer().catch((err: unknown) => {
      if (res.destroyed) return undefined;
      throw err;
    });
    if (!answer) return;
    const body = Buffer.from(answer);
    res.setHeader('Content-Length', body.length);
    return void res.end(body);
  }
  res.setHeader('X-Accel-Buffering', 'no');
  res.flushHeaders();
  const reader = response.body.getReader();
  res.on('close', () => void reader.cancel().catch(() => {}));
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      res.write(value);
    }
  } finally {
    res.end();
  }
}
