// The forwarded calls' audit rows (src/gateway/audit.ts) on a real SQLite store: queued off the
// answer's path, written after the turn in one transaction, bounded, and never lost silently.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import { UpstreamAudit } from '../src/gateway/audit.js';
import { createLogger } from '../src/log.js';
import { openSqliteStore, type Store } from '../src/store/index.js';

const ISSUER = 'https://idp.example';
const alice = principalFromVerifiedClaims(ISSUER, 'audit-alice');

describe('the upstream_call audit rows', () => {
  let dir: string;
  let store: Store;
  let transactions = 0;
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger('warn', (line) => void lines.push(JSON.parse(line) as Record<string, unknown>));
  const rows = async (subject: string) => (await store.audit.list({ subject, event: 'upstream_call' })).map((r) => r.detail);

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-audit-'));
    const opened = openSqliteStore(join(dir, 'broker.sqlite'));
    const transaction = opened.transaction.bind(opened);
    store = Object.assign(opened, {
      transaction: <T>(fn: Parameters<typeof transaction<T>>[0]) => {
        transactions++;
        return transaction(fn);
      },
    });
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes nothing while the call answers; the rows of one turn land after it, in order, in one transaction', async () => {
    const audit = new UpstreamAudit(store, log);
    const before = transactions;
    for (let i = 0; i < 5; i++) audit.record(alice, 'github', `tool=echo outcome=result ms=${i}`);
    assert.deepEqual(await rows(alice.subject), [], 'not written on the answer’s path');
    await audit.flush();
    assert.deepEqual(
      await rows(alice.subject),
      [0, 1, 2, 3, 4].map((i) => `tool=echo outcome=result ms=${i}`),
    );
    assert.equal(transactions - before, 1, 'five rows, one transaction');
    const [row] = await store.audit.list({ subject: alice.subject, event: 'upstream_call' });
    assert.deepEqual([row!.issuer, row!.provider], [alice.issuer, 'github']);
  });

  it('writes without being flushed, once the turn is over', async () => {
    const audit = new UpstreamAudit(store, log);
    const who = principalFromVerifiedClaims(ISSUER, 'audit-bea');
    audit.record(who, 'tracker', 'tool=a outcome=result ms=1');
    for (let i = 0; i < 5 && (await rows(who.subject)).length === 0; i++) await nextTurn();
    assert.deepEqual(await rows(who.subject), ['tool=a outcome=result ms=1']);
  });

  it('holds a bounded queue: what it cannot hold is dropped, counted and logged', async () => {
    const audit = new UpstreamAudit(store, log, 3);
    const who = principalFromVerifiedClaims(ISSUER, 'audit-cy');
    lines.length = 0;
    for (let i = 0; i < 10; i++) audit.record(who, 'github', `tool=echo outcome=result ms=${i}`);
    await audit.flush();
    assert.equal((await rows(who.subject)).length, 3);
    const dropped = lines.filter((l) => l.event === 'audit_rows_dropped');
    assert.deepEqual(
      dropped.map((l) => [l.audit, l.rows]),
      [['upstream_call', 7]],
      JSON.stringify(lines),
    );
  });

  it('logs a write that fails (the store away) and keeps writing the rows that come after', async () => {
    let failures = 1;
    const record = store.audit.record.bind(store.audit);
    const flaky = Object.assign(Object.create(store) as Store, {
      audit: {
        ...store.audit,
        record: (...args: Parameters<typeof record>) =>
          failures-- > 0 ? Promise.reject(new Error('SQLITE_IOERR: disk I/O error')) : record(...args),
      },
    });
    const audit = new UpstreamAudit(flaky, log);
    const who = principalFromVerifiedClaims(ISSUER, 'audit-dee');
    lines.length = 0;
    audit.record(who, 'github', 'tool=echo outcome=result ms=9');
    await audit.flush();
    assert.ok(
      lines.some((l) => l.event === 'audit_write_failed' && l.audit === 'upstream_call' && l.rows === 1),
      JSON.stringify(lines),
    );
    audit.record(who, 'github', 'tool=echo outcome=result ms=10');
    await audit.flush();
    assert.deepEqual(await rows(who.subject), ['tool=echo outcome=result ms=10']);
  });
});
