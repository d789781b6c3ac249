import type { ConfiguredWebhook } from '../config/webhooks.js';
import { randomHandle } from '../crypto/index.js';
import type {
  ApprovalDecidedData,
  ApprovalEventData,
  BrokerEvents,
  BrokerEventType,
  ConnectionEventData,
  EventSink,
  ExchangeRefusedData,
} from '../events/index.js';
import type { NewOutboxRow, Repositories } from '../store/index.js';

/**
 * The JSON body every endpoint receives: `type`, `timestamp` and `data`, picked field by field so
 * nothing else an event carries can slip in. A connection event's data is the principal, provider,
 * login and scopes; `exchange.refused`'s the service, the reason and, when verified, the principal.
 */
export function webhookPayload<K extends BrokerEventType>(type: K, data: BrokerEvents[K], at: Date): string {
  return JSON.stringify({ type, timestamp: at.toISOString(), data: payloadData(type, data) });
}

function payloadData(type: BrokerEventType, data: BrokerEvents[BrokerEventType]): Record<string, unknown> {
  if (type === 'approval.requested' || type === 'approval.decided') return approvalPayload(type, data as ApprovalEventData);
  if (type === 'exchange.refused') {
    const refused = data as ExchangeRefusedData;
    return {
      service: refused.service,
      reason: refused.reason,
      ...(refused.principal ? { principal: { issuer: refused.principal.issuer, subject: refused.principal.subject } } : {}),
    };
  }
  const connection = data as ConnectionEventData;
  return {
    principal: { issuer: connection.issuer, subject: connection.subject },
    provider: connection.provider,
    login: connection.login,
    scopes: connection.scopes,
  };
}

/** An approval event's data: ids, the tool, whose call, where to decide, and a decision's verdict; never the arguments or a reason. */
function approvalPayload(type: 'approval.requested' | 'approval.decided', a: ApprovalEventData): Record<string, unknown> {
  const common = {
    id: a.id,
    url: a.url,
    rule: a.rule,
    tool: a.tool,
    upstream: a.upstream,
    provider: a.provider,
    requester: { issuer: a.requester.issuer, subject: a.requester.subject },
    client: a.client,
    expiresAt: a.expiresAt,
  };
  if (type === 'approval.requested') return common;
  const d = a as ApprovalDecidedData;
  return {
    ...common,
    decision: { approver: { issuer: d.decision.approver.issuer, subject: d.decision.approver.subject }, verdict: d.decision.verdict },
    status: d.status,
  };
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
