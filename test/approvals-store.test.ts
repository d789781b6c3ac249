// The ApprovalRepository contract (src/store/approvals.ts), run against both stores like
// test/store-contract.test.ts: SQLite (temp files) and PostgreSQL (a throwaway cluster), each with
// two instances on one database, so a difference between the dialects, or a race between
// instances, fails here.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { openPostgresStore } from '../src/store/postgres/index.js';
import { openSqliteStore } from '../src/store/sqlite/index.js';
import type { NewApprovalRequest, Store } from '../src/store/index.js';
import { postgresSkipReason, startPostgres } from './support/postgres.js';

const ISS = 'https://idp.example.com';
const MINUTE = 60_000;
let n = 0;

function request(subject: string, binding: string, overrides: Partial<NewApprovalRequest> = {}): NewApprovalRequest {
  return {
    id: `apr_${++n}_${subject}`,
    binding,
    issuer: ISS,
    subject,
    client_name: 'Claude',
    tool: 'github_mcp_delete_repository',
    upstream: 'github',
    provider: 'github',
    account: 'octocat',
    policy_version: 'v1',
    rule_id: 'r1',
    service_id: '',
    key_id: 'k1',
    sealed_call: 'v1.sealed',
    expires_at: Date.now() + 15 * MINUTE,
    ...overrides,
  };
}

const approve = (subject: string) => ({ issuer: ISS, subject, name: subject, verdict: 'approve' as const, reason: null });

interface Backend {
  database(): Promise<() => Promise<Store>>;
  destroy(): Promise<void>;
}

function approvalContract(name: string, skip: string | false, start: () => Promise<Backend>): void {
  describe(`approval repository contract: ${name}`, { skip }, () => {
    let backend: Backend;
    const opened: Store[] = [];
    before(async () => {
      backend = await start();
    });
    after(async () => {
      await Promise.all(opened.map((s) => s.close()));
      await backend?.destroy();
    });

    async function two(): Promise<[Store, Store]> {
      const open = await backend.database();
      const a = await open();
      const b = await open();
      opened.push(a, b);
      return [a, b];
    }

    test('openOrCreate finds the live request with the same binding (pending, approved or denied), and never opens two at once', async () => {
      const [a, b] = await two();
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).approvals.openOrCreate(request('alice', 'B1'), 20)),
      );
      assert.equal(new Set(results.map((r) => r.request.id)).size, 1, 'one request for one binding');
      assert.equal(results.filter((r) => r.created).length, 1);
      const id = results[0]!.request.id;
      assert.equal(results[0]!.request.status, 'pending');
      assert.equal((await b.approvals.openOrCreate(request('bob', 'B1'), 20)).created, true, 'the binding is per requester');
      await a.approvals.decide(id, { ...approve('m1'), verdict: 'deny', reason: 'no' }, 1, MINUTE);
      const again = await b.approvals.openOrCreate(request('alice', 'B1'), 20);
      assert.deepEqual([again.created, again.request.id, again.request.status], [false, id, 'denied'], 'a denied request still answers');
    });

    test('openOrCreate skips expired and used requests, and supersedes the oldest pending beyond the cap', async () => {
      const [a] = await two();
      const now = Date.now();
      const old = await a.approvals.openOrCreate(request('carol', 'B2', { expires_at: now + 1_000 }), 20, now);
      const later = await a.approvals.openOrCreate(request('carol', 'B2'), 20, now + 2_000);
      assert.equal(later.created, true, 'an expired request is not found');
      assert.notEqual(later.request.id, old.request.id);
      assert.equal((await a.approvals.settledAmong([old.request.id], now + 2_000))[0]?.status, 'expired');

      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await a.approvals.openOrCreate(request('dave', `cap-${i}`), 3, now + i)).request.id);
      const fourth = await a.approvals.openOrCreate(request('dave', 'cap-3'), 3, now + 10);
      assert.deepEqual(fourth.superseded, [ids[0]]);
      assert.equal((await a.approvals.byId(ids[0]!))?.reason, 'superseded');
      assert.equal((await a.approvals.byId(ids[0]!))?.status, 'expired');
    });

    test('decide: one decision per approver; quorum of distinct approvers approves, across instances; a closed request takes none', async () => {
      const [a, b] = await two();
      const { request: r } = await a.approvals.openOrCreate(request('erin', 'B3'), 20);
      const results = await Promise.all([
        a.approvals.decide(r.id, approve('m1'), 2, 5 * MINUTE),
        b.approvals.decide(r.id, approve('m1'), 2, 5 * MINUTE),
        b.approvals.decide(r.id, approve('m2'), 2, 5 * MINUTE),
      ]);
      // m1's second decision is refused either way: as m1's own (already_decided), or, when m1 and m2
      // reached the quorum first, because the request is approved and closed.
      const kinds = results.map((x) => x.kind).sort();
      assert.deepEqual(
        kinds.filter((k) => k === 'recorded'),
        ['recorded', 'recorded'],
        JSON.stringify(kinds),
      );
      assert.ok(['already_decided', 'closed'].includes(kinds[0]!), JSON.stringify(kinds));
      assert.equal(results[0]!.kind === 'recorded' ? results[1]!.kind : results[0]!.kind, kinds[0], 'the refused one is an m1');
      const row = await b.approvals.byId(r.id);
      assert.equal(row?.status, 'approved');
      assert.ok(row && row.decided_at !== null && row.expires_at === row.decided_at + 5 * MINUTE, 'valid for the TTL from the decision');
      assert.deepEqual((await a.approvals.decisions(r.id)).map((d) => d.subject).sort(), ['m1', 'm2']);
      assert.equal((await a.approvals.decide(r.id, approve('m3'), 2, MINUTE)).kind, 'closed');
      assert.equal((await a.approvals.decide('apr_missing', approve('m3'), 1, MINUTE)).kind, 'closed');
    });

    test('take: exactly one of concurrent takers without reuse; every taker within the lifetime with reuse; none once expired', async () => {
      const [a, b] = await two();
      const once = (await a.approvals.openOrCreate(request('frank', 'B4'), 20)).request;
      await a.approvals.decide(once.id, approve('m1'), 1, MINUTE);
      const takers = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 ? a : b).approvals.take(once.id, false)));
      assert.equal(takers.filter(Boolean).length, 1);
      const used = await a.approvals.byId(once.id);
      assert.deepEqual([used?.status, used?.use_count], ['used', 1]);

      const reusable = (await a.approvals.openOrCreate(request('frank', 'B5'), 20)).request;
      const decided = await a.approvals.decide(reusable.id, approve('m1'), 1, MINUTE);
      assert.equal(
        (await Promise.all([a.approvals.take(reusable.id, true), b.approvals.take(reusable.id, true)])).filter(Boolean).length,
        2,
      );
      assert.equal((await b.approvals.byId(reusable.id))?.use_count, 2);
      const expiry = decided.kind === 'recorded' ? decided.request.expires_at : 0;
      assert.equal(await a.approvals.take(reusable.id, true, expiry + 1), undefined);
    });

    test('settledAmong and settledSince report what left pending; pending and mine list newest first', async () => {
      const [a, b] = await two();
      const since = Date.now() - 1;
      const p = (await a.approvals.openOrCreate(request('gina', 'B6'), 20, since + 1)).request;
      const q = (await a.approvals.openOrCreate(request('gina', 'B7'), 20, since + 2)).request;
      assert.deepEqual(await b.approvals.settledAmong([p.id, q.id]), []);
      await a.approvals.decide(q.id, { ...approve('m1'), verdict: 'deny', reason: 'no' }, 1, MINUTE);
      assert.deepEqual(await b.approvals.settledAmong([p.id, q.id]), [{ id: q.id, status: 'denied' }]);
      assert.deepEqual(
        (await b.approvals.settledSince(since)).filter((r) => [p.id, q.id].includes(r.id)),
        [{ id: q.id, status: 'denied' }],
      );
      assert.deepEqual(
        (await b.approvals.mine({ issuer: ISS, subject: 'gina' }, 10)).map((r) => r.id),
        [q.id, p.id],
      );
      assert.ok((await b.approvals.pending(100)).some((r) => r.id === p.id));
      assert.ok(!(await b.approvals.pending(100)).some((r) => r.id === q.id), 'only pending ones');
    });

    test('prune deletes requests (and their decisions) past their grace, and nothing live', async () => {
      const [a] = await two();
      const now = Date.now();
      const live = (await a.approvals.openOrCreate(request('hank', 'B8'), 20, now)).request;
      const done = (await a.approvals.openOrCreate(request('hank', 'B9'), 20, now)).request;
      await a.approvals.decide(done.id, approve('m1'), 1, MINUTE, now);
      await a.approvals.take(done.id, false, now);
      assert.equal(await a.approvals.prune(60 * MINUTE, now + MINUTE), 0);
      assert.ok((await a.approvals.prune(60 * MINUTE, now + 61 * MINUTE)) >= 1);
      assert.equal(await a.approvals.byId(done.id), undefined);
      assert.deepEqual(await a.approvals.decisions(done.id), []);
      assert.ok(await a.approvals.byId(live.id), 'a pending request inside its window stays');
    });
  });
}

approvalContract('SQLite', false, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'broker-approval-store-'));
  let i = 0;
  return {
    async database() {
      const path = join(dir, `approvals-${++i}.db`);
      return async () => openSqliteStore(path);
    },
    async destroy() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

approvalContract('PostgreSQL', postgresSkipReason(), async () => {
  const server = await startPostgres();
  return {
    async database() {
      const url = await server.createDatabase();
      return () => openPostgresStore(url);
    },
    destroy: () => server.destroy(),
  };
});
