import express, { type RequestHandler } from 'express';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { constantTimeEqual } from '../crypto/index.js';
import { clientAddress, failedAuthenticationLimit, type CounterStore } from '../http/rate-limits.js';
import { METRICS_REFUSAL } from './messages.js';
import { collectProcessMetrics, registry } from './metrics.js';

/**
 * Wrong METRICS_TOKEN bearers per minute and client address (`limitPerMinute`, the page limit
 * RATE_LIMIT_PER_MINUTE; 0 = off), counted on arrival like the other failure limits, in the
 * counters every instance shares: guessing the token is bounded, a scraper with the right one is
 * not. While the database is away the bearer is still compared, uncounted: the scrape that shows
 * the outage (broker_store_errors_total) must not fail with it.
 */
export function metricsFailureLimit(limitPerMinute: number, store: CounterStore, hashKey: Buffer): RequestHandler {
  return failedAuthenticationLimit(
    'metrics-auth-failures',
    limitPerMinute,
    store,
    hashKey,
    (retryAfter) => ({ error: 'rate_limited', error_description: METRICS_REFUSAL.tooManyFailures(retryAfter) }),
    clientAddress,
    { openWhenStoreDown: true },
  );
}

/**
 * `GET /metrics` in the Prometheus text format; with `token`, only for `Authorization: Bearer
 * <token>` (compared in constant time), anything else a 401 with a Bearer challenge.
 */
export function metricsHandler(token: string | undefined): RequestHandler {
  collectProcessMetrics();
  return async (req, res) => {
    if (token !== undefined) {
      const header = req.headers.authorization;
      const presented = typeof header === 'string' && /^Bearer /i.test(header) ? header.slice(7).trim() : undefined;
      if (presented === undefined || !constantTimeEqual(presented, token)) {
        res
          .status(401)
          .set('WWW-Authenticate', 'Bearer realm="metrics"')
          .set('Cache-Control', 'no-store')
          .json({ error: 'unauthorized', error_description: METRICS_REFUSAL.unauthorized });
        return;
      }
    }
    const body = await registry.metrics();
    res.status(200).set('Content-Type', registry.contentType).set('Cache-Control', 'no-store').send(body);
  };
}

export interface MetricsListener {
  url: string;
  close(): Promise<void>;
}

/**
 * `/metrics` on its own port, bound to 127.0.0.1 only (a sidecar or node agent scrapes it there);
 * with a `token`, wrong bearers are held to `failures` ({@link metricsFailureLimit}).
 */
export async function startMetricsListener(port: number, token: string | undefined, failures: RequestHandler): Promise<MetricsListener> {
  const app = express();
  app.disable('x-powered-by');
  app.set('strict routing', true);
  app.set('case sensitive routing', true);
  if (token !== undefined) app.get('/metrics', failures, metricsHandler(token));
  else app.get('/metrics', metricsHandler(token));
  app.use((_req, res) => void res.status(404).json({ error: 'not_found', error_description: 'Only /metrics is served here.' }));
  const server: Server = app.listen(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
