/** Every line `npm run rotate-keys` shows a person. */
import type { RotationReport as RotationSummary } from './report.js';

export function rotationText(r: RotationSummary): string {
  const c = r.clientSecrets;
  const lines = [
    `Re-encrypted ${r.resealed} connection(s) under key "${r.currentKeyId}".`,
    `Re-encrypted ${c.resealed} upstream client secret(s) (the broker's registrations at auth: mcp upstreams) under key "${r.currentKeyId}".`,
    r.skippedConcurrent + c.skippedConcurrent
      ? `${r.skippedConcurrent + c.skippedConcurrent} changed while rotating (already under the current key).`
      : '',
    r.unreadable
      ? `${r.unreadable} connection(s) sealed under a key no longer in TOKEN_ENCRYPTION_KEYS: add that key back and run again.`
      : '',
    c.unreadable
      ? `${c.unreadable} upstream client secret(s) sealed under a key no longer in TOKEN_ENCRYPTION_KEYS (${c.unreadableIssuers.join(', ')}): ` +
        'add that key back and run again. Otherwise the broker forgets such a registration and registers anew at that ' +
        'authorization server the next time an instance sets that upstream up; tokens issued to the old registration may ' +
        'then stop refreshing, and their users are asked to reconnect.'
      : '',
    `Keys in use: ${r.keysInUse.map((k) => `${k.key_id || '(none)'} (${k.n})`).join(', ') || 'none'}.`,
    r.olderKeysRemovable ? 'Every row uses the current key: older keys can be removed from the ring.' : '',
  ];
  return lines.filter(Boolean).join('\n') + '\n';
}

/** The `keys_rotated` audit detail: counts and the key id, never a secret. */
export function rotationAuditDetail(r: RotationSummary): string {
  const c = r.clientSecrets;
  return `resealed ${r.resealed}, unreadable ${r.unreadable}; client secrets resealed ${c.resealed}, unreadable ${c.unreadable}; under ${r.currentKeyId}`;
}
