/**
 * The broker's events about connections and token exchanges, and the seam they leave through: a sink told of each one
 * inside the transaction of the change it reports (so a durable sink, an outbox row, lands or is
 * rolled back with the change itself). src/webhooks/ is the sink that turns them into signed
 * webhooks; without it they go nowhere.
 */
import type { WebhookEventType } from '../config/webhooks.js';
import type { ConnectionRow, Repositories, Store } from '../store/index.js';
import { scopeList } from '../providers/scopes.js';

/** Whose connection, to what, as people see it: never a token. */
export interface ConnectionEventData {
  issuer: string;
  subject: string;
  provider: string;
  /** The upstream account's login. */
  login: string;
  scopes: string[];
}

/** Who asked for a disconnect: the connection's own user, or an operator (`npm run admin`), named. */
export type DisconnectActor = { kind: 'user' } | { kind: 'admin'; actor: string };

/**
 * A token exchange (`/oauth/token`) refused to a service that authenticated: which service, why,
 * and whose, only when the subject token was verified. Never a token or a connect request.
 */
export interface ExchangeRefusedData {
  /** The service's id (PROVIDERS_FILE `services:`). */
  service: string;
  /** As the audit row says it: the RFC 6749 / 8693 error code, and after a colon the broker's reason (`interaction_required:not_connected`). */
  reason: string;
  principal?: { issuer: string; subject: string };
}

/**
 * A call waiting for approval (src/approvals/), as an operator's chat notification needs it: ids,
 * the tool, whose call, and where to decide. Never the arguments (they may hold personal data).
 */
export interface ApprovalEventData {
  /** The request's id; `url` is its page (`<PUBLIC_URL>/approvals/<id>`). */
  id: string;
  url: string;
  /** The policy rule that asked for approval. */
  rule: string;
  tool: string;
  /** The upstream the tool belongs to ('' for the broker's own tools). */
  upstream: string;
  provider: string;
  requester: { issuer: string; subject: string };
  /** The assistant as it introduced itself. */
  client: string;
  /** Until when (ISO 8601) approvers may decide, or the approval may run once decided. */
  expiresAt: string;
}

/** One approver's decision, and where the request stands after it. */
export interface ApprovalDecidedData extends ApprovalEventData {
  decision: { approver: { issuer: string; subject: string }; verdict: 'approve' | 'deny' };
  /** `approved` once the quorum is reached, `denied` on a deny, else still `pending`. */
  status: 'pending' | 'approved' | 'denied';
}

/** What the broker tells the operator's other systems about (the signed webhooks deliver these). */
export interface BrokerEvents {
  /** A connection was stored: a first connect, a reconnect or more access. */
  'connection.created': ConnectionEventData;
  /** Its tokens were refreshed (once per refresh across every instance). */
  'connection.refreshed': ConnectionEventData;
  /** The provider stopped accepting its tokens; the user must reconnect. */
  'connection.reauth_required': ConnectionEventData;
  /** Deleted by its own user (disconnect), after an attempt to revoke it upstream. */
  'connection.deleted': ConnectionEventData & { revokedUpstream: boolean; by: { kind: 'user' } };
  /** Deleted by an operator (`npm run admin -- connections revoke`), after an attempt to revoke it upstream. */
  'connection.revoked': ConnectionEventData & { revokedUpstream: boolean; by: DisconnectActor };
  /** A token exchange refused after the service authenticated (never for an unauthenticated caller). */
  'exchange.refused': ExchangeRefusedData;
  /** A call needs approval: a new request was opened (not when the same call is repeated). */
  'approval.requested': ApprovalEventData;
  /** An approver approved or denied a request (one event per decision). */
  'approval.decided': ApprovalDecidedData;
}

export type BrokerEventType = keyof BrokerEvents;

// The endpoints' `events:` filter (src/config/webhooks.ts) names exactly these.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameNames: Same<BrokerEventType, WebhookEventType> = true;
void sameNames;

/**
 * Where events go. `emit` runs inside the transaction that made the change, with its repositories
 * as `tx`, and must only write through `tx` (no network, no other store handle).
 */
export interface EventSink {
  emit<K extends BrokerEventType>(type: K, data: BrokerEvents[K], tx: Repositories): Promise<void>;
  /** Whether anything would be written for `type`: when not, a one-statement change needs no transaction. Default: yes. */
  wants?(type: BrokerEventType): boolean;
  /** A transaction that emitted events has committed: they may go out now. */
  committed?(): void;
}

/** The default until webhooks are configured: events go nowhere. */
export const noEvents: EventSink = {
  emit: () => Promise.resolve(),
  wants: () => false,
};

/** Emits one event in the transaction at hand. */
export type Emit = <K extends BrokerEventType>(type: K, data: BrokerEvents[K]) => Promise<void>;

/** The data every connection event carries, from the connection's row (also the head of `connections list --json`). */
export function connectionEventData(
  row: Pick<ConnectionRow, 'issuer' | 'subject' | 'provider' | 'account_login' | 'scopes'>,
): ConnectionEventData {
  return {
    issuer: row.issuer,
    subject: row.subject,
    provider: row.provider,
    login: row.account_login,
    scopes: scopeList(row.scopes),
  };
}

/**
 * Runs `change` in one transaction whose events land with it, and tells the sink once it has
 * committed (never when it rolled back).
 */
export async function transactionWithEvents<T>(
  store: Store,
  sink: EventSink,
  change: (tx: Repositories, emit: Emit) => Promise<T>,
): Promise<T> {
  let emitted = false;
  const result = await store.transaction((tx) =>
    change(tx, async (type, data) => {
      if (sink.wants?.(type) === false) return;
      await sink.emit(type, data, tx);
      emitted = true;
    }),
  );
  if (emitted) sink.committed?.();
  return result;
}

/**
 * For a change that is one statement: in a transaction with its event when the sink wants `type`,
 * else on the store as before, with no `emit` (so callers skip reading what only the event needs).
 */
export function changeWithEvent<T>(
  store: Store,
  sink: EventSink,
  type: BrokerEventType,
  change: (repositories: Repositories, emit: Emit | undefined) => Promise<T>,
): Promise<T> {
  if (sink.wants?.(type) === false) return change(store, undefined);
  return transactionWithEvents(store, sink, change);
}
