import type { Repositories } from '../store/index.js';

/**
 * What the broker tells the operator's other systems about (the signed webhooks deliver these).
 * Data names the principal, the provider and the account, never a token.
 */
export interface BrokerEvents {
  /** A connection was deleted after an attempt to revoke it upstream: by its user (disconnect) or by an operator. */
  'connection.revoked': {
    issuer: string;
    subject: string;
    provider: string;
    login: string;
    scopes: string[];
    /** Whether the provider confirmed the grant is gone. */
    revokedUpstream: boolean;
    /** `admin` with the operator's name from `npm run admin -- connections revoke`, `user` from a disconnect. */
    by: { kind: 'user' } | { kind: 'admin'; actor: string };
  };
}

export type BrokerEventType = keyof BrokerEvents;

/**
 * Where events go. `emit` runs inside the transaction that made the change, with its repositories
 * as `tx`, so a durable sink (an outbox row) lands or is rolled back with the change itself; it
 * must only write through `tx` (no network, no other store handle).
 */
export interface EventSink {
  emit<K extends BrokerEventType>(type: K, data: BrokerEvents[K], tx: Repositories): Promise<void>;
}

/** The default until webhooks are configured: events go nowhere. */
export const noEvents: EventSink = {
  emit: () => Promise.resolve(),
};
