import type { ConfiguredWebhook } from '../config/webhooks.js';
import { randomHandle } from '../crypto/index.js';
import type { ConnectionEvent, ConnectionEventType, EventSink } from '../events/index.js';
import type { NewOutboxRow, Repositories } from '../store/index.js';

/** The JSON body every endpoint receives for `event`: `type`, `timestamp` and `data`, never a token. */
export function webhookPayload(event: ConnectionEvent, at: Date): string {
  return JSON.stringify({
    type: event.type,
    timestamp: at.toISOString(),
    data: {
      principal: { issuer: event.principal.issuer, subject: event.principal.subject },
      provider: event.provider,
      login: event.login,
      scopes: event.scopes,
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

  wants(type: ConnectionEventType): boolean {
    return this.endpoints.some((e) => e.events.includes(type));
  }

  async record(tx: Repositories, event: ConnectionEvent): Promise<void> {
    const payload = webhookPayload(event, new Date());
    const rows: NewOutboxRow[] = this.endpoints
      .filter((e) => e.events.includes(event.type))
      .map((e) => ({ id: `msg_${randomHandle(18)}`, endpoint: e.id, event_type: event.type, payload }));
    if (rows.length > 0) await tx.webhooks.enqueue(rows);
  }

  committed(): void {
    this.onCommitted();
  }
}
