import type { Principal } from '../auth/principal.js';
import { SealError, type Sealer } from '../crypto/index.js';
import type { Logger } from '../log.js';
import type { Provider, ProviderAccount, ProviderTokens } from '../providers/provider.js';
import { ProviderError } from '../providers/provider.js';
import type { ConnectionRow, Store } from '../store/index.js';

export interface OpenConnection {
  row: ConnectionRow;
  tokens: ProviderTokens;
}

export interface DisconnectOutcome {
  /** A connection existed and was deleted locally. */
  deleted: boolean;
  /** Whether the provider confirmed the grant is gone; false with `revokeError` when it did not. */
  revoked: boolean;
  revokeError?: string;
}

/**
 * The only way tokens go in and out of the store: sealed on the way in (bound to the principal and
 * provider), opened on the way out. Nothing here returns tokens to anything but a provider call.
 */
export class ConnectionService {
  constructor(
    private readonly store: Store,
    private readonly sealer: Sealer,
    private readonly log: Logger,
  ) {}

  save(principal: Principal, provider: string, account: ProviderAccount, tokens: ProviderTokens): void {
    const sealed = this.sealer.seal(JSON.stringify(tokens), { issuer: principal.issuer, subject: principal.subject, provider });
    this.store.connections.save({
      issuer: principal.issuer,
      subject: principal.subject,
      provider,
      account_id: account.id,
      account_login: account.login,
      scopes: tokens.scopes.join(' '),
      key_id: sealed.keyId,
      sealed_tokens: sealed.value,
    });
  }

  find(principal: Principal, provider: string): ConnectionRow | undefined {
    return this.store.connections.find(principal, provider);
  }

  /** Loads and decrypts the principal's connection; a row that cannot be opened counts as absent. */
  open(principal: Principal, provider: string): OpenConnection | undefined {
    const row = this.store.connections.find(principal, provider);
    if (!row) return undefined;
    try {
      const plaintext = this.sealer.open({ keyId: row.key_id, value: row.sealed_tokens }, { issuer: row.issuer, subject: row.subject, provider: row.provider });
      return { row, tokens: JSON.parse(plaintext) as ProviderTokens };
    } catch (err) {
      this.log.error('connection_unreadable', { provider, reason: err instanceof SealError ? err.reason : 'parse' });
      return undefined;
    }
  }

  list(principal: Principal): ConnectionRow[] {
    return this.store.connections.list(principal);
  }

  touch(principal: Principal, provider: string): void {
    this.store.connections.touch(principal, provider);
  }

  /** Revokes upstream, then deletes locally whatever the provider said: a user who disconnects is disconnected. */
  async disconnect(principal: Principal, provider: Provider): Promise<DisconnectOutcome> {
    const connection = this.open(principal, provider.id);
    let revoked = false;
    let revokeError: string | undefined;
    if (connection) {
      try {
        await provider.revoke(connection.tokens);
        revoked = true;
      } catch (err) {
        revokeError = err instanceof ProviderError ? err.message : 'the provider could not be reached';
        this.log.warn('revoke_failed', { provider: provider.id, code: err instanceof ProviderError ? err.code : 'unknown' });
      }
    }
    const deleted = this.store.connections.delete(principal, provider.id);
    return { deleted, revoked, ...(revokeError ? { revokeError } : {}) };
  }
}
