import { createHash, randomBytes, randomInt, randomUUID } from 'node:crypto';

/** A URL-safe random handle with `bytes` bytes of entropy (default 256 bits). */
export function randomHandle(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

/** `bytes` random bytes in the given text encoding (keys and secrets that are stored as text). */
export function randomText(bytes: number, encoding: 'base64url' | 'base64' | 'hex'): string {
  return randomBytes(bytes).toString(encoding);
}

/** A uniformly random integer in [0, `below`). */
export function randomBelow(below: number): number {
  return randomInt(below);
}

/** A random identifier for rows that are referenced from signed state (128 bits of entropy). */
export function randomId(): string {
  return randomUUID();
}

/** Hex SHA-256, used to store handles so that a leaked database does not leak live links or sessions. */
export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/** base64url SHA-256, e.g. for digests carried in signed state. */
export function sha256Base64url(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('base64url');
}
