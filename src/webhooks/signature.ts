import { hmacSha256Base64 } from '../crypto/index.js';

/**
 * The Standard Webhooks `webhook-signature` value: `v1,` and the base64 HMAC-SHA256 of
 * `{id}.{timestamp}.{body}`, keyed with the decoded bytes of the endpoint's `whsec_` secret.
 */
export function webhookSignature(key: Buffer, id: string, timestampSeconds: number, body: string): string {
  return `v1,${hmacSha256Base64(key, `${id}.${timestampSeconds}.${body}`)}`;
}
