/**
 * `npm run admin -- audit verify`: walks every stream of the audit chain (src/store/audit-chain.ts,
 * docs/audit.md) from its anchor or its start, recomputing each MAC, and stops at the first broken
 * link, naming the stream, the row and what is wrong.
 */
import { constantTimeEqual } from '../crypto/index.js';
import { markTag, rowMac, streamGenesis, type AuditChainKey } from '../store/index.js';
import type { AuditAnchorRow, AuditRepository, AuditVoidRow, ChainedAuditRow } from '../store/index.js';

/** A stream's head as an instance logged it (`audit_chain_head`), kept outside the database. */
export interface LoggedHead {
  stream: string;
  seq: number;
  mac: string;
}

export type ChainProblem =
  /** A row's MAC does not match its content at its place: edited, or forged without the key. */
  | 'content_changed'
  /** A place of the stream has no row (and no void): deleted. */
  | 'row_missing'
  /** A row holds the content chained at another place: rows swapped or moved. */
  | 'order_changed'
  /** Two rows claim the same place. */
  | 'duplicate'
  /** A row or mark names a key this verification does not have. */
  | 'unknown_key'
  /** An anchor or void whose tag does not match: edited or forged. */
  | 'mark_altered'
  /** A row without a MAC written after the first chained row: stripped of its chain, or written around it. */
  | 'unchained_row'
  /** A stream ends before a head logged for it: its newest rows were deleted (or the whole stream). */
  | 'truncated';

export interface ChainBreak {
  problem: ChainProblem;
  stream: string | null;
  /** The row where the chain breaks (null for a mark). */
  id: number | null;
  seq: number | null;
  message: string;
}

export interface StreamSummary {
  stream: string;
  /** Rows verified. */
  rows: number;
  /** The last verified place, its row and time (null when every row was pruned). */
  lastSeq: number;
  lastId: number | null;
  lastAt: number | null;
  /** Where verification started: the stream's first row, or the anchor at the cut. */
  from: 'start' | 'anchor';
}

export interface ChainReport {
  ok: boolean;
  /** Chained rows verified. */
  rows: number;
  streams: StreamSummary[];
  anchors: number;
  voids: number;
  /** Rows from before the chain (written before migration 019): no MAC, reported, not broken. */
  unchainedHistory: number;
  /** Rows older than their stream's anchor, left by a prune that stopped halfway: not checked. */
  belowAnchors: number;
  broken?: ChainBreak;
}

const ORDER_WINDOW = 64;

/**
 * Verifies the chain with `keys` (any of them may have MACed a row: the current and earlier secrets),
 * and that no stream ends before a head in `heads` (what the instances logged): the one check that
 * shows deleted newest rows.
 */
export async function verifyAuditChain(
  audit: Pick<AuditRepository, 'chainPage' | 'chainMarks' | 'unchained'>,
  keys: AuditChainKey[],
  { pageSize = 5_000, heads = [] }: { pageSize?: number; heads?: LoggedHead[] } = {},
): Promise<ChainReport> {
  const logged = new Map<string, LoggedHead>();
  for (const h of heads) if ((logged.get(h.stream)?.seq ?? -1) < h.seq) logged.set(h.stream, h);
  const ring = new Map(keys.map((k) => [k.id, k.key]));
  const { anchors, voids } = await audit.chainMarks();
  const anchorOf = new Map(anchors.map((a) => [a.stream, a]));
  const voidOf = new Map(voids.map((v) => [`${v.stream}\n${Number(v.seq)}`, v]));
  const unchained = await audit.unchained();
  const report: ChainReport = {
    ok: true,
    rows: 0,
    streams: [],
    anchors: anchors.length,
    voids: voids.length,
    unchainedHistory: unchained.before,
    belowAnchors: 0,
  };
  const fail = (b: ChainBreak): ChainReport => ({ ...report, ok: false, broken: b });

  for (const v of voids) {
    const key = ring.get(v.key_id);
    if (!key) return fail(unknownKey(v.stream, null, Number(v.seq), v.key_id, 'a void'));
    if (!constantTimeEqual(markTag(key, 'void', v.stream, Number(v.seq), v.mac), v.tag)) return fail(markAltered('void', v));
  }

  let state: StreamState | undefined;
  const finish = () => {
    if (state) report.streams.push(state.summary);
  };
  const begin = (stream: string): ChainBreak | undefined => {
    finish();
    const anchor = anchorOf.get(stream);
    anchorOf.delete(stream);
    state = { summary: { stream, rows: 0, lastSeq: 0, lastId: null, lastAt: null, from: 'start' }, expected: 1, prev: undefined };
    if (!anchor) return undefined;
    const key = ring.get(anchor.key_id);
    if (!key) return unknownKey(stream, null, Number(anchor.seq), anchor.key_id, 'its anchor');
    if (!constantTimeEqual(markTag(key, 'anchor', stream, Number(anchor.seq), anchor.mac, Number(anchor.at)), anchor.tag))
      return markAltered('anchor', anchor);
    state.summary.from = 'anchor';
    state.summary.lastSeq = Number(anchor.seq);
    state.expected = Number(anchor.seq) + 1;
    state.prev = anchor.mac;
    return undefined;
  };

  let after: ChainedAuditRow | undefined;
  for (;;) {
    const page = (await audit.chainPage(after, pageSize)).map(normalise);
    for (let i = 0; i < page.length; i++) {
      const row = page[i]!;
      if (state?.summary.stream !== row.stream) {
        const broken = begin(row.stream);
        if (broken) return fail(broken);
      }
      const s = state!;
      if (row.seq < s.expected) {
        if (s.summary.from === 'anchor' && row.seq <= s.summary.lastSeq && s.summary.rows === 0) {
          report.belowAnchors++;
          continue;
        }
        return fail({
          problem: 'duplicate',
          stream: row.stream,
          id: row.id,
          seq: row.seq,
          message: `row ${row.id} claims place ${row.seq} of stream ${row.stream}, which another row already holds`,
        });
      }
      // Places with no row: only a void (a rolled-back row's place and MAC) may fill them.
      while (row.seq > s.expected) {
        const v = voidOf.get(`${row.stream}\n${s.expected}`);
        if (!v) {
          const missing = row.seq - s.expected;
          return fail({
            problem: 'row_missing',
            stream: row.stream,
            id: row.id,
            seq: s.expected,
            message:
              s.expected === 1 && s.summary.from === 'start'
                ? `stream ${row.stream} begins at place ${row.seq} (row ${row.id}) with no anchor: its first ${missing} row(s) are missing`
                : `${missing} row(s) missing from stream ${row.stream} before row ${row.id} (place ${s.expected}${missing > 1 ? `–${row.seq - 1}` : ''})`,
          });
        }
        s.prev = v.mac;
        s.expected++;
      }
      const key = ring.get(row.key_id);
      if (!key) return fail(unknownKey(row.stream, row.id, row.seq, row.key_id, `row ${row.id}`));
      const prev = s.prev ?? streamGenesis(key, row.stream);
      const link = { stream: row.stream, seq: row.seq, key_id: row.key_id };
      if (!constantTimeEqual(rowMac(key, prev, link, row), row.mac)) {
        // Another row of the stream nearby whose content was chained here: rows swapped or moved.
        const moved = page
          .slice(Math.max(0, i - ORDER_WINDOW), i + ORDER_WINDOW)
          .find((other) => other !== row && other.stream === row.stream && constantTimeEqual(rowMac(key, prev, link, other), row.mac));
        return fail(
          moved
            ? {
                problem: 'order_changed',
                stream: row.stream,
                id: row.id,
                seq: row.seq,
                message: `row ${row.id} (place ${row.seq} of stream ${row.stream}) holds other content: what was chained there is now in row ${moved.id}`,
              }
            : {
                problem: 'content_changed',
                stream: row.stream,
                id: row.id,
                seq: row.seq,
                message: `row ${row.id} (place ${row.seq} of stream ${row.stream}) does not match its MAC: its content was changed, or the row was written without the key`,
              },
        );
      }
      const head = logged.get(row.stream);
      if (head?.seq === row.seq && !constantTimeEqual(head.mac, row.mac))
        return fail({
          problem: 'content_changed',
          stream: row.stream,
          id: row.id,
          seq: row.seq,
          message: `row ${row.id} (place ${row.seq} of stream ${row.stream}) is not the row whose MAC was logged as that stream's head`,
        });
      s.prev = row.mac;
      s.expected = row.seq + 1;
      s.summary.rows++;
      s.summary.lastSeq = row.seq;
      s.summary.lastId = row.id;
      s.summary.lastAt = row.at;
      report.rows++;
    }
    if (page.length < pageSize) break;
    after = page[page.length - 1];
  }
  finish();
  state = undefined;
  // Streams whose every row was pruned: the anchor is all that is left (still checked).
  for (const anchor of [...anchorOf.values()]) {
    const broken = begin(anchor.stream);
    if (broken) return fail(broken);
    finish();
    state = undefined;
  }
  report.streams.sort((a, b) => (a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : 0));

  const reached = new Map(report.streams.map((x) => [x.stream, x.lastSeq]));
  for (const head of [...logged.values()].sort((a, b) => (a.stream < b.stream ? -1 : 1))) {
    const last = reached.get(head.stream);
    if (last !== undefined && last >= head.seq) continue;
    return fail({
      problem: 'truncated',
      stream: head.stream,
      id: null,
      seq: last ?? null,
      message:
        last === undefined
          ? `stream ${head.stream} has no row and no anchor left, but its head was logged at place ${head.seq}: the whole stream was deleted`
          : `stream ${head.stream} ends at place ${last}, but its head was logged at place ${head.seq}: its newest ${head.seq - last} row(s) were deleted`,
    });
  }

  if (unchained.after > 0)
    return fail({
      problem: 'unchained_row',
      stream: null,
      id: unchained.firstAfter,
      seq: null,
      message: `${unchained.after} row(s) without a MAC were written after the chain began, the first is row ${unchained.firstAfter}: a row stripped of its chain, or written by a store without the key`,
    });
  return report;
}

interface StreamState {
  summary: StreamSummary;
  expected: number;
  /** The MAC the next row chains from (undefined: the stream's genesis, under the row's key). */
  prev: string | undefined;
}

/** pg hands BIGINT back as numbers here, SQLite as numbers too; a string slipped through would compare wrongly. */
function normalise(row: ChainedAuditRow): ChainedAuditRow {
  return { ...row, id: Number(row.id), seq: Number(row.seq), at: Number(row.at) };
}

function unknownKey(stream: string, id: number | null, seq: number, keyId: string, what: string): ChainBreak {
  return {
    problem: 'unknown_key',
    stream,
    id,
    seq,
    message: `${what} (stream ${stream}) was MACed with key ${keyId}, which neither BROKER_SECRET nor BROKER_PREVIOUS_SECRET derives`,
  };
}

function markAltered(kind: 'anchor' | 'void', mark: AuditAnchorRow | AuditVoidRow): ChainBreak {
  return {
    problem: 'mark_altered',
    stream: mark.stream,
    id: null,
    seq: Number(mark.seq),
    message: `the ${kind} of stream ${mark.stream} at place ${mark.seq} does not match its tag: it was changed or written without the key`,
  };
}
