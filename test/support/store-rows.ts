// Row factories for the store suites (store-contract and system/store-postgres): one pending
// connection and one connection as a test would create them, with overrides for what a case is about.
import type { NewConnection, NewPendingConnection, Owner } from '../../src/store/types.js';

const HOUR = 3_600_000;

let nextId = 0;

/** A pending connection of `owner`, for GitHub, expiring in an hour; ids are unique across suites sharing a database. */
export function pendingRow(owner: Owner, overrides: Partial<NewPendingConnection> = {}): NewPendingConnection {
  const id = overrides.id ?? `pc-${++nextId}-${Math.random().toString(36).slice(2, 8)}`;
  return {
    id,
    link_hash: `link-${id}`,
    issuer: owner.issuer,
    subject: owner.subject,
    provider: 'github',
    client_name: 'Claude',
    scopes: 'repo',
    expires_at: Date.now() + HOUR,
    ...overrides,
  };
}

/** A connection of `owner` to `provider`, its account named after the subject. */
export function connection(owner: Owner, provider: string, overrides: Partial<NewConnection> = {}): NewConnection {
  return {
    ...owner,
    provider,
    account_id: `acct-${owner.subject}`,
    account_login: owner.subject,
    scopes: 'repo',
    key_id: 'k1',
    sealed_tokens: `sealed-${owner.subject}-${provider}-1`,
    ...overrides,
  };
}
