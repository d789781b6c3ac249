import type { Principal } from '../auth/principal.js';
import { SealError, type Sealer } from '../crypto/index.js';
import type { Logger } from '../log.js';
import { ProviderError, type Provider, type ProviderAccount, type ProviderTokens } from '../providers/provider.js';
import type { AuditEvent, ConnectionRow, Store } from '../store/index.js';
import {
  changeWithEvent,
  connectionEventData,
  noEvents,
  transactionWithEvents,
  type DisconnectActor,
  type EventSink,
} from '../events/index.js';
import { needsRefresh, TokenRefresher, type OpenConnection, type RefreshOptions, type Usable } from './refresh.js';

/**
 * Whose tokens: always a {@link Principal} (made only from a verified token or session), so no
 * caller can hand this service an issuer/subject taken from input.
 */
type Owner = Principal;

export interface DisconnectOutcome {
  /** A connection existed and was deleted locally. */
  deleted: boolean;
  /** Whether the provider confirmed the grant is gone; false with `revokeError` when it did not. */
  revoked: boolean;
  revokeError?: string;
}

export type { DisconnectActor } from '../events/index.js';

export type ConnectionServiceOptions = RefreshOptions & {
  /** Where connection events go (the webhook outbox), written in the transaction of each change. */
  events?: EventSink;
};

/**
 * The only way tokens go in and out of the store: sealed on the way in (bound to the principal and
 * provider), opened on the way out, refreshed once across every process when near expiry, and
 * never deleted because a refresh failed — a connection the provider stopped accepting is marked
 * `reauth_required` and kept.
 */
export class ConnectionService {
  readonly #refresher: TokenRefresher;
  readonly #events: EventSink;

  /** Where this service's events go; the token exchange writes `exchange.refused` to the same sink. */
  get events(): EventSink {
    return this.#events;
  }

  constructor(
    private readonly store: Store,
    private readonly sealer: Sealer,
    private readonly log: Logger,
    options: ConnectionServiceOptions = {},
  ) {
    const vault = {
      open: (owner: Owner, provider: string) => this.open(owner, provider),
      seal: (owner: Owner, provider: string, tokens: ProviderTokens) => this.#seal(owner, provider, tokens),
      markReauthRequired: (owner: Owner, provider: string, reason: string) => this.markReauthRequired(owner, provider, reason),
      audit: (event: AuditEvent, owner: Owner, provider: string, detail?: string) => this.#audit(event, owner, provider, detail),
    };
    this.#events = options.events ?? noEvents;
    this.#refresher = new TokenRefresher(store, vault, log, { ...options, events: this.#events });
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
    return transactionWithEvents(this.store, this.#events, async (tx, emit) => {
      // An account the provider cannot name (ProviderAccount.unverified) cannot be compared: neither check applies.
      if (refuseShared && !account.unverified && (await tx.connections.othersWithAccount(principal, provider, account.id)).length > 0) {
        await tx.audit.record('binding_refused', principal, provider, 'account already linked to another principal');
        if (pendingId) await tx.pending.settle(pendingId, 'denied', 'refused_shared_account');
        return 'refused_shared_account';
      }
      // "More access" and "reconnect" come back through the same callback as a first connect: an
      // account switch there would silently move every tool call to another upstream identity.
      const existing = refuseAccountChange && !account.unverified ? await tx.connections.find(principal, provider) : undefined;
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
      await emit('connection.created', {
        issuer: principal.issuer,
        subject: principal.subject,
        provider,
        login: account.login,
        scopes: tokens.scopes,
      });
      if (pendingId) await tx.pending.settle(pendingId, 'completed');
      return 'saved';
    });
  }

  find(owner: Owner, provider: string): Promise<ConnectionRow | undefined> {
    return this.store.connections.find(owner, provider);
  }

  /**
   * Loads and decrypts the connection (`read`: the row as this request already read it); a row
   * that cannot be opened counts as absent.
   */
  async open(owner: Owner, provider: string, read?: { row: ConnectionRow | undefined }): Promise<OpenConnection | undefined> {
    const row = read ? read.row : await this.store.connections.find(owner, provider);
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
   * per connection across every process), or why it cannot be used. `read`: the row as this
   * request already read it (src/connections/resolve.ts, ConnectionRead).
   * @throws {ProviderError} `unavailable` when the provider cannot be reached to refresh.
   */
  async usable(owner: Owner, provider: Provider, read?: { row: ConnectionRow | undefined }): Promise<Usable> {
    const connection = await this.open(owner, provider.id, read);
    if (!connection) return { kind: 'none' };
    if (connection.row.status === 'reauth_required') return { kind: 'reauth_required', row: connection.row };
    if (!needsRefresh(connection.tokens, provider)) return { kind: 'ok', connection };
    return this.#refresher.refresh(owner, provider);
  }

  /**
   * After a server refused `rejected` (HTTP 401) although it had not expired: the connection
   * refreshed once through the same single-flight refresh (or the pair another caller refreshed
   * meanwhile); undefined when there is no refresh token to try.
   * @throws {ProviderError} `unavailable` when the provider cannot be reached to refresh.
   */
  async refreshRejected(owner: Owner, provider: Provider, rejected: ProviderTokens): Promise<Usable | undefined> {
    if (!rejected.refreshToken) return undefined;
    return this.#refresher.refresh(owner, provider, (tokens) => tokens.accessToken === rejected.accessToken);
  }

  /**
   * Refuses new refreshes and resolves when every refresh this process started has been stored
   * (or failed), for shutdown.
   */
  drain(): Promise<void> {
    return this.#refresher.drain();
  }

  /** The provider rejected the stored token (HTTP 401): keep the row, ask the user again. */
  async markReauthRequired(owner: Owner, provider: string, reason: string): Promise<void> {
    const marked = await changeWithEvent(this.store, this.#events, 'connection.reauth_required', async (repositories, emit) => {
      if (!(await repositories.connections.markReauthRequired(owner, provider, reason))) return false;
      const row = emit && (await repositories.connections.find(owner, provider));
      if (emit && row) await emit('connection.reauth_required', connectionEventData(row));
      return true;
    });
    if (marked) {
      await this.#audit('reauth_required', owner, provider, reason);
      this.log.info('connection_reauth_required', { provider, reason });
    }
  }

  /** The audit trail is a record, not a gate: a failed write is logged and the call goes on. */
  async #audit(event: AuditEvent, owner: Owner, provider: string, detail?: string): Promise<void> {
    await this.store.audit
      .record(event, owner, provider, detail)
      .catch((err: unknown) => this.log.warn('audit_write_failed', { event, message: err instanceof Error ? err.message : String(err) }));
  }

  /**
   * Revokes upstream where the provider allows it, then deletes locally whatever the provider said.
   * The user's own disconnect reports `connection.deleted`, an operator's (`npm run admin --
   * connections revoke`) `connection.revoked`, in the deleting transaction.
   */
  async disconnect(owner: Owner, provider: Provider, by: DisconnectActor = { kind: 'user' }): Promise<DisconnectOutcome> {
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
          errorCode: err instanceof ProviderError ? err.code : 'unknown',
          detail: err instanceof ProviderError ? err.detail : undefined,
        });
      }
    }
    const type = by.kind === 'admin' ? 'connection.revoked' : 'connection.deleted';
    const deleted = await changeWithEvent(this.store, this.#events, type, async (repositories, emit) => {
      const row = emit && (await repositories.connections.find(owner, provider.id));
      const gone = await repositories.connections.delete(owner, provider.id);
      if (gone && emit && row) {
        const data = { ...connectionEventData(row), revokedUpstream: revoked };
        if (by.kind === 'admin') await emit('connection.revoked', { ...data, by });
        else await emit('connection.deleted', { ...data, by });
      }
      return gone;
    });
    if (deleted) {
      const outcome = revoked ? 'revoked upstream' : `local delete only: ${revokeError ?? (connection ? '' : 'tokens unreadable')}`;
      if (by.kind === 'admin') await this.#audit('connection_revoked_by_admin', owner, provider.id, `by ${by.actor}: ${outcome}`);
      else await this.#audit('connection_revoked', owner, provider.id, outcome);
    }
    return { deleted, revoked, ...(revokeError ? { revokeError } : {}) };
  }
}
