// Network tools for the reliability tests: a raw HTTP/1.1 client over a socket (for requests that
// fetch() refuses to send: duplicate header lines, non-ASCII header bytes, odd methods and
// bodies), and a small reverse proxy that delays chosen requests (to widen the window in which a
// callback is in flight).
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface RawResponse {
  status: number;
  /** Header names lower-cased; a header sent several times keeps every value. */
  headers: Map<string, string[]>;
  body: string;
}

/** Decodes a `Transfer-Encoding: chunked` body. */
function dechunk(raw: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = raw.indexOf('\r\n', at);
    if (eol < 0) break;
    const size = parseInt(raw.subarray(at, eol).toString('latin1').split(';')[0]!, 16);
    if (!Number.isFinite(size) || size === 0) break;
    parts.push(raw.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

/**
 * Sends `head` (request line + header lines, without the final blank line; `Connection: close` and
 * `Content-Length` are added) and `body` verbatim to 127.0.0.1:`port`, and reads the whole answer.
 */
export function rawHttp(port: number, head: string | Buffer, body: Buffer | string = '', timeoutMs = 10_000): Promise<RawResponse> {
  const bodyBuf = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const headBuf = typeof head === 'string' ? Buffer.from(head, 'utf8') : head;
  const trailer = Buffer.from(`\r\nContent-Length: ${bodyBuf.length}\r\nConnection: close\r\n\r\n`, 'latin1');
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete answer within ${timeoutMs} ms to ${headBuf.toString('latin1').split('\r\n')[0]}`));
    }, timeoutMs);
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', (err) => {
      // The server may answer (e.g. 413) and close before reading the whole body: keep what came.
      if (chunks.length === 0) {
        clearTimeout(timer);
        reject(err);
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      const raw = Buffer.concat(chunks);
      const split = raw.indexOf('\r\n\r\n');
      if (split < 0) return reject(new Error(`no HTTP answer (got ${raw.length} bytes)`));
      const lines = raw.subarray(0, split).toString('latin1').split('\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!)?.[1]);
      const headers = new Map<string, string[]>();
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim().toLowerCase();
        headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()]);
      }
      let rest: Buffer = raw.subarray(split + 4);
      if (headers.get('transfer-encoding')?.some((v) => /chunked/i.test(v))) rest = dechunk(rest);
      resolve({ status, headers, body: rest.toString('utf8') });
    });
    socket.write(Buffer.concat([headBuf, trailer, bodyBuf]));
  });
}

export interface DelayProxy {
  url: string;
  /** Requests forwarded so far, as `METHOD /path`. */
  seen: string[];
  close(): Promise<void>;
}

/**
 * A reverse proxy to `target` (an http origin) that waits `delayMs(method, path)` ms before
 * forwarding each request. Bodies and headers pass through unchanged, except `Host`.
 */
export async function startDelayProxy(target: string, delayMs: (method: string, path: string) => number): Promise<DelayProxy> {
  const upstream = new URL(target);
  const seen: string[] = [];
  const server: Server = createServer((req, res) => {
    const path = req.url ?? '/';
    seen.push(`${req.method} ${path.split('?')[0]}`);
    const headers: IncomingHttpHeaders = { ...req.headers, host: upstream.host };
    setTimeout(
      () => {
        const out = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path, headers }, (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        });
        out.on('error', () => {
          if (!res.headersSent) res.writeHead(502).end();
          else res.destroy();
        });
        req.pipe(out);
      },
      Math.max(0, delayMs(req.method ?? 'GET', path)),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
