import type { ConfiguredWebhook } from '../config/webhooks.js';
import { noEvents, type EventSink } from '../events/index.js';
import type { Logger } from '../log.js';
import type { Store } from '../store/index.js';
import { WebhookDelivery, type DeliveryOptions } from './delivery.js';
import { WebhookOutbox } from './outbox.js';

export { nextAttemptAt, WebhookDelivery, type DeliveryOptions } from './delivery.js';
export { webhookPayload, WebhookOutbox } from './outbox.js';
export { webhookSignature } from './signature.js';

export interface Webhooks {
  /** What the connection service writes its events to (nothing at all without endpoints). */
  events: EventSink;
  delivery: WebhookDelivery;
}

/** The outbox and its delivery loop for the configured endpoints; call `delivery.start()` once the broker runs. */
export function createWebhooks(
  store: Store,
  endpoints: readonly ConfiguredWebhook[],
  log: Logger,
  options: DeliveryOptions = {},
): Webhooks {
  const delivery = new WebhookDelivery(store, endpoints, log, options);
  const events = endpoints.length === 0 ? noEvents : new WebhookOutbox(endpoints, () => delivery.nudge());
  return { events, delivery };
}
