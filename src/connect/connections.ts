import { setTimeout as sleep } from 'node:timers/promises';
import type { Principal } from '../auth/principal.js';
import { randomId, SealError, type Sealer } from '../crypto/index.js';
import type { Logger } from '../log.js';
import { ProviderError, type Provider, type ProviderAccount, type ProviderTokens } from '../providers/provider.js';
import { StoreUnavailableError, type AuditEvent, type ConnectionRow, type Store } from '../store/index.js';

/**
 * Whose tokens: always a {@link Principal} (made only from a verified token or session), so no
 * caller can hand this service an issuer/subject taken from input.
 */
type Owner = Principal;

export interface OpenConnection {
  row: ConnectionRow;
  tokens: ProviderTokens;
}

/** What a tool can do with the caller's connection right now. */
export type Usable = { kind: 'ok'; connection: OpenConnection } | { kind: 'reauth_required'; row: ConnectionRow } | { kind: 'none' };

/** A connection as people and models see it (no tokens): the `/connections` page and `list_connections`. */
export interface ConnectionSummary {
  provider: string;
  login: string;
  scopes: string[];
  connectedAt: string;
  lastUsedAt: string | null;
  status: ConnectionRow['status'];
}

export function summarizeConnection(row: ConnectionRow): ConnectionSummary {
  return {
    provider: row.provider,
    login: row.account_login,
    scopes: row.scopes.split(' ').filter(Boolean),
    connectedAt: new Date(row.created_at).toISOString(),
    lastUsedAt: row.last_used_at ? new Date(row.last_used_at).toISOString() : null,
    status: row.status,
  };
}

export interface DisconnectOutcome {
  /** A connection existed and was deleted locally. */
  deleted: boolean;
  /** Whether the provider confirmed the grant is gone; false with `revokeError` when it did not. */
  revoked: boolean;
  revokeError?: string;
}

export interface ConnectionServiceOptions {
  /** How long a refresh lease is held at most (longer than the slowest token call). */
  leaseMs?: number;
  /** How long a caller waits for another process's refresh before giving up. */
  waitMs?: number;
  /** The provider timeout, from which the lease and the wait are derived. */
  providerTimeoutMs?: number;
  pollMs?: number;
}

/**
 * The only way tokens go in and out of the store: sealed on the way in (bound to the principal and
 * provider), opened on the way out, refreshed once across every process when near expiry, and
 * never deleted because a refresh failed — a connection the provider stopped accepting is marked
 * `reauth_required` and kept.
 */
export class ConnectionService {
  readonly #inflight = new Map<string, Promise<Usable>>();
  #closing = false;
  readonly #leaseMs: number;
  readonly #waitMs: number;
  readonly #pollMs: number;

  constructor(
    private readonly store: Store,
    private readonly sealer: Sealer,
    private readonly log: Logger,
    options: ConnectionServiceOptions = {},
  ) {
    // A lease must outlive the slowest refresh (an oidc provider may need discovery first), and a
    // waiter must outwait the lease.
    const slowest = 2 * (options.providerTimeoutMs ?? 10_000) + 5_000;
    this.#leaseMs = options.leaseMs ?? Math.max(30_000, slowest);
    this.#waitMs = options.waitMs ?? this.#leaseMs + 5_000;
    this.#pollMs = options.pollMs ?? 50;
  }

  #seal(owner: Owner, provider: string, tokens: ProviderTokens) {
    return this.sealer.seal(JSON.stringify(tokens), { issuer: owner.issuer, subject: owner.subject, provider });
  }

  /**
   * Stores a freshly authorized connection — unless `refuseShared` and the upstream account is
   * already linked to another principal, or `refuseAccountChange` and the principal's existing
   * connection is to a different upstream account — and settles the pending connection that asked
   * for it (if any), in one transaction: a crash leaves neither half.
   */
  save(
    principal: Principal,
    provider: string,
    account: ProviderAccount,
    tokens: ProviderTokens,
    { pendingId, refuseShared, refuseAccountChange = false }: { pendingId?: string; refuseShared: boolean; refuseAccountChange?: boolean },
  ): Promise<'saved' | 'refused_shared_account' | 'refused_different_account'> {
    const sealed = this.#seal(principal, provider, tokens);
    return this.store.transaction(async (tx) => {
      if (refuseShared && (await tx.connections.othersWithAccount(principal, provider, account.id)).length > 0) {
        await tx.audit.record('binding_refused', principal, provider, 'account already linked to another principal');
        if (pendingId) await tx.pending.settle(pendingId, 'denied', 'refused_shared_account');
        return 'refused_shared_account';
      }
      // "More access" and "reconnect" come back through the same callback as a first connect: an
      // account switch there would silently move every tool call to another upstream identity.
      const existing = refuseAccountChange ? await tx.connections.find(principal, provider) : undefined;
      if (existing && existing.account_id !== account.id) {
        await tx.audit.record('binding_refused', principal, provider, 'a different upstream account than the linked one');
        if (pendingId) await tx.pending.settle(pendingId, 'denied', 'refused_different_account');
        return 'refused_different_account';
      }
      await tx.connections.save({
        issuer: principal.issuer,
        subject: principal.subject,
        provider,
        account_id: account.id,
        account_login: account.login,
        scopes: tokens.scopes.join(' '),
        key_id: sealed.keyId,
        sealed_tokens: sealed.value,
      });
      await tx.audit.record('connection_created', principal, provider);
      if (pendingId) await tx.pending.settle(pendingId, 'completed');
      return 'saved';
    });
  }

  find(owner: Owner, provider: string): Promise<ConnectionRow | undefined> {
    return this.store.connections.find(owner, provider);
  }

  /** Loads and decrypts the connection; a row that cannot be opened counts as absent. */
  async open(owner: Owner, provider: string): Promise<OpenConnection | undefined> {
    const row = await this.store.connections.find(owner, provider);
    if (!row) return undefined;
    try {
      const plaintext = this.sealer.open(
        { keyId: row.key_id, value: row.sealed_tokens },
        { issuer: row.issuer, subject: row.subject, provider: row.provider },
      );
      return { row, tokens: JSON.parse(plaintext) as ProviderTokens };
    } catch (err) {
      this.log.error('connection_unreadable', { provider, reason: err instanceof SealError ? err.reason : 'parse' });
      return undefined;
    }
  }

  list(owner: Owner): Promise<ConnectionRow[]> {
    return this.store.connections.list(owner);
  }

  touch(owner: Owner, provider: string): Promise<void> {
    return this.store.connections.touch(owner, provider);
  }

  /**
   * The caller's connection with tokens fit for use: refreshed first when near expiry (one refresh
   * per connection across every process), or why it cannot be used.
   * @throws {ProviderError} `unavailable` when the provider cannot be reached to refresh.
   */
  async usable(owner: Owner, provider: Provider): Promise<Usable> {
    const connection = await this.open(owner, provider.id);
    if (!connection) return { kind: 'none' };
    if (connection.row.status === 'reauth_required') return { kind: 'reauth_required', row: connection.row };
    if (!this.#needsRefresh(connection.tokens, provider)) return { kind: 'ok', connection };
    const key = `${owner.issuer}\0${owner.subject}\0${provider.id}`;
    let flight = this.#inflight.get(key);
    if (!flight) {
      // Shutting down: a refresh started now might not be stored before the database closes.
      if (this.#closing)
        throw new ProviderError('unavailable', `This server is restarting; try again in a moment.`, 'refresh refused during shutdown');
      flight = this.#refreshAcrossProcesses(owner, provider).finally(() => this.#inflight.delete(key));
      this.#inflight.set(key, flight);
    }
    return flight;
  }

  /**
   * Refuses new refreshes and resolves when every refresh this process started has been stored
   * (or failed), for shutdown.
   */
  async drain(): Promise<void> {
    this.#closing = true;
    while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight.values()]);
  }

  /** The provider rejected the stored token (HTTP 401): keep the row, ask the user again. */
  async markReauthRequired(owner: Owner, provider: string, reason: string): Promise<void> {
    if (await this.store.connections.markReauthRequired(owner, provider, reason)) {
      await this.#audit('reauth_required', owner, provider, reason);
      this.log.info('connection_reauth_required', { provider, reason });
    }
  }

  #needsRefresh(tokens: ProviderTokens, provider: Provider): boolean {
    return tokens.expiresAt !== undefined && tokens.expiresAt - Date.now() <= provider.refreshSkewMs;
  }

  async #refreshAcrossProcesses(owner: Owner, provider: Provider): Promise<Usable> {
    const holder = randomId();
    const deadline = Date.now() + this.#waitMs;
    for (;;) {
      // Re-read every time: another process may have refreshed (or given up) meanwhile.
      const latest = await this.open(owner, provider.id);
      if (!latest) return { kind: 'none' };
      if (latest.row.status === 'reauth_required') return { kind: 'reauth_required', row: latest.row };
      if (!this.#needsRefresh(latest.tokens, provider)) return { kind: 'ok', connection: latest };
      if (await this.store.leases.acquire(owner, provider.id, holder, this.#leaseMs)) {
        // Renew while the provider call runs, so a slow provider never lets a second holder in.
        const renewal = setInterval(
          () => void this.store.leases.renew(owner, provider.id, holder, this.#leaseMs).catch(() => undefined),
          this.#leaseMs / 3,
        );
        renewal.unref();
        try {
          // Re-read under the lease: the previous holder may have finished between our read and our acquire.
          const current = await this.open(owner, provider.id);
          if (!current) return { kind: 'none' };
          if (current.row.status === 'reauth_required') return { kind: 'reauth_required', row: current.row };
          if (!this.#needsRefresh(current.tokens, provider)) return { kind: 'ok', connection: current };
          return await this.#refreshHoldingLease(owner, provider, current);
        } finally {
          clearInterval(renewal);
          await this.store.leases.release(owner, provider.id, holder).catch(() => undefined);
        }
      }
      if (Date.now() > deadline)
        throw new ProviderError(
          'unavailable',
          `Renewing the ${provider.displayName} access is taking too long; try again in a moment.`,
          'refresh lease wait timed out',
        );
      await sleep(this.#pollMs);
    }
  }

  async #refreshHoldingLease(owner: Owner, provider: Provider, latest: OpenConnection): Promise<Usable> {
    let next: ProviderTokens;
    try {
      next = await provider.refresh(latest.tokens);
    } catch (err) {
      const code = err instanceof ProviderError ? err.code : 'unknown';
      await this.#audit('refresh_failed', owner, provider.id, code);
      if (code !== 'invalid_grant') throw err;
      // A lost race looks exactly like a dead token: re-read before judging, and never delete.
      const reread = await this.open(owner, provider.id);
      if (reread && reread.row.sealed_tokens !== latest.row.sealed_tokens && !this.#needsRefresh(reread.tokens, provider))
        return { kind: 'ok', connection: reread };
      await this.markReauthRequired(owner, provider.id, 'refresh_rejected');
      const row = await this.store.connections.find(owner, provider.id);
      return row ? { kind: 'reauth_required', row } : { kind: 'none' };
    }
    // The old refresh token is already dead upstream: store the new pair before anything uses it.
    const sealed = this.#seal(owner, provider.id, next);
    const write = { key_id: sealed.keyId, sealed_tokens: sealed.value, scopes: next.scopes.join(' ') };
    let stored = await this.#whileStoreComesBack(() =>
      this.store.connections.replaceTokens(owner, provider.id, latest.row.sealed_tokens, write),
    );
    if (!stored) {
      // The row changed under us. If it still holds the same tokens (re-encrypted by rotate-keys),
      // our new pair is the only live one: write it over the re-encrypted copy.
      const now = await this.#whileStoreComesBack(() => this.open(owner, provider.id));
      if (now && now.tokens.refreshToken === latest.tokens.refreshToken && now.tokens.accessToken === latest.tokens.accessToken) {
        stored = await this.#whileStoreComesBack(() =>
          this.store.connections.replaceTokens(owner, provider.id, now.row.sealed_tokens, write),
        );
      }
    }
    if (!stored) this.log.warn('refresh_write_conflict', { provider: provider.id });
    else {
      await this.#audit('connection_refreshed', owner, provider.id);
      this.log.info('connection_refreshed', { provider: provider.id });
    }
    const current = await this.open(owner, provider.id);
    return current ? { kind: 'ok', connection: current } : { kind: 'none' };
  }

  /**
   * Runs a store write that must not be lost — the provider already rotated the tokens it holds —
   * retrying while the database is away, for as long as the lease we hold lasts (it is renewed
   * meanwhile, so nobody else refreshes with the dead refresh token).
   */
  async #whileStoreComesBack<T>(write: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.#leaseMs;
    for (let delay = 100; ; delay = Math.min(delay * 2, 2_000)) {
      try {
        return await write();
      } catch (err) {
        if (!(err instanceof StoreUnavailableError) || Date.now() + delay > deadline) throw err;
        this.log.warn('refresh_write_retry', { delayMs: delay });
        await sleep(delay);
      }
    }
  }

  /** The audit trail is a record, not a gate: a failed write is logged and the call goes on. */
  async #audit(event: AuditEvent, owner: Owner, provider: string, detail?: string): Promise<void> {
    await this.store.audit
      .record(event, owner, provider, detail)
      .catch((err: unknown) => this.log.warn('audit_write_failed', { event, message: err instanceof Error ? err.message : String(err) }));
  }

  /** Revokes upstream where the provider allows it, then deletes locally whatever the provider said. */
  async disconnect(owner: Owner, provider: Provider): Promise<DisconnectOutcome> {
    // Revocation needs a live token (GitHub refuses expired ones): refresh first if we can.
    const usable = await this.usable(owner, provider).catch(() => undefined);
    const connection = usable?.kind === 'ok' ? usable.connection : await this.open(owner, provider.id);
    let revoked = false;
    let revokeError: string | undefined;
    if (connection) {
      try {
        ({ revoked } = await provider.revoke(connection.tokens));
        if (!revoked) revokeError = `${provider.displayName} offers no way to revoke access from here`;
      } catch (err) {
        revokeError = err instanceof ProviderError ? err.message : 'the provider could not be reached';
        this.log.warn('revoke_failed', {
          provider: provider.id,
          code: err instanceof ProviderError ? err.code : 'unknown',
          detail: err instanceof ProviderError ? err.detail : undefined,
        });
      }
    }
    const deleted = await this.store.connections.delete(owner, provider.id);
    if (deleted)
      await this.#audit('connection_revoked', owner, provider.id, revoked ? 'revoked upstream' : `local delete only: ${revokeError ?? ''}`);
    return { deleted, revoked, ...(revokeError ? { revokeError } : {}) };
  }
}
