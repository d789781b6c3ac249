/**
 * The storage interface the rest of the broker sees. Two implementations stand behind it — SQLite
 * (embedded, one machine) and PostgreSQL (shared by any number of instances) — and nothing outside
 * `src/store/` can tell them apart. Times are epoch milliseconds throughout.
 */

import type { ApprovalRepository } from './approvals.js';

export type Owner = { issuer: string; subject: string };

export interface SessionRow {
  id_hash: string;
  issuer: string | null;
  subject: string | null;
  display_name: string | null;
  created_at: number;
  expires_at: number;
  /** The sealed ID token of the sign-in, for RP-initiated logout. */
  id_token?: string | null;
}

export interface LoginTransaction {
  state_hash: string;
  session_hash: string;
  code_verifier: string;
  nonce: string;
  return_to: string;
  expires_at: number;
}

export interface OAuthFlow {
  state_hash: string;
  pending_id: string;
  session_hash: string;
  code_verifier: string;
  expires_at: number;
}

/** Put before a failed pending connection's `outcome_reason` once a call was told how it failed. */
export const TOLD_PREFIX = 'told:';

export type PendingStatus = 'open' | 'authorizing' | 'completed' | 'cancelled' | 'denied' | 'failed';
export type SettledStatus = Exclude<PendingStatus, 'open' | 'authorizing'>;

export interface PendingConnection {
  id: string;
  link_hash: string;
  issuer: string;
  subject: string;
  provider: string;
  client_name: string | null;
  /** Space-separated scopes to ask for; null = the provider's defaults. */
  scopes: string | null;
  /** Why a tool asked ("create the issue in acme/widgets"), shown on the consent page; null for page-made links. */
  purpose: string | null;
  status: PendingStatus;
  outcome_reason: string | null;
  created_at: number;
  expires_at: number;
  updated_at: number;
  /** The service (token exchange) whose request made this link; null for the broker's own tools and pages. */
  service_id?: string | null;
  /** The keyed hash of the link's activation code (src/connect/activate.ts); null on rows made before codes. */
  activation_hash?: string | null;
  /** When its activation code opened the consent page (a code works once); null while unused. */
  activated_at?: number | null;
}

export type NewPendingConnection = Omit<
  PendingConnection,
  'status' | 'created_at' | 'updated_at' | 'outcome_reason' | 'purpose' | 'service_id' | 'activation_hash' | 'activated_at'
> & {
  purpose?: string | null;
  service_id?: string | null;
  activation_hash?: string | null;
};

export type ConnectionStatus = 'active' | 'reauth_required';

export interface ConnectionRow {
  issuer: string;
  subject: string;
  provider: string;
  account_id: string;
  account_login: string;
  scopes: string;
  key_id: string;
  sealed_tokens: string;
  created_at: number;
  updated_at: number;
  last_used_at: number | null;
  status: ConnectionStatus;
  status_reason: string | null;
}

export type NewConnection = Omit<ConnectionRow, 'created_at' | 'updated_at' | 'last_used_at' | 'status' | 'status_reason'>;

export type AuditEvent =
  | 'connection_created'
  | 'connection_refreshed'
  | 'refresh_failed'
  | 'reauth_required'
  | 'connection_revoked'
  | 'connection_revoked_by_admin'
  | 'binding_refused'
  | 'keys_rotated'
  | 'token_exchanged'
  | 'token_exchange_refused'
  /** A tools/call forwarded to an upstream MCP server: `provider` is the upstream id, `detail` the tool, outcome and duration. */
  | 'upstream_call'
  /** A policy decision other than a plain allow: `detail` names the rule, the effect and the tool. */
  | 'policy_decision'
  /** An approval asked for, decided (once per approver), and used by the call it was bound to. */
  | 'approval_requested'
  | 'approval_decided'
  | 'approval_used';

export interface AuditRow {
  id: number;
  at: number;
  event: AuditEvent;
  issuer: string | null;
  subject: string | null;
  provider: string | null;
  detail: string | null;
}

/** A sign-in as the session store keeps it: the session it replaces and the one it starts. */
export interface SignedInSession {
  /** The hash of the session the browser had before (deleted with the rotation), if it had one. */
  oldHash: string | undefined;
  newHash: string;
  principal: Owner & { name: string };
  expiresAt: number;
  /** The sign-in's ID token, sealed to `newHash`, for the IdP's logout; none when the IdP sent none. */
  sealedIdToken?: string | undefined;
}

/** Server-side browser sessions, keyed by the hash of the cookie value. */
export interface SessionRepository {
  create(idHash: string, expiresAt: number): Promise<void>;
  find(idHash: string, now?: number): Promise<SessionRow | undefined>;
  /** Replaces the session with a fresh id carrying the signed-in principal (no fixation), in one transaction. */
  rotateSignedIn(signIn: SignedInSession): Promise<void>;
  delete(idHash: string): Promise<void>;
}

/** OIDC sign-ins in progress; each one can be taken exactly once. */
export interface LoginTransactionRepository {
  put(t: LoginTransaction): Promise<void>;
  /**
   * Deletes and returns the transaction if `sessionHash` (the browser's) started it, so a replayed
   * callback finds nothing and one from another browser consumes nothing.
   */
  take(stateHash: string, sessionHash: string): Promise<LoginTransaction | undefined>;
}

// Not merged with LoginTransactionRepository: a flow belongs to a pending connection (deleted with it) and is taken per provider.
/** Provider authorizations in progress; each `state` can be taken exactly once. */
export interface OAuthFlowRepository {
  put(flow: OAuthFlow): Promise<void>;
  /**
   * Like {@link LoginTransactionRepository.take}: only by the browser session that started it, and
   * only on the callback of the provider its pending connection is for — a callback on another
   * provider's path consumes nothing, so the genuine one still works.
   */
  take(stateHash: string, sessionHash: string, provider: string): Promise<OAuthFlow | undefined>;
}

/** Connections asked for and not yet settled. */
export interface PendingConnectionRepository {
  create(row: NewPendingConnection): Promise<void>;
  byId(id: string): Promise<PendingConnection | undefined>;
  byLinkHash(linkHash: string): Promise<PendingConnection | undefined>;
  /**
   * The open, unexpired rows whose unused activation code has this hash, of every owner (at most two:
   * the caller refuses anything but exactly one).
   */
  byActivationHash(activationHash: string, now?: number): Promise<PendingConnection[]>;
  /**
   * Marks the activation code of an open, unexpired row used, exactly once: of two concurrent
   * redemptions only one sees a changed row. What makes a code single-use; the link is untouched.
   */
  redeemActivation(id: string, activationHash: string, now?: number): Promise<boolean>;
  /**
   * The owner's open, unexpired pending connection with the same provider, scopes and client name,
   * or else `row`, inserted — atomically, so concurrent calls never mint two. Before inserting, the
   * owner's oldest open rows beyond `maxOpen - 1` are settled `cancelled` (reason `superseded`);
   * rows in any other status are never touched. Returns the row and the ids it cancelled.
   */
  openOrCreate(row: NewPendingConnection, maxOpen: number, now?: number): Promise<{ pending: PendingConnection; cancelled: string[] }>;
  /** The newest unexpired, unsettled pending connection of `owner` for `provider`. */
  latestInFlight(owner: Owner, provider: string, now?: number): Promise<PendingConnection | undefined>;
  /**
   * The owner's newest pending connection for `provider` when it settled `failed` at or after
   * `since` and no call was told of it yet; marks it told ({@link TOLD_PREFIX} before its reason),
   * once: of concurrent takers only one gets the row. For a repeat that carries no link of its own.
   */
  takeUntoldFailure(owner: Owner, provider: string, since: number): Promise<PendingConnection | undefined>;
  /** How many pending connections, of every owner, are unexpired and open or authorizing (the metrics gauge). */
  countInFlight(now?: number): Promise<number>;
  /**
   * Moves an open, unexpired link to `authorizing`, exactly once: of two concurrent claims only
   * one sees a changed row. This is what makes a connect link single-use.
   */
  claim(id: string, now?: number): Promise<boolean>;
  /**
   * Settles a pending connection once (later calls change nothing and return false) and, on a
   * store that can push, tells every instance listening (see `Store.settledFeed`).
   */
  settle(id: string, status: SettledStatus, reason?: string): Promise<boolean>;
  /** Of `ids`, the ones that are settled, with their status. */
  settledAmong(ids: readonly string[]): Promise<Array<{ id: string; status: SettledStatus }>>;
  /**
   * Pending connections settled at or after `since` (epoch ms, by their `updated_at`): what a
   * polling waiter asks, at a cost that grows with recent settlements, not with the calls held.
   */
  settledSince(since: number): Promise<Array<{ id: string; status: SettledStatus }>>;
  /**
   * Removes pending connections settled, or expired, more than {@link PENDING_PRUNE_GRACE_MS} ago
   * (with their flows; a claimed one only once its flow has expired too), and expired flows,
   * sign-ins, sessions and rate-limit windows; returns how many rows went.
   */
  prune(now?: number): Promise<number>;
}

/**
 * How long a settled or expired pending connection is kept: long enough for a held repeat (at most
 * 50 s) or a polling watcher (2 s look-back) to read how it ended, short enough that one user cannot
 * pile rows up.
 */
export const PENDING_PRUNE_GRACE_MS = 5 * 60_000;
/** How long a provider authorization (`state` + PKCE verifier) stays valid after the link is claimed. */
export const OAUTH_FLOW_TTL_MS = 10 * 60_000;

/** Linked provider accounts, one per (principal, provider). Tokens arrive here already sealed. */
export interface ConnectionRepository {
  /** Inserts or replaces the principal's connection to a provider, keeping its creation time. */
  save(row: NewConnection): Promise<void>;
  find(owner: Owner, provider: string): Promise<ConnectionRow | undefined>;
  list(owner: Owner): Promise<ConnectionRow[]>;
  /**
   * Replaces the tokens only if they are still the ones the caller read (compare-and-swap on the
   * sealed value), so a slower writer can never overwrite a newer refresh.
   */
  replaceTokens(
    owner: Owner,
    provider: string,
    expected: string,
    next: { key_id: string; sealed_tokens: string; scopes: string },
  ): Promise<boolean>;
  /** Marks the connection as needing the user again; the row (and its account binding) stays. */
  markReauthRequired(owner: Owner, provider: string, reason: string): Promise<boolean>;
  /** Other principals' connections to the same upstream account. */
  othersWithAccount(owner: Owner, provider: string, accountId: string): Promise<ConnectionRow[]>;
  /** The next batch (in `seq` order, after `afterSeq`) of rows sealed under any key but `keyId`. */
  sealedUnderOtherKeys(keyId: string, afterSeq: number, limit: number): Promise<Array<ConnectionRow & { seq: number }>>;
  /** Re-seals one row if it is unchanged since it was read. */
  reseal(row: ConnectionRow, next: { key_id: string; sealed_tokens: string }): Promise<boolean>;
  countByKey(): Promise<Array<{ key_id: string; n: number }>>;
  touch(owner: Owner, provider: string, at?: number): Promise<void>;
  delete(owner: Owner, provider: string): Promise<boolean>;
}

/**
 * Short leases that make a token refresh single-flight across instances: only the holder of an
 * unexpired lease for a connection calls the provider; everyone else waits for the new tokens.
 */
export interface RefreshLeaseRepository {
  /** Takes the lease if it is free or expired; true when `holder` now holds it. */
  acquire(owner: Owner, provider: string, holder: string, ttlMs: number, now?: number): Promise<boolean>;
  /** Extends a lease `holder` still holds; false when it has lost it. */
  renew(owner: Owner, provider: string, holder: string, ttlMs: number, now?: number): Promise<boolean>;
  release(owner: Owner, provider: string, holder: string): Promise<void>;
}

/**
 * An append-only record of what happened to connections. `detail` is a code or a count, never a secret.
 * A store opened with the chain's key (src/store/audit-chain.ts) chains every row it records into its
 * own stream; docs/audit.md says what that proves.
 */
export interface AuditRepository {
  record(event: AuditEvent, owner: Owner | undefined, provider: string | undefined, detail?: string): Promise<void>;
  list(filter?: { issuer?: string; subject?: string; event?: AuditEvent }): Promise<AuditRow[]>;
  /**
   * Deletes the oldest rows recorded before `before` (epoch ms), by (`at`, `id`), at most `limit` of
   * them, and returns how many went: callers loop in batches, so no call holds the write lock long.
   * In the same transaction, each stream that lost rows gets its anchor moved to its last pruned row.
   */
  prune(before: number, limit: number): Promise<number>;
  /** This writer's stream and its last place and MAC (undefined when the store chains nothing). */
  head(): Promise<AuditChainHead | undefined>;
  /** Chained rows in (`stream`, `seq`, `id`) order, after `after` (undefined = from the start). */
  chainPage(after: AuditChainCursor | undefined, limit: number): Promise<ChainedAuditRow[]>;
  /** Every stream's anchor and every void (a rolled-back row's place and MAC). */
  chainMarks(): Promise<{ anchors: AuditAnchorRow[]; voids: AuditVoidRow[] }>;
  /** The unchained rows: how many precede the first chained row, and the first one after it (a broken link). */
  unchained(): Promise<{ before: number; after: number; firstAfter: number | null }>;
}

export interface AuditChainHead {
  stream: string;
  seq: number;
  mac: string;
  key_id: string;
}

export interface ChainedAuditRow extends AuditRow {
  stream: string;
  seq: number;
  key_id: string;
  mac: string;
}

export type AuditChainCursor = Pick<ChainedAuditRow, 'stream' | 'seq' | 'id'>;

export interface AuditAnchorRow {
  stream: string;
  seq: number;
  mac: string;
  at: number;
  key_id: string;
  tag: string;
}

export interface AuditVoidRow {
  stream: string;
  seq: number;
  mac: string;
  key_id: string;
  tag: string;
}

/** Hit counters for rate limits, shared by every instance. Keys arrive already hashed. */
export interface RateLimitRepository {
  /**
   * Counts `n` hits (default one) for `keyHash` in its current window (opened by the first hit,
   * `windowMs` long) and returns the count so far and when the window closes.
   */
  hit(keyHash: string, windowMs: number, now?: number, n?: number): Promise<{ hits: number; resetAt: number }>;
  /** Takes one hit back (for limiters that do not count some outcomes). */
  undo(keyHash: string): Promise<void>;
  reset(keyHash: string): Promise<void>;
}

/** RFC 7523 client assertions already used, by a hash of (service, jti), until they expire. */
export interface ClientAssertionRepository {
  /** Records the assertion as used; false when it was already used (and has not expired). */
  use(jtiHash: string, expiresAt: number, now?: number): Promise<boolean>;
}

export interface ServiceUsageRow {
  provider: string;
  service_id: string;
  last_used_at: number;
}

/** Which services obtained a token through a principal's connections, and when last. */
export interface ServiceUsageRepository {
  touch(owner: Owner, provider: string, serviceId: string, at?: number): Promise<void>;
  list(owner: Owner): Promise<ServiceUsageRow[]>;
}

/** A connection as the operator's tools see it: everything but the sealed tokens and their key. */
export type ConnectionListing = Omit<ConnectionRow, 'key_id' | 'sealed_tokens'> & { seq: number };

export interface ConnectionListFilter {
  owner?: Owner;
  provider?: string;
  status?: ConnectionStatus;
}

export interface AuditExportFilter {
  owner?: Owner;
  /** Only rows recorded at or after this instant (epoch ms). */
  since?: number;
}

/** Where an audit export stopped: the last row handed out, by (`at`, `id`). */
export type AuditCursor = Pick<AuditRow, 'at' | 'id'>;

export interface StoreStats {
  /** Every (provider, status) with at least one connection, in byte order of provider then status. */
  connections: Array<{ provider: string; status: ConnectionStatus; n: number }>;
  /** Unexpired links nobody opened yet, and links opened whose authorization may still come back. */
  pending: { open: number; authorizing: number };
  /** `refresh_failed` audit rows at or after `since`, per provider (byte order). */
  refreshFailures: Array<{ provider: string; n: number }>;
}

/**
 * Queries across every principal, for the operator's `npm run admin`: each one a short statement
 * (pages by a keyset cursor, never an open transaction), so they run beside a live service.
 */
export interface AdminRepository {
  /** The next page of connections matching `filter`, in `seq` order after `afterSeq` (0 = from the start). */
  connections(filter: ConnectionListFilter, afterSeq: number, limit: number): Promise<ConnectionListing[]>;
  /** The next page of audit rows matching `filter`, oldest first by (`at`, `id`), after `after` (undefined = from the start). */
  audit(filter: AuditExportFilter, after: AuditCursor | undefined, limit: number): Promise<AuditRow[]>;
  /** Counts for `npm run admin -- stats`; refresh failures are counted from `refreshFailuresSince` (epoch ms). */
  stats(refreshFailuresSince: number, now?: number): Promise<StoreStats>;
}

/**
 * The broker's client registration at an upstream's authorization server (`auth: mcp` upstreams):
 * one per (issuer, client_key), where `client_key` is the redirect URI it was registered for.
 */
export interface UpstreamClientRow {
  issuer: string;
  client_key: string;
  client_id: string;
  /** Sealed by the caller (the store never sees a client secret in the clear); null for public clients. */
  client_secret_sealed: string | null;
  key_id: string | null;
  registered_at: number;
  /** What the server answered at registration (RFC 7591 §3.2.1), without the secret. */
  metadata_json: string;
}

/** Client registrations at upstream authorization servers, shared by every instance. */
export interface UpstreamClientRepository {
  /**
   * Stores `row` unless a registration for its (issuer, client_key) exists, and returns the one
   * stored: of two instances registering at once, both end up using the first one written.
   */
  putIfAbsent(row: UpstreamClientRow): Promise<UpstreamClientRow>;
  find(issuer: string, clientKey: string): Promise<UpstreamClientRow | undefined>;
  /** Forgets a registration the server no longer knows, only if it is still `clientId` (a newer one stays). */
  delete(issuer: string, clientKey: string, clientId: string): Promise<boolean>;
  /** Forgets every registration made for `clientKey` (one upstream's callback), at any issuer; how many went. */
  deleteForClientKey(clientKey: string): Promise<number>;
  /**
   * For key rotation: the next `limit` registrations with a sealed secret under any key but `keyId`
   * (or under none), in byte order of (issuer, client_key) after the cursor `after` (undefined = from
   * the start). The table holds one row per upstream and callback, so a keyset on the primary key is enough.
   */
  sealedUnderOtherKeys(keyId: string, after: UpstreamClientCursor | undefined, limit: number): Promise<UpstreamClientRow[]>;
  /** Re-seals one registration's secret if it is unchanged since it was read (compare-and-set on the sealed value). */
  reseal(row: UpstreamClientRow, next: { key_id: string; client_secret_sealed: string }): Promise<boolean>;
  /** Registrations with a sealed secret, per key id (byte order; `''` for a secret stored without one). */
  countByKey(): Promise<Array<{ key_id: string; n: number }>>;
}

/** Where a page of {@link UpstreamClientRepository.sealedUnderOtherKeys} stopped. */
export type UpstreamClientCursor = Pick<UpstreamClientRow, 'issuer' | 'client_key'>;

export interface UpstreamToolsRow {
  upstream: string;
  /** The upstream's tool definitions as it listed them (unprefixed, unfiltered), as JSON. */
  definitions_json: string;
  seen_at: number;
}

/** The last tool definitions seen per upstream: public metadata, shared by every instance. */
export interface UpstreamToolsRepository {
  get(upstream: string): Promise<UpstreamToolsRow | undefined>;
  all(): Promise<UpstreamToolsRow[]>;
  /** Stores the definitions unless they are the ones already stored; true when a row was written. */
  put(upstream: string, definitionsJson: string, at?: number): Promise<boolean>;
}

export type OutboxStatus = 'pending' | 'delivered' | 'failed';

/** One event to one webhook endpoint (015_webhook_outbox.sql under migrations/ says what each column means). */
export interface OutboxRow {
  /** The stable `webhook-id`, the same on every attempt. */
  id: string;
  endpoint: string;
  event_type: string;
  /** The JSON body exactly as it is signed and sent; never a secret. */
  payload: string;
  status: OutboxStatus;
  /** Attempts started so far (counted when claimed, so one a crash cut short counts too). */
  attempts: number;
  created_at: number;
  /** When the next attempt may start; while claimed, when the claim lapses. */
  due_at: number;
  claimed_by: string | null;
  /** Why the last attempt failed: an HTTP status or a network error code, never a body. */
  last_error: string | null;
  settled_at: number | null;
}

export type NewOutboxRow = Pick<OutboxRow, 'id' | 'endpoint' | 'event_type' | 'payload'>;

/** What `npm run admin -- stats` shows of the webhooks, per endpoint. */
export interface WebhookStats {
  endpoints: Array<{ endpoint: string; pending: number; delivered: number; failed: number }>;
  /** When the oldest event still waiting was written; null when none waits. */
  oldestPendingAt: number | null;
}

/**
 * The webhook outbox. Events are enqueued inside `Store.transaction`, with the change they report;
 * any instance then claims due rows for a while (a lease, like refresh leases), sends them, and
 * settles them. Of instances claiming at once, each row goes to one; a claim whose holder died
 * lapses at its `due_at`.
 */
export interface WebhookOutboxRepository {
  enqueue(rows: readonly NewOutboxRow[], now?: number): Promise<void>;
  /**
   * Claims for `holder`, for `leaseMs`, up to `limit` pending rows of `endpoints` that are due (new,
   * retry time reached, or an earlier claim lapsed), oldest due first, counting an attempt on each.
   */
  claim(holder: string, endpoints: readonly string[], limit: number, leaseMs: number, now?: number): Promise<OutboxRow[]>;
  /** Settles a claimed row as delivered; false when `holder` no longer holds it. */
  delivered(id: string, holder: string, now?: number): Promise<boolean>;
  /** An attempt that did not deliver: due again at `retryAt`, or `failed` for good when it is null. */
  undelivered(id: string, holder: string, retryAt: number | null, error: string, now?: number): Promise<boolean>;
  /**
   * An attempt the broker cut off itself (its shutdown), which says nothing about the receiver: the
   * claim is given up with its attempt uncounted, the row due at `now` with its retry schedule and
   * last error as they were, so the next instance sends it at once; false when `holder` no longer holds it.
   */
  release(id: string, holder: string, now?: number): Promise<boolean>;
  byId(id: string): Promise<OutboxRow | undefined>;
  stats(): Promise<WebhookStats>;
  /** Deletes delivered rows settled before `deliveredBefore` and failed ones before `failedBefore`; how many went. */
  prune(deliveredBefore: number, failedBefore: number): Promise<number>;
}

export interface Repositories {
  sessions: SessionRepository;
  loginTransactions: LoginTransactionRepository;
  pending: PendingConnectionRepository;
  oauthFlows: OAuthFlowRepository;
  connections: ConnectionRepository;
  leases: RefreshLeaseRepository;
  audit: AuditRepository;
  rateLimits: RateLimitRepository;
  clientAssertions: ClientAssertionRepository;
  serviceUsage: ServiceUsageRepository;
  admin: AdminRepository;
  upstreamClients: UpstreamClientRepository;
  upstreamTools: UpstreamToolsRepository;
  webhooks: WebhookOutboxRepository;
  approvals: ApprovalRepository;
}

/** How a store pushes "pending connection settled" to every instance, when it can. */
export interface SettledFeed {
  /** True while pushes arrive; when false, waiters poll `settledSince` (what settled since their last look). */
  readonly live: boolean;
  /**
   * Calls `onSettled` for each pending connection settled by any instance, and `onLive` whenever
   * the feed comes up or goes down (after coming up, callers catch up by polling once).
   */
  subscribe(onSettled: (pendingId: string) => void, onLive: (live: boolean) => void): () => void;
}

export interface Store extends Repositories {
  readonly kind: 'sqlite' | 'postgres';
  /**
   * Runs `fn` in one transaction: all of its writes land, or none do. Inside `fn`, reach the store
   * only through `tx`: awaiting the outer store deadlocks on SQLite and runs outside the
   * transaction on PostgreSQL.
   */
  transaction<T>(fn: (tx: Repositories) => Promise<T>): Promise<T>;
  /** Present on stores that push settlements (PostgreSQL LISTEN/NOTIFY). */
  readonly settledFeed?: SettledFeed;
  /** Resolves when the database answers; rejects when it cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
