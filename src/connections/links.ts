import type { Principal } from '../auth/principal.js';
import { deriveKey, mac, randomId, sha256Hex } from '../crypto/index.js';
import { displayText } from '../http/display-text.js';
import type { PendingConnection, Store } from '../store/index.js';

/** The outcome reason of a link whose elicitation the client declined or cancelled: its page says so, not "already used". */
export const DECLINED_IN_CLIENT = 'declined_in_client';

export interface ConnectLinkOptions {
  /** Open links one principal may hold at once; past it, the oldest is cancelled. */
  maxOpenPerUser?: number;
  /** Told about links cancelled to make room, so calls held on them in this process answer at once. */
  onCancelled?: (pendingId: string) => void;
}

/**
 * Connect links. Each pending connection has a random id (carried in the signed requestState) and
 * a link secret derived from it under a link-only key: 256 bits, stored only as a hash, so the same
 * link can be shown again on a repeat without keeping the secret anywhere.
 */
export class ConnectLinks {
  readonly #key: Buffer;
  readonly #maxOpen: number;
  readonly #onCancelled: (pendingId: string) => void;

  constructor(
    private readonly store: Store,
    private readonly publicUrl: URL,
    brokerSecret: Buffer,
    private readonly ttlSeconds: number,
    options: ConnectLinkOptions = {},
  ) {
    this.#key = deriveKey(brokerSecret, 'connect-link');
    this.#maxOpen = options.maxOpenPerUser ?? 20;
    this.#onCancelled = options.onCancelled ?? (() => undefined);
  }

  #handle(pendingId: string): string {
    return mac(this.#key, pendingId);
  }

  /**
   * The principal's open link for the same provider, scopes, client and purpose if there is one
   * (shown again: the handle is derived from the id), else a new one.
   * @param scopes what to ask the provider for; undefined = the provider's defaults.
   * @param purpose why a tool asks, composed by the tool from validated arguments (never client text as such).
   * @param serviceId the service whose token exchange asks (src/exchange/), if any.
   */
  async create(
    principal: Principal,
    provider: string,
    clientName: string | undefined,
    scopes?: string[],
    purpose?: string,
    serviceId?: string,
  ): Promise<PendingConnection> {
    const id = randomId();
    const { pending, cancelled } = await this.store.pending.openOrCreate(
      {
        id,
        link_hash: sha256Hex(this.#handle(id)),
        issuer: principal.issuer,
        subject: principal.subject,
        provider,
        // Client-chosen text: nothing invisible (PostgreSQL refuses NUL; bidi controls disguise names).
        client_name: displayText(clientName) ?? null,
        scopes: scopes?.length ? scopes.join(' ') : null,
        purpose: displayText(purpose, 160) ?? null,
        ...(serviceId ? { service_id: serviceId } : {}),
        expires_at: Date.now() + this.ttlSeconds * 1000,
      },
      this.#maxOpen,
    );
    for (const cancelledId of cancelled) this.#onCancelled(cancelledId);
    return pending;
  }

  /** The page URL for a pending connection: nothing in it but the provider and the opaque handle. */
  url(pending: Pick<PendingConnection, 'id' | 'provider'>): string {
    const url = new URL(`/connect/${encodeURIComponent(pending.provider)}`, this.publicUrl);
    url.searchParams.set('req', this.#handle(pending.id));
    return url.href;
  }

  /** Finds the pending connection a link handle points at (any status; callers decide). */
  async resolve(handle: string): Promise<PendingConnection | undefined> {
    if (!/^[A-Za-z0-9_-]{43}$/.test(handle)) return undefined;
    return this.store.pending.byLinkHash(sha256Hex(handle));
  }
}
