// The approval gate (src/approvals/) over both stores: one request per bound call, the binding
// matrix (same call runs once; changed arguments, another account, another user, an edited policy
// or an expired approval each need a new approval), reuse, quorum, self-approval, deny with a
// reason, held checks released by a decision, and three gates over one PostgreSQL database.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ApprovalGates, MAX_OPEN_PER_REQUESTER, type Approver } from '../src/approvals/index.js';
import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import { Sealer } from '../src/crypto/index.js';
import type { BrokerEvents, BrokerEventType, EventSink } from '../src/events/index.js';
import type { ApprovalRule, ApprovalSubject } from '../src/policy/types.js';
import { openPostgresStore } from '../src/store/postgres/index.js';
import { openSqliteStore } from '../src/store/sqlite/index.js';
import type { Store } from '../src/store/index.js';
import { eventually } from './support/eventually.js';
import { postgresSkipReason, startPostgres, type PgServer } from './support/postgres.js';

const ISS = 'https://idp.example.com';
const PUBLIC_URL = new URL('https://broker.example.com');
const SEALER = new Sealer([Buffer.alloc(32, 7)]);

function subject(overrides: Partial<ApprovalSubject> & { sub?: string } = {}): ApprovalSubject {
  const { sub = 'alice', ...rest } = overrides;
  return {
    requester: principalFromVerifiedClaims(ISS, sub, sub),
    requesterClaims: { name: `${sub} Example`, email: `${sub}@example.com`, groups: ['eng'] },
    clientName: 'Claude',
    tool: 'github_mcp_delete_repository',
    upstream: 'github',
    args: { owner: 'acme', repo: 'widgets' },
    argsDigest: 'digest-widgets',
    provider: 'github',
    account: 'octocat',
    policyVersion: 'v1',
    serviceId: '',
    ...rest,
  };
}

function rule(overrides: Partial<ApprovalRule> = {}): ApprovalRule {
  return {
    ruleId: 'delete-needs-a-maintainer',
    mayApprove: (p) => Array.isArray(p.claims.groups) && p.claims.groups.includes('maintainers'),
    quorum: 1,
    selfApproval: false,
    ttlSeconds: 900,
    reuse: false,
    ...overrides,
  };
}

function approver(sub: string, groups: string[] = ['maintainers']): Approver {
  return { iss: ISS, sub, claims: { groups }, name: `${sub} Maintainer` };
}

class RecordingEvents implements EventSink {
  readonly seen: Array<{ type: BrokerEventType; data: BrokerEvents[BrokerEventType] }> = [];
  emit<K extends BrokerEventType>(type: K, data: BrokerEvents[K]): Promise<void> {
    this.seen.push({ type, data });
    return Promise.resolve();
  }
  of(type: BrokerEventType) {
    return this.seen.filter((e) => e.type === type);
  }
}

interface Backend {
  open(): Promise<() => Promise<Store>>;
  close(): Promise<void>;
}

function gateSuite(name: string, skip: string | false, backend: () => Promise<Backend>): void {
  describe(`approval gate: ${name}`, { skip }, () => {
    let b: Backend;
    const stores: Store[] = [];
    const gates: ApprovalGates[] = [];
    before(async () => {
      b = await backend();
    });
    after(async () => {
      for (const g of gates) g.close();
      await Promise.all(stores.map((s) => s.close()));
      await b?.close();
    });

    /** A gate over a new database (or over `open`, another instance of one), with its events and a movable clock. */
    async function gateOn(
      open?: () => Promise<Store>,
      rules: ApprovalRule[] = [rule()],
      policyVersion = 'v1',
    ): Promise<{ gate: ApprovalGates; store: Store; events: RecordingEvents; clock: { now: number }; open: () => Promise<Store> }> {
      const opener = open ?? (await b.open());
      const store = await opener();
      stores.push(store);
      const events = new RecordingEvents();
      const clock = { now: Date.now() };
      const gate = new ApprovalGates({
        store,
        events,
        clock: () => clock.now,
        publicUrl: PUBLIC_URL,
        approvalRule: (id) => rules.find((r) => r.ruleId === id),
        policyVersion,
        sealer: SEALER,
      });
      gates.push(gate);
      return { gate, store, events, clock, open: opener };
    }

    test('the same call finds its one request; approved, it runs exactly once; the next run needs a new approval', async () => {
      const { gate, store, events } = await gateOn();
      const first = await gate.check(subject(), rule(), 0);
      assert.equal(first.kind, 'pending');
      assert.ok(first.kind === 'pending' && first.statusUrl === `https://broker.example.com/approvals/${first.requestId}`);
      const repeat = await gate.check(subject(), rule(), 0);
      assert.equal(repeat.requestId, first.requestId, 'the repeat finds the same request');
      assert.equal(events.of('approval.requested').length, 1, 'the approvers are told once');
      assert.equal((await store.audit.list({ event: 'approval_requested' })).length, 1);

      const decided = await gate.decide(first.requestId, approver('mallory-maintainer'), 'approve', undefined);
      assert.equal(decided.kind, 'recorded');
      assert.deepEqual(await gate.check(subject(), rule(), 0), { kind: 'approved', requestId: first.requestId });
      const used = await store.approvals.byId(first.requestId);
      assert.equal(used?.status, 'used');
      assert.equal(used?.use_count, 1);
      assert.equal((await store.audit.list({ event: 'approval_used' })).length, 1);

      const again = await gate.check(subject(), rule(), 0);
      assert.equal(again.kind, 'pending', 'an approval runs one call');
      assert.notEqual(again.requestId, first.requestId);
    });

    test('the binding: changed arguments, another account, another user, an edited policy each need a new approval', async () => {
      const { gate } = await gateOn();
      const asked = await gate.check(subject(), rule(), 0);
      await gate.decide(asked.requestId, approver('maintainer-1'), 'approve', undefined);
      const variants: Array<[string, ApprovalSubject]> = [
        ['changed arguments', subject({ args: { owner: 'acme', repo: 'gadgets' }, argsDigest: 'digest-gadgets' })],
        ['another account', subject({ account: 'hubot' })],
        ['another user', subject({ sub: 'bob' })],
        ['an edited policy', subject({ policyVersion: 'v2' })],
        ['another upstream', subject({ upstream: 'other' })],
        ['another tool', subject({ tool: 'github_mcp_create_issue' })],
      ];
      for (const [what, variant] of variants) {
        const outcome = await gate.check(variant, rule(), 0);
        assert.equal(outcome.kind, 'pending', `${what}: not approved`);
        assert.notEqual(outcome.requestId, asked.requestId, `${what}: a request of its own`);
      }
      assert.deepEqual(
        await gate.check(subject(), rule(), 0),
        { kind: 'approved', requestId: asked.requestId },
        'the approved call still runs',
      );
    });

    test('an expired approval, and a request nobody decided in time, need a new one', async () => {
      const { gate, clock } = await gateOn(undefined, [rule({ ttlSeconds: 60 })]);
      const asked = await gate.check(subject(), rule({ ttlSeconds: 60 }), 0);
      await gate.decide(asked.requestId, approver('maintainer-1'), 'approve', undefined);
      clock.now += 61_000;
      const late = await gate.check(subject(), rule({ ttlSeconds: 60 }), 0);
      assert.equal(late.kind, 'pending');
      assert.notEqual(late.requestId, asked.requestId);
      clock.now += 61_000;
      const undecided = await gate.decide(late.requestId, approver('maintainer-1'), 'approve', undefined);
      assert.equal(undecided.kind, 'closed', 'an expired request cannot be approved any more');
    });

    test('with reuse, one approval runs the same call again within its lifetime, and not after', async () => {
      const { gate, clock, store } = await gateOn(undefined, [rule({ reuse: true, ttlSeconds: 60 })]);
      const r = rule({ reuse: true, ttlSeconds: 60 });
      const asked = await gate.check(subject(), r, 0);
      await gate.decide(asked.requestId, approver('maintainer-1'), 'approve', undefined);
      assert.equal((await gate.check(subject(), r, 0)).kind, 'approved');
      assert.equal((await gate.check(subject(), r, 0)).kind, 'approved');
      assert.equal((await store.approvals.byId(asked.requestId))?.use_count, 2);
      assert.equal((await gate.check(subject({ argsDigest: 'other' }), r, 0)).kind, 'pending', 'reuse is for the same call only');
      clock.now += 61_000;
      assert.equal((await gate.check(subject(), r, 0)).kind, 'pending');
    });

    test('of concurrent runs of one approved call, exactly one runs', async () => {
      const { gate } = await gateOn();
      const asked = await gate.check(subject(), rule(), 0);
      await gate.decide(asked.requestId, approver('maintainer-1'), 'approve', undefined);
      const outcomes = await Promise.all(Array.from({ length: 6 }, () => gate.check(subject(), rule(), 0)));
      assert.equal(outcomes.filter((o) => o.kind === 'approved').length, 1, JSON.stringify(outcomes));
      assert.ok(outcomes.every((o) => o.kind === 'approved' || o.kind === 'pending'));
    });

    test('quorum 2 needs two distinct approvers; one approver deciding twice counts once', async () => {
      const r = rule({ quorum: 2 });
      const { gate, events } = await gateOn(undefined, [r]);
      const asked = await gate.check(subject(), r, 0);
      assert.equal((await gate.decide(asked.requestId, approver('m1'), 'approve', undefined)).kind, 'recorded');
      assert.equal((await gate.check(subject(), r, 0)).kind, 'pending', 'one of two');
      assert.equal((await gate.decide(asked.requestId, approver('m1'), 'approve', undefined)).kind, 'already_decided');
      assert.equal((await gate.check(subject(), r, 0)).kind, 'pending', 'still one of two');
      assert.equal((await gate.decide(asked.requestId, approver('m2'), 'approve', undefined)).kind, 'recorded');
      assert.deepEqual(
        events.of('approval.decided').map((e) => (e.data as BrokerEvents['approval.decided']).status),
        ['pending', 'approved'],
      );
      assert.equal((await gate.check(subject(), r, 0)).kind, 'approved');
      assert.equal((await gate.decide(asked.requestId, approver('m3'), 'approve', undefined)).kind, 'closed', 'a used request is closed');
    });

    test('the requester counts only with selfApproval; someone the rule does not name cannot decide', async () => {
      const { gate } = await gateOn(undefined, [rule(), rule({ ruleId: 'confirm', selfApproval: true })]);
      const asked = await gate.check(subject(), rule(), 0);
      const alice = { iss: ISS, sub: 'alice', claims: { groups: ['maintainers'] }, name: 'Alice' };
      assert.equal(
        (await gate.decide(asked.requestId, alice, 'approve', undefined)).kind,
        'not_found',
        'not their own, without selfApproval',
      );
      assert.equal((await gate.decide(asked.requestId, approver('eve', ['eng']), 'approve', undefined)).kind, 'not_found');
      assert.equal(await gate.view(asked.requestId, approver('eve', ['eng'])), undefined, 'nor see it');
      assert.equal((await gate.check(subject(), rule(), 0)).kind, 'pending');

      const confirm = rule({ ruleId: 'confirm', selfApproval: true });
      const own = await gate.check(subject(), confirm, 0);
      assert.notEqual(own.requestId, asked.requestId, 'another rule, another request');
      assert.equal((await gate.decide(own.requestId, alice, 'approve', undefined)).kind, 'recorded');
      assert.equal((await gate.check(subject(), confirm, 0)).kind, 'approved');
    });

    test('one deny denies, with its reason; the same call stays denied and cannot be decided again', async () => {
      const r = rule({ quorum: 2 });
      const { gate, store } = await gateOn(undefined, [r]);
      const asked = await gate.check(subject(), r, 0);
      await gate.decide(asked.requestId, approver('m1'), 'approve', undefined);
      await gate.decide(asked.requestId, approver('m2'), 'deny', 'Not during the release freeze.');
      assert.deepEqual(await gate.check(subject(), r, 0), {
        kind: 'denied',
        requestId: asked.requestId,
        reason: 'Not during the release freeze.',
      });
      assert.equal((await gate.decide(asked.requestId, approver('m3'), 'approve', undefined)).kind, 'closed');
      const decided = await store.audit.list({ event: 'approval_decided' });
      assert.deepEqual(
        decided.map((r) => [r.subject, r.detail?.includes('verdict=')]),
        [
          ['m1', true],
          ['m2', true],
        ],
      );
    });

    test('a held check is released by the decision; an approval of a stale policy no longer applies', async () => {
      const { gate, open } = await gateOn();
      const asked = await gate.check(subject(), rule(), 0);
      const held = gate.check(subject(), rule(), 20_000);
      await eventually('the check to be held', () => gate.watcher.waiting === 1);
      const started = Date.now();
      await gate.decide(asked.requestId, approver('m1'), 'approve', undefined);
      assert.deepEqual(await held, { kind: 'approved', requestId: asked.requestId });
      assert.ok(Date.now() - started < 5_000);

      const edited = (await gateOn(open, [rule()], 'v2')).gate;
      const old = await gate.check(subject(), rule(), 0);
      assert.equal((await edited.decide(old.requestId, approver('m1'), 'approve', undefined)).kind, 'not_found');
      const alice = { iss: ISS, sub: 'alice', claims: {}, name: 'Alice' };
      assert.equal(
        (await edited.decide(old.requestId, alice, 'approve', undefined)).kind,
        'stale',
        'its requester is told it no longer applies',
      );
      assert.equal((await edited.view(old.requestId, alice))?.applies, false);
    });

    test('the arguments are sealed at rest, shown to approvers in full', async () => {
      const { gate, store } = await gateOn();
      const args = { owner: 'acme', repo: 'widgets', note: 'secret-note-' + 'x'.repeat(3000) };
      const asked = await gate.check(subject({ args, argsDigest: 'long' }), rule(), 0);
      const row = await store.approvals.byId(asked.requestId);
      assert.ok(row && !row.sealed_call.includes('secret-note') && !row.sealed_call.includes('alice@example.com'));
      const view = await gate.view(asked.requestId, approver('m1'));
      assert.deepEqual(view?.call?.args, args);
      assert.equal(view?.call?.requester.email, 'alice@example.com');
      assert.equal(view?.canDecide, true);
    });

    test('a requester has at most 20 pending requests: a newer one supersedes the oldest', async () => {
      assert.equal(MAX_OPEN_PER_REQUESTER, 20, 'as SECURITY.md and docs/approvals.md say');
      const { gate, store, clock } = await gateOn();
      const ids: string[] = [];
      for (let i = 0; i <= MAX_OPEN_PER_REQUESTER; i++, clock.now++)
        ids.push((await gate.check(subject({ argsDigest: `d${i}` }), rule(), 0)).requestId);
      assert.equal((await store.approvals.byId(ids[0]!))?.status, 'expired');
      assert.equal((await store.approvals.byId(ids[0]!))?.reason, 'superseded');
      assert.equal((await store.approvals.byId(ids[1]!))?.status, 'pending');
      assert.equal(
        (await store.approvals.mine({ issuer: ISS, subject: 'alice' }, 100)).filter((r) => r.status === 'pending').length,
        MAX_OPEN_PER_REQUESTER,
      );
      const bobs = await gate.check(subject({ sub: 'bob' }), rule(), 0);
      assert.equal((await store.approvals.byId(bobs.requestId))?.status, 'pending', "another requester's are not touched");
    });

    test('the webhooks carry ids, the tool, the requester and the decision, never the arguments', async () => {
      const { gate, events } = await gateOn();
      const asked = await gate.check(subject({ args: { repo: 'top-secret-repo' }, argsDigest: 'ts' }), rule(), 0);
      await gate.decide(asked.requestId, approver('m1'), 'deny', 'no secrets here either');
      const { webhookPayload } = await import('../src/webhooks/index.js');
      for (const e of events.seen) {
        const body = webhookPayload(e.type, e.data, new Date());
        assert.doesNotMatch(body, /top-secret-repo|no secrets here/);
        assert.match(body, new RegExp(asked.requestId));
      }
      const decided = JSON.parse(
        webhookPayload('approval.decided', events.of('approval.decided')[0]!.data as BrokerEvents['approval.decided'], new Date()),
      ) as {
        data: { decision: { verdict: string; approver: { subject: string } }; status: string; tool: string };
      };
      assert.deepEqual(decided.data.decision, { approver: { issuer: ISS, subject: 'm1' }, verdict: 'deny' });
      assert.equal(decided.data.status, 'denied');
      assert.equal(decided.data.tool, 'github_mcp_delete_repository');
    });

    test('the webhook outbox rows land in the transaction of the request and of each decision', async () => {
      const store = await (await b.open())();
      stores.push(store);
      const { WebhookOutbox } = await import('../src/webhooks/index.js');
      const events = new WebhookOutbox([
        {
          id: 'chat',
          url: new URL('https://chat.example.com/hook'),
          events: ['approval.requested', 'approval.decided'],
          secret: Buffer.alloc(24, 1),
        },
      ]);
      const gate = new ApprovalGates({
        store,
        events,
        publicUrl: PUBLIC_URL,
        approvalRule: () => rule({ quorum: 2 }),
        policyVersion: 'v1',
        sealer: SEALER,
      });
      gates.push(gate);
      const asked = await gate.check(subject({ args: { repo: 'outbox-secret' }, argsDigest: 'ob' }), rule({ quorum: 2 }), 0);
      await gate.check(subject({ args: { repo: 'outbox-secret' }, argsDigest: 'ob' }), rule({ quorum: 2 }), 0);
      await gate.decide(asked.requestId, approver('m1'), 'approve', undefined);
      await gate.decide(asked.requestId, approver('m2'), 'approve', undefined);
      const claimed = await store.webhooks.claim('test', ['chat'], 10, 60_000);
      assert.deepEqual(
        claimed.map((r) => r.event_type).sort(),
        ['approval.decided', 'approval.decided', 'approval.requested'],
        'one for the request (not for its repeat), one per decision',
      );
      for (const row of claimed) assert.doesNotMatch(row.payload, /outbox-secret/);
    });

    test('prune removes requests an hour past their use, with their decisions', async () => {
      const { gate, store, clock } = await gateOn(undefined, [rule({ ttlSeconds: 60 })]);
      const asked = await gate.check(subject(), rule({ ttlSeconds: 60 }), 0);
      await gate.decide(asked.requestId, approver('m1'), 'deny', 'no');
      assert.equal(await gate.prune(), 0);
      clock.now += 2 * 3_600_000;
      assert.ok((await gate.prune()) >= 1);
      assert.equal(await store.approvals.byId(asked.requestId), undefined);
      assert.deepEqual(await store.approvals.decisions(asked.requestId), []);
    });

    test('a decision recorded by another instance releases a check held here (pushed on PostgreSQL, polled on SQLite)', async () => {
      const here = await gateOn();
      const there = await gateOn(here.open);
      const asked = await here.gate.check(subject({ argsDigest: 'two-instances' }), rule(), 0);
      const held = here.gate.check(subject({ argsDigest: 'two-instances' }), rule(), 20_000);
      await eventually('the check held here', () => here.gate.watcher.waiting === 1);
      const started = Date.now();
      assert.equal((await there.gate.decide(asked.requestId, approver('m1'), 'approve', undefined)).kind, 'recorded');
      assert.deepEqual(await held, { kind: 'approved', requestId: asked.requestId });
      assert.ok(Date.now() - started < 3_000, `released within a poll or a push (${Date.now() - started} ms)`);
    });

    if (name === 'PostgreSQL') {
      test('three instances: the request made on one, approved on a second, releases the check held on a third', async () => {
        const first = await gateOn();
        const second = await gateOn(first.open);
        const third = await gateOn(first.open);
        const asked = await first.gate.check(subject(), rule(), 0);
        const held = third.gate.check(subject(), rule(), 20_000);
        await eventually('the check held on the third instance', () => third.gate.watcher.waiting === 1);
        const started = Date.now();
        assert.equal((await second.gate.decide(asked.requestId, approver('m1'), 'approve', undefined)).kind, 'recorded');
        assert.deepEqual(await held, { kind: 'approved', requestId: asked.requestId });
        assert.ok(Date.now() - started < 1_500, `woken by the push, not a 2 s poll (${Date.now() - started} ms)`);
        assert.equal((await first.gate.check(subject(), rule(), 0)).kind, 'pending', 'and it ran once');
      });
    }
  });
}

gateSuite('SQLite', false, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'broker-approvals-'));
  let n = 0;
  return {
    async open() {
      const path = join(dir, `approvals-${++n}.db`);
      return async () => openSqliteStore(path);
    },
    async close() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

gateSuite('PostgreSQL', postgresSkipReason(), async () => {
  const server: PgServer = await startPostgres();
  return {
    async open() {
      const url = await server.createDatabase();
      return () => openPostgresStore(url);
    },
    close: () => server.destroy(),
  };
});
