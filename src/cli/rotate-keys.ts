import { loadConfigOrExit } from '../config/env.js';
import { Sealer, SealError } from '../crypto/index.js';
import { openStore, type Store } from '../store/index.js';

export interface RotationReport {
  currentKeyId: string;
  resealed: number;
  /** Rows changed by someone else between read and write (a refresh): they already use the current key. */
  skippedConcurrent: number;
  /** Rows sealed under a key that is no longer in the ring: they cannot be re-encrypted. */
  unreadable: number;
  keysInUse: Array<{ key_id: string; n: number }>;
}

/**
 * Re-encrypts every stored connection under the first key of the ring, in small transactions, while
 * the service keeps running: each row is rewritten only if unchanged since it was read, so a
 * concurrent refresh (which seals with the current key anyway) always wins.
 */
export async function rotateKeys(store: Store, sealer: Sealer, { batchSize = 200 } = {}): Promise<RotationReport> {
  let after = 0;
  let resealed = 0;
  let skippedConcurrent = 0;
  let unreadable = 0;
  for (;;) {
    const batch = await store.connections.sealedUnderOtherKeys(sealer.keyId, after, batchSize);
    if (batch.length === 0) break;
    await store.transaction(async (tx) => {
      for (const row of batch) {
        after = row.seq;
        const ctx = { issuer: row.issuer, subject: row.subject, provider: row.provider };
        let plaintext: string;
        try {
          plaintext = sealer.open({ keyId: row.key_id, value: row.sealed_tokens }, ctx);
        } catch (err) {
          if (err instanceof SealError) {
            unreadable++;
            continue;
          }
          throw err;
        }
        const sealed = sealer.seal(plaintext, ctx);
        if (await tx.connections.reseal(row, { key_id: sealed.keyId, sealed_tokens: sealed.value })) resealed++;
        else skippedConcurrent++;
      }
    });
    // Yield between batches so the service's own writes are not starved.
    await new Promise((resolve) => setImmediate(resolve));
  }
  await store.audit.record('keys_rotated', undefined, undefined, `resealed ${resealed}, unreadable ${unreadable}, under ${sealer.keyId}`);
  return { currentKeyId: sealer.keyId, resealed, skippedConcurrent, unreadable, keysInUse: await store.connections.countByKey() };
}

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const store = await openStore(config.database);
  try {
    const report = await rotateKeys(store, new Sealer(config.tokenKeys));
    process.stdout.write(
      [
        `Re-encrypted ${report.resealed} connection(s) under key "${report.currentKeyId}".`,
        report.skippedConcurrent ? `${report.skippedConcurrent} changed while rotating (already under the current key).` : '',
        report.unreadable
          ? `${report.unreadable} sealed under a key no longer in TOKEN_ENCRYPTION_KEYS: add that key back and run again.`
          : '',
        `Keys in use: ${report.keysInUse.map((k) => `${k.key_id} (${k.n})`).join(', ') || 'none'}.`,
        report.keysInUse.every((k) => k.key_id === report.currentKeyId)
          ? 'Every row uses the current key: older keys can be removed from the ring.'
          : '',
      ]
        .filter(Boolean)
        .join('\n') + '\n',
    );
    process.exitCode = report.unreadable ? 1 : 0;
  } finally {
    await store.close();
  }
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) await main();
