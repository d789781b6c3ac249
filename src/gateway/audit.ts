/**
 * The `upstream_call` audit rows, written off the answer's path: a forwarded call queues its row
 * and the queue is written once the event loop turn that answered is over (`setImmediate`), every
 * row queued by then in one transaction. On SQLite a row written alone blocked the event loop
 * ~120 µs (its own commit) on every forwarded call, before the answer could be sent; together,
 * under load, they cost a few µs each (bench/README.md, "Gateway throughput, afternoon of
 * 2026-12-01"). One write at a time; the queue is bounded, and what it cannot hold is counted and
 * logged, never held without limit while the store is slow or away. Rows carry no arguments and
 * no token (the caller builds `detail`).
 */
import type { Principal } from '../auth/principal.js';
import type { Logger } from '../log.js';
import type { Store } from '../store/index.js';
import { backgroundFailure } from '../observability/process-guards.js';

/** Rows queued at most while a write is under way (beyond, they are dropped and counted). */
export const MAX_QUEUED_AUDIT_ROWS = 10_000;
/** Rows written per transaction at most. */
const ROWS_PER_WRITE = 500;

interface Row {
  principal: Principal;
  upstream: string;
  detail: string;
}

export class UpstreamAudit {
  #queue: Row[] = [];
  #writing: Promise<void> | undefined;
  #scheduled = false;
  #dropped = 0;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    private readonly maxQueued = MAX_QUEUED_AUDIT_ROWS,
  ) {}

  /** Queues one forwarded call's row; it is written after the current turn. */
  record(principal: Principal, upstream: string, detail: string): void {
    if (this.#queue.length >= this.maxQueued) {
      this.#dropped++;
      return;
    }
    this.#queue.push({ principal, upstream, detail });
    this.#schedule();
  }

  /** Writes every queued row (shutdown, tests); resolves when they are in the store or reported lost. */
  async flush(): Promise<void> {
    while (this.#writing || this.#queue.length > 0) {
      if (this.#writing) await this.#writing;
      else await this.#write();
    }
  }

  #schedule(): void {
    if (this.#scheduled || this.#writing) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      if (!this.#writing) this.#write().catch(backgroundFailure('upstream_audit_write'));
    });
  }

  #write(): Promise<void> {
    const rows = this.#queue.splice(0, ROWS_PER_WRITE);
    const dropped = this.#dropped;
    this.#dropped = 0;
    if (dropped > 0) this.log.warn('audit_rows_dropped', { audit: 'upstream_call', rows: dropped, queued: this.maxQueued });
    this.#writing = this.#insert(rows)
      .catch((err: unknown) =>
        this.log.warn('audit_write_failed', {
          audit: 'upstream_call',
          rows: rows.length,
          message: err instanceof Error ? err.message : String(err),
        }),
      )
      .finally(() => {
        this.#writing = undefined;
        if (this.#queue.length > 0) this.#schedule();
      });
    return this.#writing;
  }

  async #insert(rows: Row[]): Promise<void> {
    if (rows.length === 0) return;
    if (rows.length === 1) return this.store.audit.record('upstream_call', rows[0]!.principal, rows[0]!.upstream, rows[0]!.detail);
    await this.store.transaction(async (tx) => {
      for (const row of rows) await tx.audit.record('upstream_call', row.principal, row.upstream, row.detail);
    });
  }
}
