import { createHmac } from 'node:crypto';
import { constantTimeEqual } from './compare.js';

/** HMAC-SHA256 of `parts` joined unambiguously, base64url. */
export function mac(key: Buffer, ...parts: string[]): string {
  const h = createHmac('sha256', key);
  for (const part of parts) h.update(`${Buffer.byteLength(part)}:${part};`);
  return h.digest('base64url');
}

export function verifyMac(key: Buffer, tag: string, ...parts: string[]): boolean {
  return constantTimeEqual(mac(key, ...parts), tag);
}

/** Plain base64 HMAC-SHA256 of `data` (no framing): what Standard Webhooks' `v1` signatures are. */
export function hmacSha256Base64(key: Buffer, data: string): string {
  return createHmac('sha256', key).update(data, 'utf8').digest('base64');
}
