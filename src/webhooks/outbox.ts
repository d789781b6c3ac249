import type { ConfiguredWebhook } from '../config/webhooks.js';
import { randomHandle } from '../crypto/index.js';
import type { BrokerEvents, BrokerEventType, ConnectionEventData, EventSink } from '../events/index.js';
import type { NewOutboxRow, Repositories } from '../store/index.js';

/**
 * The JSON body every endpoint receives: `type`, `timestamp` and `data` (the principal, provider,
 * login and scopes, picked field by field so nothing else an event carries can slip in).
 */
export function webhookPayload(type: BrokerEventType, data: ConnectionEventData, at: Date): string {
  return JSON.stringify({
    type,
    timestamp: at.toISOString(),
    data: {
      principal: { issuer: data.issuer, subject: data.subject },
      provider: data.provider,
      login: data.login,
      scopes: data.scopes,
    },
  });
}

/**
 * The event sink of a broker with webhook endpoints: one outbox row per endpoint that subscribes to
 * the event, written in the change's own transaction, each with its own stable `webhook-id`.
 */
export class WebhookOutbox implements EventSink {
  constructor(
    private readonly endpoints: readonly ConfiguredWebhook[],
    /** Told after a commit that wrote rows: the local delivery loop looks at once instead of at its next poll. */
    private readonly onCommitted: () => void = () => {},
  ) {}

  wants(type: BrokerEventType): boolean {
    return this.endpoints.some((e) => e.events.includes(type));
  }

  async emit<K extends BrokerEventType>(type: K, data: BrokerEvents[K], tx: Repositories): Promise<void> {
    const payload = webhookPayload(type, data, new Date());
    const rows: NewOutboxRow[] = this.endpoints
      .filter((e) => e.events.includes(type))
      .map((e) => ({ id: `msg_${randomHandle(18)}`, endpoint: e.id, event_type: type, payload }));
    if (rows.length > 0) await tx.webhooks.enqueue(rows);
  }

  committed(): void {
    this.onCommitted();
  }
}
