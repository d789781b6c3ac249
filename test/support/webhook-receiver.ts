// A webhook receiver as an operator would write one, on loopback: it checks the Standard Webhooks
// signature with its own code (node:crypto here, not the broker's src/crypto/), refuses timestamps
// more than five minutes off, and deduplicates on webhook-id. `mode` decides how it answers.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ReceiverMode = 'ok' | 'error' | 'hang' | 'redirect';

export interface ReceivedEvent {
  id: string;
  timestamp: number;
  body: string;
  json: { type: string; timestamp: string; data: Record<string, unknown> };
  headers: IncomingMessage['headers'];
}

export interface WebhookReceiver {
  url: string;
  /** `whsec_…`, for WEBHOOK_<ID>_SECRET. */
  secret: string;
  mode: ReceiverMode;
  /** Where `redirect` mode sends the sender. */
  redirectTo: string;
  /** Verified events, once each (first delivery of each webhook-id). */
  events: ReceivedEvent[];
  /** Every request, verified or not, duplicates included. */
  requests: Array<{ id: string | undefined; verified: boolean; at: number }>;
  /** Deliveries of an id already received (a receiver deduplicates them). */
  duplicates: number;
  /** The most requests for one webhook-id being answered at once. */
  readonly concurrentPeak: number;
  /** The most requests of any ids being answered at once. */
  readonly inflightPeak: number;
  /** How long `ok` mode takes to answer. */
  delayMs: number;
  close(): Promise<void>;
}

const TOLERANCE_SECONDS = 5 * 60;

/** Standard Webhooks verification, written from the specification: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`. */
export function verifySignature(secret: string, headers: IncomingMessage['headers'], body: string, nowSeconds: number): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string') return false;
  if (!/^\d+$/.test(timestamp) || Math.abs(nowSeconds - Number(timestamp)) > TOLERANCE_SECONDS) return false;
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest();
  return signatures.split(' ').some((entry) => {
    const [version, value] = entry.split(',');
    if (version !== 'v1' || !value) return false;
    const given = Buffer.from(value, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

export async function startWebhookReceiver(options: { mode?: ReceiverMode; secret?: string } = {}): Promise<WebhookReceiver> {
  const seen = new Set<string>();
  const active = new Map<string, number>();
  let peak = 0;
  let inflight = 0;
  let inflightPeak = 0;
  const hanging = new Set<ServerResponse>();
  const receiver: WebhookReceiver = {
    url: '',
    secret: options.secret ?? `whsec_${randomBytes(32).toString('base64')}`,
    mode: options.mode ?? 'ok',
    redirectTo: 'http://127.0.0.1:9/',
    events: [],
    requests: [],
    duplicates: 0,
    get concurrentPeak() {
      return peak;
    },
    get inflightPeak() {
      return inflightPeak;
    },
    delayMs: 0,
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const id = typeof req.headers['webhook-id'] === 'string' ? req.headers['webhook-id'] : undefined;
      const verified = verifySignature(receiver.secret, req.headers, body, Math.floor(Date.now() / 1000));
      receiver.requests.push({ id, verified, at: Date.now() });
      if (receiver.mode === 'hang') {
        hanging.add(res);
        return;
      }
      if (receiver.mode === 'error') return void res.writeHead(503).end('down for maintenance');
      if (receiver.mode === 'redirect') return void res.writeHead(307, { location: receiver.redirectTo }).end();
      if (!verified || !id) return void res.writeHead(401).end('bad signature');
      const now = (active.get(id) ?? 0) + 1;
      active.set(id, now);
      peak = Math.max(peak, now);
      inflightPeak = Math.max(inflightPeak, ++inflight);
      setTimeout(() => {
        inflight -= 1;
        active.set(id, active.get(id)! - 1);
        if (seen.has(id)) receiver.duplicates += 1;
        else {
          seen.add(id);
          receiver.events.push({
            id,
            timestamp: Number(req.headers['webhook-timestamp']),
            body,
            json: JSON.parse(body) as ReceivedEvent['json'],
            headers: req.headers,
          });
        }
        res.writeHead(204).end();
      }, receiver.delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return receiver;
}
