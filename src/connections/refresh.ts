import { setTimeout as sleep } from 'node:timers/promises';
import type { Principal } from '../auth/principal.js';
import { randomId } from '../crypto/index.js';
import type { Logger } from '../log.js';
import { ProviderError, type Provider, type ProviderTokens } from '../providers/provider.js';
import { StoreUnavailableError, type AuditEvent, type ConnectionRow, type Store } from '../store/index.js';
import { metrics } from '../observability/metrics.js';
import { changeWithEvent, noEvents, type EventSink } from '../events/index.js';
import { scopeList } from '../providers/scopes.js';

export interface OpenConnection {
  row: ConnectionRow;
  tokens: ProviderTokens;
}

/** What a tool can do with the caller's connection right now. */
export type Usable = { kind: 'ok'; connection: OpenConnection } | { kind: 'reauth_required'; row: ConnectionRow } | { kind: 'none' };

export interface RefreshOptions {
  /** How long a refresh lease is held at most (longer than the slowest token call). */
  leaseMs?: number;
  /** How long a caller waits for another process's refresh before giving up. */
  waitMs?: number;
  /** The provider timeout, from which the lease and the wait are derived. */
  providerTimeoutMs?: number;
  pollMs?: number;
  /** Where `connection.refreshed` goes, written with the new tokens. */
  events?: EventSink;
}

/** What the refresh needs from the connection service: reading, sealing and recording, nothing else. */
export interface RefreshVault {
  open(owner: Principal, provider: string): Promise<OpenConnection | undefined>;
  seal(owner: Principal, provider: string, tokens: ProviderTokens): { keyId: string; value: string };
  markReauthRequired(owner: Principal, provider: string, reason: string): Promise<void>;
  audit(event: AuditEvent, owner: Principal, provider: string, detail?: string): Promise<void>;
}

export function needsRefresh(tokens: ProviderTokens, provider: Provider): boolean {
  return tokens.expiresAt !== undefined && tokens.expiresAt - Date.now() <= provider.refreshSkewMs;
}

/**
 * Refresh-with-lease: one provider refresh per connection across every process (a lease in the
 * store, renewed while the provider call runs) and one per connection within this process (a
 * shared in-flight promise). A token the provider stopped accepting is marked `reauth_required`,
 * never deleted.
 */
export class TokenRefresher {
  readonly #inflight = new Map<string, Promise<Usable>>();
  #closing = false;
  readonly #leaseMs: number;
  readonly #waitMs: number;
  readonly #pollMs: number;
  readonly #events: EventSink;

  constructor(
    private readonly store: Store,
    private readonly vault: RefreshVault,
    private readonly log: Logger,
    options: RefreshOptions = {},
  ) {
    // A lease must outlive the slowest refresh (an oidc provider may need discovery first), and a
    // waiter must outwait the lease.
    const slowest = 2 * (options.providerTimeoutMs ?? 10_000) + 5_000;
    this.#leaseMs = options.leaseMs ?? Math.max(30_000, slowest);
    this.#waitMs = options.waitMs ?? this.#leaseMs + 5_000;
    this.#pollMs = options.pollMs ?? 50;
    this.#events = options.events ?? noEvents;
  }

  /**
   * Refreshes `owner`'s connection to `provider`, joining a refresh this process already runs.
   * `stale` marks tokens as due although they have not expired (an upstream refused them).
   */
  refresh(owner: Principal, provider: Provider, stale?: (tokens: ProviderTokens) => boolean): Promise<Usable> {
    const key = `${owner.issuer}\0${owner.subject}\0${provider.id}`;
    let flight = this.#inflight.get(key);
    if (!flight) {
      // Shutting down: a refresh started now might not be stored before the database closes.
      if (this.#closing)
        throw new ProviderError('unavailable', `This server is restarting; try again in a moment.`, 'refresh refused during shutdown');
      flight = this.#refreshAcrossProcesses(owner, provider, stale).finally(() => this.#inflight.delete(key));
      this.#inflight.set(key, flight);
    }
    return flight;
  }

  /** Refuses new refreshes and resolves when every refresh this process started has been stored (or failed). */
  async drain(): Promise<void> {
    this.#closing = true;
    while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight.values()]);
  }

  /** Until a lease is ours or nothing is left to do: look, take the lease, refresh under it, or wait. */
  async #refreshAcrossProcesses(owner: Principal, provider: Provider, stale?: (tokens: ProviderTokens) => boolean): Promise<Usable> {
    const holder = randomId();
    const deadline = Date.now() + this.#waitMs;
    for (;;) {
      // Re-read every time: another process may have refreshed (or given up) meanwhile.
      const done = this.#withoutRefresh(await this.vault.open(owner, provider.id), provider, stale);
      if (done) return done;
      const refreshed = await this.#underLease(owner, provider, holder, async () => {
        // Re-read under the lease: the previous holder may have finished between our read and our acquire.
        const current = await this.vault.open(owner, provider.id);
        return this.#withoutRefresh(current, provider, stale) ?? (await this.#refreshHoldingLease(owner, provider, current!));
      });
      if (refreshed) return refreshed;
      this.#refuseLongerWait(deadline, provider);
      await sleep(this.#pollMs);
    }
  }

  /** The answer when `latest` needs no refresh (none, reauth required, still fresh); undefined when it does. */
  #withoutRefresh(latest: OpenConnection | undefined, provider: Provider, stale?: (tokens: ProviderTokens) => boolean): Usable | undefined {
    if (!latest) return { kind: 'none' };
    if (latest.row.status === 'reauth_required') return { kind: 'reauth_required', row: latest.row };
    if (!needsRefresh(latest.tokens, provider) && !stale?.(latest.tokens)) return { kind: 'ok', connection: latest };
    return undefined;
  }

  /** Runs `work` holding the connection's refresh lease, renewed meanwhile; undefined when another process holds it. */
  async #underLease(owner: Principal, provider: Provider, holder: string, work: () => Promise<Usable>): Promise<Usable | undefined> {
    if (!(await this.store.leases.acquire(owner, provider.id, holder, this.#leaseMs))) return undefined;
    // Renew while the provider call runs, so a slow provider never lets a second holder in.
    const renewal = setInterval(
      () => void this.store.leases.renew(owner, provider.id, holder, this.#leaseMs).catch(() => undefined),
      this.#leaseMs / 3,
    );
    renewal.unref();
    try {
      return await work();
    } finally {
      clearInterval(renewal);
      await this.store.leases.release(owner, provider.id, holder).catch(() => undefined);
    }
  }

  #refuseLongerWait(deadline: number, provider: Provider): void {
    if (Date.now() > deadline)
      throw new ProviderError(
        'unavailable',
        `Renewing the ${provider.displayName} access is taking too long; try again in a moment.`,
        'refresh lease wait timed out',
      );
  }

  /** The refresh proper, as its steps: ask the provider, store the rotated pair, record it, hand back what is stored. */
  async #refreshHoldingLease(owner: Principal, provider: Provider, latest: OpenConnection): Promise<Usable> {
    const next = await this.#askProvider(owner, provider, latest);
    if (next.kind === 'answered') return next.usable;
    const stored = await this.#storeRotated(owner, provider, latest, next.tokens);
    await this.#recordRefreshed(owner, provider, stored);
    return this.#reopen(owner, provider);
  }

  /** The provider's new tokens, or, when it refused the refresh token, what the connection is now. */
  async #askProvider(
    owner: Principal,
    provider: Provider,
    latest: OpenConnection,
  ): Promise<{ kind: 'tokens'; tokens: ProviderTokens } | { kind: 'answered'; usable: Usable }> {
    try {
      const tokens = await provider.refresh(latest.tokens);
      metrics.tokenRefresh(provider.id, 'refreshed');
      return { kind: 'tokens', tokens };
    } catch (err) {
      const code = err instanceof ProviderError ? err.code : 'unknown';
      metrics.tokenRefresh(provider.id, code === 'invalid_grant' ? 'rejected' : 'failed');
      await this.vault.audit('refresh_failed', owner, provider.id, code);
      if (code !== 'invalid_grant') throw err;
      return { kind: 'answered', usable: await this.#judgeRejected(owner, provider, latest) };
    }
  }

  /** A lost race looks exactly like a dead token: re-read before judging, and never delete. */
  async #judgeRejected(owner: Principal, provider: Provider, latest: OpenConnection): Promise<Usable> {
    const reread = await this.vault.open(owner, provider.id);
    if (reread && reread.row.sealed_tokens !== latest.row.sealed_tokens && !needsRefresh(reread.tokens, provider))
      return { kind: 'ok', connection: reread };
    await this.vault.markReauthRequired(owner, provider.id, 'refresh_rejected');
    const row = await this.store.connections.find(owner, provider.id);
    return row ? { kind: 'reauth_required', row } : { kind: 'none' };
  }

  /** The old refresh token is already dead upstream: store the new pair before anything uses it. Whether it was written. */
  async #storeRotated(owner: Principal, provider: Provider, latest: OpenConnection, next: ProviderTokens): Promise<boolean> {
    const sealed = this.vault.seal(owner, provider.id, next);
    const write = { key_id: sealed.keyId, sealed_tokens: sealed.value, scopes: next.scopes.join(' ') };
    let stored = await this.#whileStoreComesBack(() => this.#replaceTokens(owner, provider, latest, latest.row.sealed_tokens, write));
    if (!stored) {
      // The row changed under us. If it still holds the same tokens (re-encrypted by rotate-keys),
      // our new pair is the only live one: write it over the re-encrypted copy.
      const now = await this.#whileStoreComesBack(() => this.vault.open(owner, provider.id));
      if (now && now.tokens.refreshToken === latest.tokens.refreshToken && now.tokens.accessToken === latest.tokens.accessToken) {
        stored = await this.#whileStoreComesBack(() => this.#replaceTokens(owner, provider, latest, now.row.sealed_tokens, write));
      }
    }
    return stored;
  }

  /** The compare-and-swap of the tokens, with its `connection.refreshed` event in the same transaction. */
  #replaceTokens(
    owner: Principal,
    provider: Provider,
    latest: OpenConnection,
    expected: string,
    write: { key_id: string; sealed_tokens: string; scopes: string },
  ): Promise<boolean> {
    return changeWithEvent(this.store, this.#events, 'connection.refreshed', async (repositories, emit) => {
      const replaced = await repositories.connections.replaceTokens(owner, provider.id, expected, write);
      if (replaced && emit)
        await emit('connection.refreshed', {
          issuer: owner.issuer,
          subject: owner.subject,
          provider: provider.id,
          login: latest.row.account_login,
          scopes: scopeList(write.scopes),
        });
      return replaced;
    });
  }

  async #recordRefreshed(owner: Principal, provider: Provider, stored: boolean): Promise<void> {
    if (!stored) return void this.log.warn('refresh_write_conflict', { provider: provider.id });
    await this.vault.audit('connection_refreshed', owner, provider.id);
    this.log.info('connection_refreshed', { provider: provider.id });
  }

  async #reopen(owner: Principal, provider: Provider): Promise<Usable> {
    const current = await this.vault.open(owner, provider.id);
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
}
