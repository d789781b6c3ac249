import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

const VERSION = 'v1';

/** What a sealed value is bound to: a ciphertext moved to another row fails to open. */
export interface SealContext {
  issuer: string;
  subject: string;
  provider: string;
}

export interface Sealed {
  keyId: string;
  /** `v1.<iv>.<ciphertext>.<tag>`, base64url parts. */
  value: string;
}

export type OpenFailure = 'unknown_key' | 'malformed' | 'tampered';

export class SealError extends Error {
  override name = 'SealError';
  constructor(readonly reason: OpenFailure) {
    super(`sealed value could not be opened: ${reason}`);
  }
}

function aad(ctx: SealContext): Buffer {
  return Buffer.from(['mcp-connect-broker/token', ctx.issuer, ctx.subject, ctx.provider].map((p) => `${p.length}:${p}`).join(';'), 'utf8');
}

/** A key id derived from the key itself, so two different keys never share an id. */
export function keyIdFor(key: Buffer): string {
  return 'k' + createHash('sha256').update(key).digest('hex').slice(0, 12);
}

/**
 * AES-256-GCM sealing of provider tokens. The row's principal and provider are the additional
 * authenticated data, and the key id is stored beside the ciphertext for rotation.
 */
export class Sealer {
  readonly keyId: string;
  readonly #keys: Map<string, Buffer>;

  /**
   * @param keys ordered key ring; the first key seals, every key may open. A bare Buffer gets an id
   *   derived from the key itself.
   */
  constructor(keys: Array<Buffer | { id: string; key: Buffer }>) {
    if (keys.length === 0) throw new RangeError('Sealer needs at least one key');
    this.#keys = new Map();
    for (const entry of keys) {
      const { id, key } = Buffer.isBuffer(entry) ? { id: keyIdFor(entry), key: entry } : entry;
      if (key.length !== 32) throw new RangeError('AES-256-GCM keys must be 32 bytes');
      if (this.#keys.has(id)) throw new RangeError(`duplicate key id ${id}`);
      this.#keys.set(id, key);
    }
    const first = keys[0]!;
    this.keyId = Buffer.isBuffer(first) ? keyIdFor(first) : first.id;
  }

  /** Whether `keyId` is in the ring (so rows sealed under it can still be opened). */
  hasKey(keyId: string): boolean {
    return this.#keys.has(keyId);
  }

  seal(plaintext: string, ctx: SealContext): Sealed {
    const key = this.#keys.get(this.keyId)!;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(aad(ctx));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const tag = cipher.getAuthTag();
    return { keyId: this.keyId, value: [VERSION, iv.toString('base64url'), ct.toString('base64url'), tag.toString('base64url')].join('.') };
  }

  /** @throws {SealError} when the key is unknown or the value was altered or moved. */
  open(sealed: Sealed, ctx: SealContext): string {
    const key = this.#keys.get(sealed.keyId);
    if (!key) throw new SealError('unknown_key');
    const parts = sealed.value.split('.');
    if (parts.length !== 4 || parts[0] !== VERSION) throw new SealError('malformed');
    const iv = Buffer.from(parts[1]!, 'base64url');
    const tag = Buffer.from(parts[3]!, 'base64url');
    if (iv.length !== 12 || tag.length !== 16) throw new SealError('malformed');
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: 16 });
      decipher.setAAD(aad(ctx));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(Buffer.from(parts[2]!, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      throw new SealError('tampered');
    }
  }
}
