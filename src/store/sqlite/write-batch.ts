/**
 * Group commit for the writes every request makes (audit rows, rate-limit counters, usage marks,
 * client-assertion ids). Each used to be a statement of its own, committed on its own: on SQLite
 * the commit, not the statement, is most of a write's cost, and it blocks the event loop. Here a
 * write is queued, and the writes queued in one event-loop turn run after that turn in one
 * `BEGIN IMMEDIATE … COMMIT`; each caller's promise settles after that commit, so a caller that
 * waits for its write (the answer that follows it) still has it on disk first — the commit is
 * shared, so its cost is divided among the requests of the turn instead of paid by each.
 *
 * The queue is bounded: past {@link MAX_QUEUED_WRITES} a writer waits for the batch under way
 * (backpressure) instead of growing memory. `flush()` (at close) writes everything queued.
 * Statements of an open `store.transaction` never come here (they run inside it, `insideTransaction`).
 */
import type { AuditStream } from '../audit-chain.js';
import type { Db } from './database.js';
import { classified, type Runner, type TransactionGate } from './gate.js';

/** Writes queued at most; a writer past it waits for the batch under way. */
export const MAX_QUEUED_WRITES = 10_000;
/** Writes per transaction at most (a longer queue takes several, one after another). */
const WRITES_PER_BATCH = 1_000;

interface Queued {
  fn: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

export class WriteBatch implements Runner {
  #queue: Queued[] = [];
  #scheduled = false;
  #writing: Promise<void> | undefined;

  constructor(
    private readonly db: Db,
    private readonly gate: TransactionGate,
    /** The process's audit stream: a batch that rolls back puts its head back. */
    private readonly stream: AuditStream | undefined,
    private readonly maxQueued = MAX_QUEUED_WRITES,
  ) {}

  /** Queues `fn` for the next batch; resolves with its result once the batch is committed. */
  async run<T>(fn: () => T): Promise<T> {
    while (this.#queue.length >= this.maxQueued) await this.#drain();
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ fn, resolve: resolve as (value: unknown) => void, reject });
      this.#schedule();
    });
  }

  /** Writes every queued write; resolves when each has settled. */
  async flush(): Promise<void> {
    while (this.#writing || this.#queue.length > 0) await this.#drain();
  }

  /** Queued writes not yet in a batch (metrics, tests). */
  get queued(): number {
    return this.#queue.length;
  }

  /** The batch under way, or one started now. */
  #drain(): Promise<void> {
    return this.#writing ?? this.#write();
  }

  #schedule(): void {
    if (this.#scheduled || this.#writing) return;
    this.#scheduled = true;
    // After this turn: every write queued by the requests of this turn joins the batch.
    setImmediate(() => {
      this.#scheduled = false;
      // #commit settles each caller, with its write's outcome or the batch's error: nothing is left to report here.
      if (!this.#writing) this.#write().catch(() => {});
    });
  }

  #write(): Promise<void> {
    this.#writing = this.gate
      .exclusive(async () => this.#commit(this.#queue.splice(0, WRITES_PER_BATCH)))
      .finally(() => {
        this.#writing = undefined;
        if (this.#queue.length > 0) this.#schedule();
      });
    return this.#writing;
  }

  /** Runs one batch (its own transaction; alone, a write commits by itself) and settles its callers. */
  #commit(batch: Queued[]): void {
    if (batch.length === 0) return;
    if (batch.length === 1) {
      const only = batch[0]!;
      try {
        only.resolve(classified(only.fn));
      } catch (err) {
        only.reject(err);
      }
      return;
    }
    const position = this.stream?.position();
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; err: unknown }> = [];
    try {
      classified(() => this.db.exec('BEGIN IMMEDIATE'));
      for (const q of batch) {
        try {
          outcomes.push({ ok: true, value: classified(q.fn) });
        } catch (err) {
          // A failed statement is undone alone (the others stay), unless it ended the transaction.
          if (!this.db.inTransaction) throw err;
          outcomes.push({ ok: false, err });
        }
      }
      classified(() => this.db.exec('COMMIT'));
    } catch (err) {
      try {
        if (this.db.inTransaction) this.db.exec('ROLLBACK');
      } catch {
        // The connection ended the transaction itself (SQLITE_FULL, IOERR): nothing is left to undo.
      }
      if (position) this.stream!.restore(position);
      for (const q of batch) q.reject(err);
      return;
    }
    batch.forEach((q, i) => {
      const o = outcomes[i]!;
      if (o.ok) q.resolve(o.value);
      else q.reject(o.err);
    });
  }
}
