import { hkdfSync } from 'node:crypto';

/**
 * Derives an independent 32-byte key for one purpose from BROKER_SECRET, so that a MAC made for
 * one purpose (say a CSRF token) can never be replayed as another (say a connect link).
 */
export function deriveKey(secret: Buffer, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), `mcp-connect-broker/${purpose}`, 32));
}
