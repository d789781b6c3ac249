import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBroker, type Broker, type BrokerOptions } from './broker.js';
import { jsonRpcErrorBody } from './http/json-rpc-error.js';
import type { Config } from './config/env.js';
import type { Logger } from './log.js';
import { deriveKey } from './crypto/index.js';
import { metricsFailureLimit, startMetricsListener, type MetricsListener } from './observability/endpoint.js';

export interface RunningBroker {
  broker: Broker;
  server: Server;
  /** The actual listen URL (useful with PORT=0). */
  url: string;
  /** Where METRICS_PORT serves /metrics (127.0.0.1 only), when it is set. */
  metricsUrl?: string;
  close(): Promise<void>;
}

const FIRST_IDP_CHECK_WAIT_MS = 5_000;

export interface StartOptions extends BrokerOptions {
  /**
   * A server already listening, to serve on instead of binding HOST:PORT (tests bind port 0 first and
   * build PUBLIC_URL from the port they got, so no other process can take it in between).
   */
  listening?: Server;
}

/** Starts the broker on HOST:PORT (or on `options.listening`) and returns once it is listening. */
export async function startBroker(config: Config, log: Logger, options: StartOptions = {}): Promise<RunningBroker> {
  const { listening, ...brokerOptions } = options;
  const broker = await createBroker(config, log, brokerOptions);
  const server = listening ?? broker.app.listen(config.port, config.host);
  if (listening) listening.on('request', broker.app);
  else
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', (err: NodeJS.ErrnoException) => {
        reject(
          err.code === 'EADDRINUSE'
            ? new Error(
                `PORT: ${config.host}:${config.port} is already in use (another broker or npm run dev?); stop that process or set PORT to a free port`,
              )
            : err,
        );
      });
    });
  // Requests Node's HTTP parser refuses (oversized or malformed headers) still get a JSON body.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    const [status, text] = err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'Request Header Fields Too Large'] : [400, 'Bad Request'];
    const body = JSON.stringify(jsonRpcErrorBody(-32600, `${text}: the request could not be parsed`));
    socket.end(
      `HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  // The first IdP check (discovery, JWKS) before we report started: its failure is logged first, and
  // /readyz answers from it. A silent IdP is not waited for beyond FIRST_IDP_CHECK_WAIT_MS.
  let waited: NodeJS.Timeout | undefined;
  await Promise.race([broker.idpHealth.start(), new Promise<void>((resolve) => (waited = setTimeout(resolve, FIRST_IDP_CHECK_WAIT_MS)))]);
  clearTimeout(waited);
  // Held tool calls may wait up to the hold time; keep sockets alive past it.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = Math.max(120_000, config.repeatHoldMs + 30_000);
  const { port, address } = server.address() as AddressInfo;
  let metricsListener: MetricsListener | undefined;
  if (config.metrics.port !== undefined) {
    const failures = metricsFailureLimit(config.rateLimitPerMinute, broker.store, deriveKey(config.brokerSecret, 'rate-limit'));
    metricsListener = await startMetricsListener(config.metrics.port, config.metrics.token, failures).catch(async (err: unknown) => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await broker.close();
      throw new Error(
        `METRICS_PORT: cannot listen on 127.0.0.1:${config.metrics.port} (${err instanceof Error ? err.message : String(err)})`,
      );
    });
  }
  const host = address.includes(':') ? `[${address}]` : address;
  let closing: Promise<void> | undefined;
  return {
    broker,
    server,
    url: `http://${host}:${port}`,
    ...(metricsListener ? { metricsUrl: metricsListener.url } : {}),
    close() {
      closing ??= (async () => {
        // Answer held calls first ("ask again" with the same link), then stop taking requests.
        broker.watcher.close();
        await new Promise<void>((resolve) => {
          // Keep-alive sockets become idle as their last responses finish: close them as they do.
          const sweep = setInterval(() => server.closeIdleConnections(), 100);
          server.close(() => {
            clearInterval(sweep);
            resolve();
          });
          server.closeIdleConnections();
          // Held calls were just answered; callbacks and refreshes in flight get up to one provider
          // timeout to finish (their tokens must be stored), then whatever is left is cut.
          setTimeout(() => server.closeAllConnections(), config.providerTimeoutMs + 2000).unref();
        });
        await metricsListener?.close();
        await broker.close();
      })();
      return closing;
    },
  };
}
