/**
 * The audit trail's retention (AUDIT_RETENTION_DAYS): rows older than the retention are deleted in
 * batches, by every instance (a delete is idempotent, so instances need not agree who runs it). Each
 * batch moves the anchor of every stream it shortened in its own transaction (the store's `prune`),
 * so the chain stays verifiable from the cut (docs/audit.md).
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Logger } from '../log.js';
import type { AuditRepository } from '../store/index.js';

export const DAY_MS = 86_400_000;
/** Rows one statement deletes at most: a short hold of the write lock, even on a first prune of a huge table. */
export const AUDIT_PRUNE_BATCH = 10_000;
/** How often the service prunes, and how soon after start the first time. */
export const AUDIT_PRUNE_INTERVAL_MS = 3_600_000;
export const AUDIT_PRUNE_FIRST_DELAY_MS = 60_000;

/** The instant before which rows go when they are kept `days` days. */
export function retentionCutoff(days: number, now = Date.now()): number {
  return now - days * DAY_MS;
}

/**
 * Deletes every row recorded before `before`, `batchSize` at a time with a turn of the event loop
 * between batches (requests go on being served), until a batch comes back short; or until `stopped`
 * says so between two batches. Returns how many rows went.
 */
export async function pruneAuditTrail(
  audit: Pick<AuditRepository, 'prune'>,
  before: number,
  { batchSize = AUDIT_PRUNE_BATCH, stopped = () => false }: { batchSize?: number; stopped?: () => boolean } = {},
): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await audit.prune(before, batchSize);
    total += n;
    if (n < batchSize || stopped()) return total;
    await yieldToEventLoop();
  }
}

export interface AuditRetentionOptions {
  /** Between two prunes (default an hour). */
  intervalMs?: number;
  /** Before the first prune after start (default a minute: start-up has other work). */
  firstDelayMs?: number;
  batchSize?: number;
}

export interface AuditRetention {
  /** Stops the timer and waits for a prune in flight to end its batch (before the store closes). */
  close(): Promise<void>;
}

/**
 * Prunes `audit` to `days` days shortly after start and then every interval; `days` 0 keeps every
 * row (nothing is scheduled). Failures are logged (`audit_prune_failed`) and the next run tries again.
 */
export function startAuditRetention(
  audit: Pick<AuditRepository, 'prune'>,
  days: number,
  log: Logger,
  options: AuditRetentionOptions = {},
): AuditRetention {
  if (days <= 0) return { close: async () => {} };
  const { intervalMs = AUDIT_PRUNE_INTERVAL_MS, firstDelayMs = AUDIT_PRUNE_FIRST_DELAY_MS, batchSize = AUDIT_PRUNE_BATCH } = options;
  let closed = false;
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;

  const run = async () => {
    try {
      const deleted = await pruneAuditTrail(audit, retentionCutoff(days), { batchSize, stopped: () => closed });
      if (deleted > 0) log.info('audit_pruned', { deleted, retentionDays: days });
    } catch (err) {
      log.warn('audit_prune_failed', { message: err instanceof Error ? err.message : String(err) });
    }
  };
  const schedule = (delay: number) => {
    if (closed) return;
    timer = setTimeout(() => {
      // One run at a time: the next is scheduled when this one ends, so a slow prune never overlaps itself.
      running = run().finally(() => {
        running = undefined;
        schedule(intervalMs);
      });
    }, delay);
    timer.unref();
  };
  schedule(firstDelayMs);

  return {
    async close() {
      closed = true;
      clearTimeout(timer);
      await running;
    },
  };
}
