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
 * The activation code's alphabet: digits and capitals without the ones people confuse (0/O, 1/I/L).
 * 31 symbols, so 8 of them make 31^8 ≈ 8.5 × 10^11 codes (about 2^39.6).
 */
export const ACTIVATION_ALPHABET = '23456789ABCDEFGHJKMNPQRSTUVWXYZ';
export const ACTIVATION_CODE_LENGTH = 8;

/**
 * A typed code in its canonical form (8 symbols, no dash), or undefined when it cannot be one:
 * surrounding spaces, any case, and one dash or space between its halves are accepted.
 */
export function normalizeActivationCode(input: string): string | undefined {
  const m = /^([0-9A-Z]{4})[-\s]?([0-9A-Z]{4})$/.exec(input.trim().toUpperCase());
  if (!m) return undefined;
  const code = m[1]! + m[2]!;
  return [...code].every((c) => ACTIVATION_ALPHABET.includes(c)) ? code : undefined;
}

/**
 * Connect links. Each pending connection has a random id (carried in the signed requestState) and
 * a link secret derived from it under a link-only key: 256 bits, stored only as a hash, so the same
 * link can be shown again on a repeat without keeping the secret anywhere.
 *
 * Each link also has a short form for another device: `/activate` and an 8-symbol code, derived
 * from the id under a key of its own (so a repeat shows the same code) and stored only as a keyed
 * hash (a copy of the database cannot run through the 2^40 codes to find it). The code opens the
 * link's consent page once, for the link's principal only (src/connect/activate.ts).
 */
export class ConnectLinks {
  readonly #key: Buffer;
  readonly #codeKey: Buffer;
  readonly #codeHashKey: Buffer;
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
    this.#codeKey = deriveKey(brokerSecret, 'activation-code');
    this.#codeHashKey = deriveKey(brokerSecret, 'activation-code-hash');
    this.#maxOpen = options.maxOpenPerUser ?? 20;
    this.#onCancelled = options.onCancelled ?? (() => undefined);
  }

  #handle(pendingId: string): string {
    return mac(this.#key, pendingId);
  }

  /** The canonical activation code of a pending id: 8 symbols of the alphabet from a MAC of the id. */
  #code(pendingId: string): string {
    let n = BigInt(`0x${Buffer.from(mac(this.#codeKey, pendingId), 'base64url').toString('hex')}`);
    const base = BigInt(ACTIVATION_ALPHABET.length);
    let code = '';
    // 256 bits reduced to 31^8 values: the bias is below 2^-200.
    for (let i = 0; i < ACTIVATION_CODE_LENGTH; i++) {
      code += ACTIVATION_ALPHABET[Number(n % base)];
      n /= base;
    }
    return code;
  }

  #codeHash(code: string): string {
    return mac(this.#codeHashKey, code);
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
        activation_hash: this.#codeHash(this.#code(id)),
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

  /** The link's secret handle, for the consent page's form (the page a code opens carries it like the link's own). */
  handle(pending: Pick<PendingConnection, 'id'>): string {
    return this.#handle(pending.id);
  }

  /** The link's activation code as shown to a person: two groups of four, `K7QM-4XPD`. The same on every repeat. */
  activationCode(pending: Pick<PendingConnection, 'id'>): string {
    const code = this.#code(pending.id);
    return `${code.slice(0, 4)}-${code.slice(4)}`;
  }

  /** Where a person types the code: `<PUBLIC_URL>/activate`. */
  activateUrl(): string {
    return new URL('/activate', this.publicUrl).href;
  }

  /**
   * The open, unexpired pending connection whose unused code this is, of any principal (the caller
   * checks whose); undefined when the input is not a code, matches nothing, or matches more than one.
   */
  async byActivationCode(input: string): Promise<PendingConnection | undefined> {
    const code = normalizeActivationCode(input);
    if (!code) return undefined;
    const rows = await this.store.pending.byActivationHash(this.#codeHash(code));
    return rows.length === 1 ? rows[0] : undefined;
  }

  /** Uses the pending connection's code up: true for the one caller that did. */
  redeemActivationCode(pending: Pick<PendingConnection, 'id'>): Promise<boolean> {
    return this.store.pending.redeemActivation(pending.id, this.#codeHash(this.#code(pending.id)));
  }

  /** Finds the pending connection a link handle points at (any status; callers decide). */
  async resolve(handle: string): Promise<PendingConnection | undefined> {
    if (!/^[A-Za-z0-9_-]{43}$/.test(handle)) return undefined;
    return this.store.pending.byLinkHash(sha256Hex(handle));
  }
}
