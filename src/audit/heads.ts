/**
 * Anchors each instance's audit stream outside the database: its head (stream, place, MAC) goes to
 * the log every interval and once more at shutdown. A chain alone cannot show that its newest rows
 * were deleted; a head in the log, kept where the database's writers cannot reach, can (docs/audit.md).
 */
import type { Logger } from '../log.js';
import type { AuditRepository } from '../store/index.js';

/** How often the head is logged (default hourly). */
export const AUDIT_HEAD_INTERVAL_MS = 3_600_000;

export interface AuditHeadLog {
  /** Stops the timer and logs the head a last time (before the store closes). */
  close(): Promise<void>;
}

export function startAuditHeadLog(audit: Pick<AuditRepository, 'head'>, log: Logger, intervalMs = AUDIT_HEAD_INTERVAL_MS): AuditHeadLog {
  let last = -1;
  const logHead = async (always: boolean) => {
    const head = await audit.head();
    // Unchanged since the last line: nothing new to anchor.
    if (!head || (!always && head.seq === last)) return;
    last = head.seq;
    log.info('audit_chain_head', { stream: head.stream, seq: head.seq, mac: head.mac, keyId: head.key_id });
  };
  const timer = setInterval(() => void logHead(false).catch(() => {}), intervalMs);
  timer.unref();
  return {
    async close() {
      clearInterval(timer);
      await logHead(true).catch(() => {});
    },
  };
}

/**
 * The heads in a log (JSON lines as the broker writes them; other lines and events are skipped): what
 * `audit verify --heads <file>` checks the streams against.
 */
export function headsFromLog(text: string): Array<{ stream: string; seq: number; mac: string }> {
  const heads: Array<{ stream: string; seq: number; mac: string }> = [];
  for (const line of text.split('\n')) {
    if (!line.includes('audit_chain_head')) continue;
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      continue;
    }
    const e = entry as Record<string, unknown>;
    if (e.event === 'audit_chain_head' && typeof e.stream === 'string' && Number.isSafeInteger(e.seq) && typeof e.mac === 'string')
      heads.push({ stream: e.stream, seq: e.seq as number, mac: e.mac });
  }
  return heads;
}
