/**
 * The broker's events about connections, and the seam they leave through: a sink that writes each
 * one inside the transaction of the change it reports (so a crash keeps both or neither) and is
 * told when that transaction committed. src/webhooks/ is the sink that turns them into signed
 * webhooks; without it nothing is written.
 */
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../config/webhooks.js';
import type { ConnectionRow, Repositories, Store } from '../store/index.js';

export const CONNECTION_EVENT_TYPES = WEBHOOK_EVENT_TYPES;
export type ConnectionEventType = WebhookEventType;

/** What happened to whose connection. Never a token: the login and scopes people see, nothing more. */
export interface ConnectionEvent {
  type: ConnectionEventType;
  principal: { issuer: string; subject: string };
  provider: string;
  /** The upstream account's login. */
  login: string;
  scopes: string[];
}

export interface EventSink {
  /** Whether anything would be written for events of `type` (no transaction is opened for nothing). */
  wants(type: ConnectionEventType): boolean;
  /** Writes `event` through `tx`, the repositories of the transaction that makes the change. */
  record(tx: Repositories, event: ConnectionEvent): Promise<void>;
  /** A transaction that recorded events has committed: they may go out now. */
  committed(): void;
}

/** The sink of a broker with no webhook endpoints. */
export const NO_EVENTS: EventSink = {
  wants: () => false,
  record: async () => {},
  committed: () => {},
};

/** Records one event, when the sink wants its type. */
export type Emit = (event: ConnectionEvent) => Promise<void>;

/** The event of `type` about a connection row: its principal, provider, login and scopes. */
export function connectionEvent(type: ConnectionEventType, row: ConnectionRow): ConnectionEvent {
  return {
    type,
    principal: { issuer: row.issuer, subject: row.subject },
    provider: row.provider,
    login: row.account_login,
    scopes: row.scopes.split(' ').filter(Boolean),
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
    change(tx, async (event) => {
      if (!sink.wants(event.type)) return;
      await sink.record(tx, event);
      emitted = true;
    }),
  );
  if (emitted) sink.committed();
  return result;
}

/**
 * For a change that is one statement: in a transaction with its event when the sink wants `type`,
 * else on the store as before, with no `emit` (so callers skip reading what only the event needs).
 */
export function changeWithEvent<T>(
  store: Store,
  sink: EventSink,
  type: ConnectionEventType,
  change: (repositories: Repositories, emit: Emit | undefined) => Promise<T>,
): Promise<T> {
  if (!sink.wants(type)) return change(store, undefined);
  return transactionWithEvents(store, sink, change);
}
