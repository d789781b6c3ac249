// The limits on load counted in each process first and added to the shared counters every 250 ms
// (src/http/reconciled-counters.ts): exact on one instance, no write per request, and across
// instances past the limit by at most what the others admitted in the last 1.25 s (SECURITY.md, guarantee 84).
// Two instances are two stores on one SQLite file, as two processes would be.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { auditChainKey, openSqliteStore, type SqliteStore } from '../src/store/index.js';
import { HEARD_WITHIN_MS, MAX_LOCAL_KEYS, ReconciledCounters } from '../src/http/reconciled-counters.js';
import type { CounterStore } from '../src/http/rate-limits.js';
import { eventually } from './support/eventually.js';
import { makeTempDir, type TempDir } from './support/temp-dir.js';

const KEY = auditChainKey(Buffer.from('a-broker-secret-of-at-least-32-bytes!!', 'utf8'));
const MINUTE = 60_000;
/** Never flushes by itself: the tests flush when they mean to. */
const BY_HAND = 3_600_000;

const storedHits = (store: SqliteStore, key: string): number =>
  (store.db.prepare('SELECT hits FROM rate_limit_windows WHERE key_hash = ?').get(key) as { hits: number } | undefined)?.hits ?? 0;

type Hit = CounterStore['rateLimits']['hit'];

/** The store's counters with `hit` answered by `hit` (given the store's own); undo and reset as they are. */
const withHit = (store: SqliteStore, hit: (real: Hit, ...args: Parameters<Hit>) => ReturnType<Hit>): CounterStore => ({
  rateLimits: {
    hit: (...args) => hit((...a) => store.rateLimits.hit(...a), ...args),
    undo: (key) => store.rateLimits.undo(key),
    reset: (key) => store.rateLimits.reset(key),
  },
});

/** The store's counters, counting the statements that reach it. */
function counting(store: SqliteStore): CounterStore & { hits: number } {
  const counted = Object.assign(
    withHit(store, (real, ...args) => {
      counted.hits++;
      return real(...args);
    }),
    { hits: 0 },
  );
  return counted;
}

describe('rate-limit counters reconciled through the store', () => {
  let dir: TempDir;
  let n = 0;
  const stores: SqliteStore[] = [];
  const open = (file = `counters-${++n}.db`) => {
    const store = openSqliteStore(dir.file(file), { auditChain: KEY });
    stores.push(store);
    return store;
  };
  const failures: unknown[] = [];

  before(() => (dir = makeTempDir('reconciled-counters-')));
  after(async () => {
    for (const s of stores) await s.close();
    dir.close();
  });

  it('counts exactly on one instance, waiting for the store only on a key’s first hit of a window', async () => {
    const store = open();
    const shared = counting(store);
    const counters = new ReconciledCounters(shared, (err) => failures.push(err), BY_HAND);
    const first = await counters.rateLimits.hit('user-a', MINUTE);
    assert.equal(first.hits, 1);
    const rest = await Promise.all(Array.from({ length: 99 }, () => counters.rateLimits.hit('user-a', MINUTE)));
    assert.deepEqual(
      rest.map((r) => r.hits),
      Array.from({ length: 99 }, (_, i) => i + 2),
      'each hit has its own place in the count',
    );
    assert.ok(
      rest.every((r) => r.resetAt === first.resetAt),
      'in the window the store opened',
    );
    assert.equal(shared.hits, 1, 'one statement reached the store for 100 hits');
    assert.equal(storedHits(store, 'user-a'), 1, 'the 99 later hits are not written yet');

    await counters.flush();
    assert.equal(shared.hits, 2, 'a flush adds them in one statement');
    assert.equal(storedHits(store, 'user-a'), 100, 'and the shared count is exact');
    assert.equal((await counters.rateLimits.hit('user-a', MINUTE)).hits, 101);
    await counters.close();
    assert.equal(storedHits(store, 'user-a'), 101, 'close sends what is counted here');
    assert.deepEqual(failures, []);
  });

  it('flushes by itself within its period', async () => {
    const store = open();
    const counters = new ReconciledCounters(store, (err) => failures.push(err), 50);
    for (let i = 0; i < 10; i++) await counters.rateLimits.hit('user-b', MINUTE);
    assert.equal(storedHits(store, 'user-b'), 1);
    await eventually('the flush', () => storedHits(store, 'user-b') >= 10);
    assert.equal(storedHits(store, 'user-b'), 10, 'in the store without anyone asking');
    await counters.close();
  });

  it('holds a limit across two instances: past it, an instance passes only on a count heard within the last second, then asks again and refuses', async (t) => {
    t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
    const a = open('two-instances.db');
    const b = open('two-instances.db');
    const onA = new ReconciledCounters(counting(a), (err) => failures.push(err), BY_HAND);
    const sharedB = counting(b);
    const onB = new ReconciledCounters(sharedB, (err) => failures.push(err), BY_HAND);
    const LIMIT = 40;
    const admitted = { a: 0, b: 0 };
    const call = async (side: 'a' | 'b') => {
      const { hits } = await (side === 'a' ? onA : onB).rateLimits.hit('user-c', MINUTE);
      if (hits <= LIMIT) admitted[side]++;
    };
    // Within one second and no flush: each goes by the count it heard (A: 1, B: 2) plus its own hits.
    for (let i = 0; i < 30; i++) {
      await call('a');
      await call('b');
    }
    assert.deepEqual(
      admitted,
      { a: 30, b: 30 },
      'neither has heard of the other’s later hits: the bound is what the other admitted meanwhile',
    );

    await onA.flush();
    await onB.flush();
    assert.equal(storedHits(a, 'user-c'), 60, 'the shared count has every hit of both');
    for (let i = 0; i < 5; i++) await call('b');
    assert.equal(admitted.b, 30, 'B heard 60 at its flush and refuses');
    for (let i = 0; i < 3; i++) await call('a');
    assert.equal(admitted.a, 33, 'A heard 31 at its flush, before B’s: it passes on that count while it is fresh');

    // A second later A's count is too old: its next hit asks the store (with A's 3 unsent hits) and is refused.
    t.mock.timers.tick(HEARD_WITHIN_MS + 1);
    const asked = sharedB.hits;
    const { hits } = await onA.rateLimits.hit('user-c', MINUTE);
    assert.equal(hits, 64, 'the shared count (60), A’s 3 unsent hits and this one');
    for (let i = 0; i < 5; i++) await call('a');
    assert.equal(admitted.a, 33, 'and A refuses from then on');
    assert.equal(sharedB.hits, asked, 'B was not asked anything meanwhile');
    await Promise.all([onA.close(), onB.close()]);
    assert.equal(storedHits(a, 'user-c'), 74, 'every hit of both in the shared count');
    assert.deepEqual(failures, []);
  });

  it('answers a key’s hits that come while its count is asked for only after the answer, so one instance never passes the limit', async () => {
    const store = open();
    // The store answers when the test says, one call at a time.
    const held: Array<() => void> = [];
    let calls = 0;
    const slow = withHit(store, (real, ...args) => {
      calls++;
      return new Promise((resolve, reject) => held.push(() => real(...args).then(resolve, reject)));
    });
    const counters = new ReconciledCounters(slow, (err) => failures.push(err), BY_HAND);
    const first = counters.rateLimits.hit('user-f', MINUTE);
    const second = counters.rateLimits.hit('user-f', MINUTE);
    await new Promise((r) => setImmediate(r));
    assert.equal(calls, 1, 'one question to the store for the key, however many hits come meanwhile');
    held.shift()!();
    assert.equal((await first).hits, 1);
    const more = [counters.rateLimits.hit('user-f', MINUTE), counters.rateLimits.hit('user-f', MINUTE)];
    const answers = [(await second).hits, ...(await Promise.all(more)).map((r) => r.hits)];
    assert.deepEqual(answers.sort(), [2, 3, 4], 'every hit has its own place: none is answered twice');
    assert.equal(calls, 1);
    const flushed = counters.flush();
    await new Promise((r) => setImmediate(r));
    held.shift()!();
    await flushed;
    assert.equal(storedHits(store, 'user-f'), 4);
    await counters.close();
  });

  it('sends every hit at close, even after a flush that failed', async () => {
    const store = open();
    let failNext = false;
    const blip = withHit(store, (real, ...args) => {
      if (!failNext) return real(...args);
      failNext = false;
      return Promise.reject(new Error('a blip'));
    });
    const counters = new ReconciledCounters(blip, (err) => failures.push(err), BY_HAND);
    for (let i = 0; i < 9; i++) await counters.rateLimits.hit('user-g', MINUTE);
    failNext = true;
    const failed = counters.flush();
    const closed = counters.close();
    await assert.rejects(failed, /a blip/);
    await closed;
    assert.equal(storedHits(store, 'user-g'), 9, 'the failed flush’s hits went with the close');
  });

  it('starts a new window at the store once the window closes, and forgets the hits of the closed one', async (t) => {
    t.mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
    const store = open();
    const shared = counting(store);
    const counters = new ReconciledCounters(shared, (err) => failures.push(err), BY_HAND);
    for (let i = 0; i < 5; i++) await counters.rateLimits.hit('user-d', 1_000);
    t.mock.timers.tick(1_000);
    await counters.flush();
    assert.equal(storedHits(store, 'user-d'), 1, 'the closed window’s unsent hits are not added to a new one');
    assert.equal(counters.size, 0, 'and its key is forgotten');
    const next = await counters.rateLimits.hit('user-d', 1_000);
    assert.deepEqual(next, { hits: 1, resetAt: 1_002_000 }, 'the first hit of the next window is the store’s');
    assert.equal(shared.hits, 2);
    await counters.close();
  });

  it('keeps a failed flush’s hits for the next, and reports one failure per outage', async () => {
    const store = open();
    let down = false;
    const flaky = withHit(store, (real, ...args) => (down ? Promise.reject(new Error('database is down')) : real(...args)));
    const reported: unknown[] = [];
    const counters = new ReconciledCounters(flaky, (err) => reported.push(err), 20);
    for (let i = 0; i < 4; i++) await counters.rateLimits.hit('user-e', MINUTE);
    down = true;
    for (let i = 0; i < 3; i++) await counters.rateLimits.hit('user-e', MINUTE);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(reported.length, 1, 'one report while the store stays down, however many flushes fail');
    assert.match(String(reported[0]), /database is down/);
    down = false;
    await eventually('a flush once the store is back', () => storedHits(store, 'user-e') >= 7);
    assert.equal(storedHits(store, 'user-e'), 7, 'nothing counted during the outage is lost');
    await counters.close();
  });

  it(`bounds what it keeps: past ${MAX_LOCAL_KEYS} keys a new key is counted at the store on every hit`, async () => {
    const store = open();
    const shared = counting(store);
    const counters = new ReconciledCounters(shared, (err) => failures.push(err), BY_HAND);
    await Promise.all(Array.from({ length: MAX_LOCAL_KEYS }, (_, i) => counters.rateLimits.hit(`address-${i}`, MINUTE)));
    assert.equal(counters.size, MAX_LOCAL_KEYS);
    const before = shared.hits;
    assert.equal((await counters.rateLimits.hit('one-more', MINUTE)).hits, 1);
    assert.equal((await counters.rateLimits.hit('one-more', MINUTE)).hits, 2, 'still exact');
    assert.equal(shared.hits - before, 2, 'each hit went to the store');
    assert.equal(counters.size, MAX_LOCAL_KEYS, 'and nothing more is kept');
    await counters.close();
  });
});
