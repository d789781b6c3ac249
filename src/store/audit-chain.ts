/**
 * The audit trail's chain (docs/audit.md). Every store that writes audit rows is one writer with a
 * stream of its own: a random stream id, a sequence number and the stream's head (the last MAC) kept
 * in memory, so an append costs one HMAC and no read. Each row's MAC covers the previous MAC of its
 * stream and every column of the row, under a key derived from BROKER_SECRET: without the key, nobody
 * with only database access can recompute a MAC, so an edited, forged, reordered or missing row
 * breaks the chain where it sits.
 */
import { deriveKey, keyIdFor, mac, randomId } from '../crypto/index.js';
import type { Owner } from './types.js';

/** One MAC key of the chain: its id is stored in every row it MACed (a hash of the key, never the key). */
export interface AuditChainKey {
  id: string;
  key: Buffer;
}

/** The chain's key for a BROKER_SECRET (its id changes when the secret does). */
export function auditChainKey(brokerSecret: Buffer): AuditChainKey {
  const key = deriveKey(brokerSecret, 'audit-chain');
  return { id: keyIdFor(key), key };
}

/** The columns a row's MAC covers besides its stream, place and key (the id is the database's storage order). */
export interface ChainedContent {
  at: number;
  event: string;
  issuer: string | null;
  subject: string | null;
  provider: string | null;
  detail: string | null;
}

/** A row `record` writes now: its content as stored (the detail as {@link storedDetail} cuts it). */
export function auditContent(event: string, owner: Owner | undefined, provider: string | undefined, detail?: string): ChainedContent {
  return {
    at: Date.now(),
    event,
    issuer: owner?.issuer ?? null,
    subject: owner?.subject ?? null,
    provider: provider ?? null,
    detail: storedDetail(detail),
  };
}

/** The content's columns in their one order: the MAC's and the insert's. */
function contentValues(row: ChainedContent): Array<string | number | null> {
  return [row.at, row.event, row.issuer, row.subject, row.provider, row.detail];
}

/** The columns every audit insert writes, in the order of {@link auditInsertValues}. */
export const AUDIT_INSERT_COLUMNS = 'at, event, issuer, subject, provider, detail, stream, seq, key_id, mac';

/** The values of an audit insert: the content, then its chain link (nulls for a row written unchained). */
export function auditInsertValues(row: ChainedContent, link: ChainLink | undefined): Array<string | number | null> {
  return [...contentValues(row), link?.stream ?? null, link?.seq ?? null, link?.key_id ?? null, link?.mac ?? null];
}

/** The chain columns of one row. */
export interface ChainLink {
  stream: string;
  seq: number;
  key_id: string;
  mac: string;
}

/** What a stream's first row chains from: a value only the key's holder can compute, per stream. */
export function streamGenesis(key: Buffer, stream: string): string {
  return mac(key, 'audit-chain/genesis/v1', stream);
}

/** A row's MAC: the stream's previous MAC and the row's canonical content (JSON: nulls and strings apart). */
export function rowMac(key: Buffer, prev: string, link: Omit<ChainLink, 'mac'>, row: ChainedContent): string {
  const content = JSON.stringify([link.stream, link.seq, link.key_id, ...contentValues(row)]);
  return mac(key, 'audit-chain/row/v1', prev, content);
}

/** The MAC of an anchor (the pruned part of a stream ends at `seq`, whose MAC was `rowMac`) or of a void. */
export function markTag(key: Buffer, kind: 'anchor' | 'void', stream: string, seq: number, rowMacValue: string, at = 0): string {
  return mac(key, `audit-chain/${kind}/v1`, stream, String(seq), rowMacValue, String(at));
}

/**
 * A detail as stored: at most 200 UTF-16 units, never ending in half a surrogate pair (the database
 * would store U+FFFD there, and the MAC must cover exactly what is stored).
 */
export function storedDetail(detail: string | undefined): string | null {
  if (detail === undefined) return null;
  let cut = detail.slice(0, 200);
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return cut.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

/** Where a stream stood: restored when the rows chained since were rolled back (SQLite, where writes are serial). */
export interface ChainPosition {
  seq: number;
  head: string;
}

/** One writer's stream: its id, its last place and head, in memory. */
export class AuditStream {
  readonly id: string;
  readonly #key: AuditChainKey;
  #seq = 0;
  #head: string;

  constructor(key: AuditChainKey, id = `s${Date.now().toString(36)}-${randomId().slice(0, 12)}`) {
    this.id = id;
    this.#key = key;
    this.#head = streamGenesis(key.key, id);
  }

  get keyId(): string {
    return this.#key.id;
  }

  /** Chains one row onto the head (synchronously: the caller writes it in the same turn). */
  append(row: ChainedContent): ChainLink {
    const link = { stream: this.id, seq: this.#seq + 1, key_id: this.#key.id };
    const m = rowMac(this.#key.key, this.#head, link, row);
    this.#seq = link.seq;
    this.#head = m;
    return { ...link, mac: m };
  }

  position(): ChainPosition {
    return { seq: this.#seq, head: this.#head };
  }

  /** Back to `position` (only when nothing chained since it was written: SQLite's serial writes). */
  restore(position: ChainPosition): void {
    this.#seq = position.seq;
    this.#head = position.head;
  }

  /** The tag of a mark (anchor or void) under this stream's key. */
  tag(kind: 'anchor' | 'void', stream: string, seq: number, rowMacValue: string, at = 0): string {
    return markTag(this.#key.key, kind, stream, seq, rowMacValue, at);
  }
}

/** Per stream, the pruned row with the highest place: where that stream's verification starts next. */
export function lastPrunedPerStream(
  rows: Array<{ stream: string | null; seq: number | null; mac: string | null; at: number }>,
): Array<{ stream: string; seq: number; mac: string; at: number }> {
  const last = new Map<string, { stream: string; seq: number; mac: string; at: number }>();
  for (const r of rows) {
    if (r.stream === null || r.seq === null || r.mac === null) continue;
    const seq = Number(r.seq);
    const seen = last.get(r.stream);
    if (!seen || seq > seen.seq) last.set(r.stream, { stream: r.stream, seq, mac: r.mac, at: Number(r.at) });
  }
  return [...last.values()];
}

export function currentHead(stream: AuditStream | undefined): { stream: string; seq: number; mac: string; key_id: string } | undefined {
  if (!stream) return undefined;
  const { seq, head } = stream.position();
  return { stream: stream.id, seq, mac: head, key_id: stream.keyId };
}
