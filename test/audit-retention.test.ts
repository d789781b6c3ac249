// The audit trail's retention (AUDIT_RETENTION_DAYS): the broker deletes rows older than it on its
// own, in batches, and keeps the rest; a failed prune is logged and tried again, never fatal.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startAuditRetention, DAY_MS } from '../src/audit/retention.js';
import { createLogger } from '../src/log.js';
import { openSqliteStore, sqliteHandle, type Store } from '../src/store/index.js';
import { eventually } from './support/eventually.js';
import { useStack } from './support/suite.js';

const ISSUER = 'https://idp.example.com';

/** Writes audit rows stamped `at` (the store stamps Date.now(), so history is written directly), in one transaction. */
function insertAudit(store: Store, at: number, subject: string, details: readonly string[]): void {
  const db = sqliteHandle(store);
  const insert = db.prepare('INSERT INTO audit_events (at, event, issuer, subject, provider, detail) VALUES (?, ?, ?, ?, ?, ?)');
  db.transaction(() => {
    for (const detail of details) insert.run(at, 'token_exchanged', ISSUER, subject, 'github', detail);
  })();
}

async function details(store: Store, subject: string): Promise<Array<string | null>> {
  return (await store.audit.list({ issuer: ISSUER, subject })).map((r) => r.detail);
}

function events(lines: string[], event: string): Array<Record<string, unknown>> {
  return lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.event === event);
}

describe('audit retention in the broker (AUDIT_RETENTION_DAYS=30)', () => {
  const stack = useStack({
    env: { AUDIT_RETENTION_DAYS: '30' },
    // Every 20 ms and three rows a statement, so one run takes several batches; the defaults are an hour and 10,000.
    brokerOptions: () => ({ auditRetention: { firstDelayMs: 0, intervalMs: 20, batchSize: 3 } }),
  });

  it('deletes the rows older than 30 days in batches on its periodic prune, logs how many, and keeps the rows within 30 days', async () => {
    const store = stack.broker.broker.store;
    const now = Date.now();
    insertAudit(store, now - 29 * DAY_MS, 'retention-kept', ['29 days ago']);
    await store.audit.record('token_exchanged', { issuer: ISSUER, subject: 'retention-kept' }, 'github', 'just now');
    // Seven rows past the retention, written at once: the prune sees all of them, three a batch.
    insertAudit(
      store,
      now - 31 * DAY_MS,
      'retention-old',
      Array.from({ length: 7 }, (_, i) => `old ${i}`),
    );
    const pruned = await eventually('audit_pruned', () => events(stack.logs, 'audit_pruned').find((l) => l.deleted === 7));
    assert.equal(pruned.level, 'info');
    assert.equal(pruned.retentionDays, 30);
    assert.deepEqual(await details(store, 'retention-old'), [], 'every row older than the retention went, over three batches');
    assert.deepEqual(await details(store, 'retention-kept'), ['29 days ago', 'just now'], 'rows within the retention stay');
    assert.deepEqual(events(stack.logs, 'audit_prune_failed'), []);
  });
});

describe('audit retention, on its own', () => {
  let dir: string;
  const stores: Store[] = [];
  const open = (name: string) => {
    const store = openSqliteStore(join(dir, `${name}.db`));
    stores.push(store);
    return store;
  };

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'broker-audit-retention-'));
  });
  after(async () => {
    for (const store of stores) await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('logs audit_prune_failed when the store refuses, keeps its schedule, and prunes on a later run', async () => {
    const store = open('failing');
    const lines: string[] = [];
    const db = sqliteHandle(store);
    insertAudit(store, Date.now() - 100 * DAY_MS, 'failing-old', ['a', 'b']);
    // The table gone for a while: each prune fails until it is back.
    db.exec('ALTER TABLE audit_events RENAME TO audit_events_away');
    const retention = startAuditRetention(
      store.audit,
      90,
      createLogger('debug', (l) => lines.push(l)),
      { firstDelayMs: 0, intervalMs: 10 },
    );
    try {
      const failures = await eventually(
        'two failed runs',
        () => events(lines, 'audit_prune_failed').length >= 2 && events(lines, 'audit_prune_failed'),
      );
      assert.equal(failures[0]!.level, 'warn');
      assert.match(String(failures[0]!.message), /no such table: audit_events/);
      db.exec('ALTER TABLE audit_events_away RENAME TO audit_events');
      const pruned = await eventually('audit_pruned', () => events(lines, 'audit_pruned')[0]);
      assert.equal(pruned.deleted, 2);
      assert.deepEqual(await details(store, 'failing-old'), []);
    } finally {
      await retention.close();
    }
  });

  it('keeps every row with AUDIT_RETENTION_DAYS=0 (nothing is scheduled)', async () => {
    const kept = open('forever');
    const pruned = open('pruned');
    const lines: string[] = [];
    const log = createLogger('debug', (l) => lines.push(l));
    insertAudit(kept, Date.now() - 4000 * DAY_MS, 'ancient', ['kept']);
    insertAudit(pruned, Date.now() - 4000 * DAY_MS, 'ancient', ['pruned']);
    // Timers of the same delay fire in the order they were set: once the second has pruned, the first would have run too.
    const forever = startAuditRetention(kept.audit, 0, log, { firstDelayMs: 0, intervalMs: 10 });
    const ninety = startAuditRetention(pruned.audit, 90, log, { firstDelayMs: 0, intervalMs: 10 });
    try {
      await eventually('the 90-day store pruned', () => events(lines, 'audit_pruned')[0]);
      assert.deepEqual(await details(pruned, 'ancient'), []);
      assert.deepEqual(await details(kept, 'ancient'), ['kept']);
      assert.equal(events(lines, 'audit_pruned').length, 1, 'only the store with a retention was pruned');
    } finally {
      await forever.close();
      await ninety.close();
    }
  });
});
