import { loadConfigOrExit, type Config } from '../config/env.js';
import { Sealer, SealError, type SealContext } from '../crypto/index.js';
import { clientSecretContext } from '../providers/mcp-auth/registration.js';
import { auditChainKey, openStore, type ConnectionRow, type Repositories, type Store, type UpstreamClientRow } from '../store/index.js';
import { rotationAuditDetail, rotationText } from './rotation/messages.js';
import type { RotationCounts, RotationReport } from './rotation/report.js';

/** One table's rows, as the rotation sees them: where its plaintext is bound, and its compare-and-set. */
interface SealedRows<R> {
  next(store: Store, after: R | undefined): Promise<R[]>;
  sealed(row: R): { keyId: string; value: string };
  context(row: R): SealContext;
  reseal(tx: Repositories, row: R, next: { keyId: string; value: string }): Promise<boolean>;
}

/**
 * Re-encrypts every row the token key ring seals — stored connections, and the client secrets of the
 * broker's registrations at `auth: mcp` upstreams' authorization servers — under the first key of the
 * ring, in small transactions, while the service keeps running: each row is rewritten only if unchanged
 * since it was read, so a concurrent refresh or registration (which seals with the current key anyway)
 * always wins. The rows sealed with keys derived from BROKER_SECRET (sessions, sign-ins, flows) are not
 * the ring's and live minutes to hours.
 */
export async function rotateKeys(store: Store, sealer: Sealer, { batchSize = 200 } = {}): Promise<RotationReport> {
  const connections = await rotateTable<ConnectionRow & { seq: number }>(store, sealer, batchSize, {
    next: (s, after) => s.connections.sealedUnderOtherKeys(sealer.keyId, after?.seq ?? 0, batchSize),
    sealed: (row) => ({ keyId: row.key_id, value: row.sealed_tokens }),
    context: (row) => ({ issuer: row.issuer, subject: row.subject, provider: row.provider }),
    reseal: (tx, row, next) => tx.connections.reseal(row, { key_id: next.keyId, sealed_tokens: next.value }),
  });
  const unreadableIssuers = new Set<string>();
  const clientSecrets = await rotateTable<UpstreamClientRow>(
    store,
    sealer,
    batchSize,
    {
      next: (s, after) => s.upstreamClients.sealedUnderOtherKeys(sealer.keyId, after, batchSize),
      sealed: (row) => ({ keyId: row.key_id ?? '', value: row.client_secret_sealed ?? '' }),
      context: (row) => clientSecretContext(row.issuer, row.client_key),
      reseal: (tx, row, next) => tx.upstreamClients.reseal(row, { key_id: next.keyId, client_secret_sealed: next.value }),
    },
    (row) => unreadableIssuers.add(row.issuer),
  );
  const keysInUse = mergeCounts([await store.connections.countByKey(), await store.upstreamClients.countByKey()]);
  const report: RotationReport = {
    currentKeyId: sealer.keyId,
    ...connections,
    clientSecrets: { ...clientSecrets, unreadableIssuers: [...unreadableIssuers].sort() },
    keysInUse,
    olderKeysRemovable: keysInUse.every((k) => k.key_id === sealer.keyId),
  };
  await store.audit.record('keys_rotated', undefined, undefined, rotationAuditDetail(report));
  return report;
}

async function rotateTable<R>(
  store: Store,
  sealer: Sealer,
  batchSize: number,
  rows: SealedRows<R>,
  onUnreadable?: (row: R) => void,
): Promise<RotationCounts> {
  const counts: RotationCounts = { resealed: 0, skippedConcurrent: 0, unreadable: 0 };
  let after: R | undefined;
  for (;;) {
    const batch = await rows.next(store, after);
    if (batch.length === 0) break;
    await store.transaction(async (tx) => {
      for (const row of batch) {
        after = row;
        const ctx = rows.context(row);
        let plaintext: string;
        try {
          plaintext = sealer.open(rows.sealed(row), ctx);
        } catch (err) {
          if (err instanceof SealError) {
            counts.unreadable++;
            onUnreadable?.(row);
            continue;
          }
          throw err;
        }
        const sealed = sealer.seal(plaintext, ctx);
        if (await rows.reseal(tx, row, sealed)) counts.resealed++;
        else counts.skippedConcurrent++;
      }
    });
    if (batch.length < batchSize) break;
    // Yield between batches so the service's own writes are not starved.
    await new Promise((resolve) => setImmediate(resolve));
  }
  return counts;
}

/** Per-key counts of several tables, summed, in byte order of key id. */
function mergeCounts(tables: Array<Array<{ key_id: string; n: number }>>): Array<{ key_id: string; n: number }> {
  const total = new Map<string, number>();
  for (const table of tables) for (const { key_id, n } of table) total.set(key_id, (total.get(key_id) ?? 0) + n);
  return [...total].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([key_id, n]) => ({ key_id, n }));
}

/** `npm run rotate-keys` against `config`'s database and key ring: writes the report to `stdout`, returns the exit code. */
export async function runRotateKeys(config: Config, stdout: { write(text: string): unknown }): Promise<number> {
  // Its `keys_rotated` row joins the audit chain in a stream of this run's.
  const store = await openStore(config.database, undefined, { auditChain: auditChainKey(config.brokerSecret) });
  try {
    const report = await rotateKeys(store, new Sealer(config.tokenKeys));
    stdout.write(rotationText(report));
    return report.unreadable || report.clientSecrets.unreadable ? 1 : 0;
  } finally {
    await store.close();
  }
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href)
  process.exitCode = await runRotateKeys(loadConfigOrExit(), process.stdout);
