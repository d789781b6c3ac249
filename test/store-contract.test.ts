// One repository contract, run against both stores: SQLite (temp files) and PostgreSQL (a
// throwaway cluster, see support/postgres.ts). Everything here is what `src/store/types.ts`
// promises, so a difference between the two stores fails here. What only one store has (the
// TransactionGate, busy_timeout, the pool, LISTEN/NOTIFY, outages) stays in http-units.test.ts
// and store-postgres.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { StoreUnavailableError } from '../src/store/errors.js';
import { openPostgresStore } from '../src/store/postgres/index.js';
import { openSqliteStore } from '../src/store/sqlite/index.js';
import {
  OAUTH_FLOW_TTL_MS,
  PENDING_PRUNE_GRACE_MS,
  type LoginTransaction,
  type NewOutboxRow,
  type NewPendingConnection,
  type OAuthFlow,
  type Owner,
  type PendingConnection,
  type Store,
  type UpstreamClientRow,
} from '../src/store/types.js';
import { postgresSkipReason, startPostgres } from './support/postgres.js';
import { pendingRow, connection } from './support/store-rows.js';
import { readThrough, useSuite } from './support/suite.js';

const ALICE: Owner = { issuer: 'https://idp.example.com', subject: 'alice' };
const BOB: Owner = { issuer: 'https://idp.example.com', subject: 'bob' };
const CAROL: Owner = { issuer: 'https://idp.example.com', subject: 'carol' };
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Where a store under test keeps its databases. */
interface Backend {
  /** A new, empty database; each call of the `open` it returns is one more instance on it. */
  database(): Promise<() => Promise<Store>>;
  destroy(): Promise<void>;
}

function loginTransaction(stateHash: string, overrides: Partial<LoginTransaction> = {}): LoginTransaction {
  return {
    state_hash: stateHash,
    session_hash: 'browser-1',
    code_verifier: `cv-${stateHash}`,
    nonce: `n-${stateHash}`,
    return_to: '/connections',
    expires_at: Date.now() + HOUR,
    ...overrides,
  };
}

function oauthFlow(stateHash: string, pendingId: string, overrides: Partial<OAuthFlow> = {}): OAuthFlow {
  return {
    state_hash: stateHash,
    pending_id: pendingId,
    session_hash: 'browser-1',
    code_verifier: `cv-${stateHash}`,
    expires_at: Date.now() + HOUR,
    ...overrides,
  };
}

/** A time a store stamped with Date.now() lies between the instants the test took around the call. */
function assertStamped(at: number | null | undefined, from: number, to: number, what: string): void {
  assert.equal(typeof at, 'number', what);
  assert.ok(at! >= from && at! <= to, `${what}: ${at} not within [${from}, ${to}]`);
}

/** A constraint violation is a bug to report, not "the database is away". */
function constraintError(err: unknown): boolean {
  return err instanceof Error && !(err instanceof StoreUnavailableError) && /unique|duplicate key|foreign key/i.test(err.message);
}

async function eventually(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(5);
  }
}

/** The rows of `rows` whose id is one of `ids`: what a test made, among whatever else the database holds. */
function ours<T extends { id: string }>(rows: T[], ids: readonly string[]): T[] {
  return rows.filter((r) => ids.includes(r.id));
}

function byId<T extends { id: string }>(rows: T[]): T[] {
  return [...rows].sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
}

/** What a re-seal writes: the current key's id and the value sealed under it, in the table's own column. */
type SealedAs<Column extends string> = { key_id: string } & Record<Column, string>;

/** A repository whose re-seal is a compare-and-set on the sealed value the caller read. */
interface Resealing<Row, Next> {
  reseal(row: Row, next: Next): Promise<boolean>;
}

/**
 * Re-seals `target` under k2 from two instances that both read it: the first wins; the second,
 * from the same read, finds the sealed value changed and loses; `reread` then gives the row as it
 * was read (`asRead`, without a listing's extras) with only `key_id` and the sealed `column` changed.
 */
async function resealsOnce<Row, Column extends string>(
  [first, second]: readonly [Resealing<Row, SealedAs<Column>>, Resealing<Row, SealedAs<Column>>],
  target: Row,
  column: Column,
  reread: () => Promise<unknown>,
  asRead: object,
): Promise<void> {
  const next = (sealed: string) => ({ key_id: 'k2', [column]: sealed }) as SealedAs<Column>;
  assert.equal(await first.reseal(target, next('resealed')), true);
  assert.equal(await second.reseal(target, next('resealed-again')), false, 'the sealed value changed since it was read');
  assert.deepEqual(await reread(), { ...asRead, ...next('resealed') }, `only key_id and ${column} change (not updated_at)`);
}

function repositoryContract(name: string, skip: string | false, start: () => Promise<Backend>): void {
  describe(`repository contract: ${name}`, { skip }, () => {
    let backend: Backend;
    const opened: Store[] = [];

    before(async () => {
      backend = await start();
    });

    /** Closes the stores opened so far: each group closes its own, so idle pools do not pile up past the server's max_connections. */
    async function closeOpened(): Promise<void> {
      await Promise.all(opened.splice(0).map((s) => s.close()));
    }

    after(async () => {
      await closeOpened();
      await backend?.destroy();
    });

    /** Two instances (two processes of one machine, or two broker instances) on a new database. */
    async function fresh(): Promise<[Store, Store]> {
      const open = await backend.database();
      const a = await open();
      opened.push(a);
      const b = await open();
      opened.push(b);
      return [a, b];
    }

    /** `fresh()` for the enclosing describe: opened before its first case, closed (closeOpened) after its last. */
    function twoInstances(): { a: Store; b: Store } {
      const pair = useSuite('the two store instances', async () => {
        const [a, b] = await fresh();
        return { a, b, close: closeOpened };
      });
      return { a: readThrough(() => pair.a), b: readThrough(() => pair.b) };
    }

    describe('sessions', () => {
      const { a, b } = twoInstances();

      /**
       * Creates session `from` on instance a, signs it in as `who` under the new id `to` (sealed ID
       * token `idToken`, expiring `expiresIn` from now), and asserts instance b reads exactly that row
       * under `to`. Returns the time it started.
       */
      async function assertRotatedIn(
        from: string,
        to: string,
        who: Owner,
        name: string,
        expiresIn: number,
        idToken: string | null,
      ): Promise<number> {
        const t0 = Date.now();
        await a.sessions.create(from, t0 + HOUR);
        await a.sessions.rotateSignedIn({
          oldHash: from,
          newHash: to,
          principal: { ...who, name },
          expiresAt: t0 + expiresIn,
          ...(idToken === null ? {} : { sealedIdToken: idToken }),
        });
        const t1 = Date.now();
        const row = await b.sessions.find(to);
        assert.ok(row);
        assertStamped(row.created_at, t0, t1, 'created_at');
        assert.deepEqual(row, {
          id_hash: to,
          issuer: who.issuer,
          subject: who.subject,
          display_name: name,
          id_token: idToken,
          created_at: row.created_at,
          expires_at: t0 + expiresIn,
        });
        return t0;
      }

      test('create stores an anonymous session that find returns, from any instance, until expires_at', async () => {
        const t0 = Date.now();
        await a.sessions.create('s-anon', t0 + HOUR);
        const t1 = Date.now();
        const row = await a.sessions.find('s-anon');
        assert.ok(row);
        assertStamped(row.created_at, t0, t1, 'created_at');
        assert.deepEqual(row, {
          id_hash: 's-anon',
          issuer: null,
          subject: null,
          display_name: null,
          id_token: null,
          created_at: row.created_at,
          expires_at: t0 + HOUR,
        });
        assert.deepEqual(await b.sessions.find('s-anon'), row, 'another instance reads the same row');
        assert.deepEqual(await a.sessions.find('s-anon', t0 + HOUR - 1), row, 'still valid 1 ms before expires_at');
        assert.equal(await a.sessions.find('s-anon', t0 + HOUR), undefined, 'expired at expires_at');
        assert.equal(await a.sessions.find('s-unknown'), undefined);
      });

      test('rotateSignedIn replaces the old id with a new one carrying the principal (no fixation)', async () => {
        const t0 = await assertRotatedIn('s-before', 's-alice', ALICE, 'Alice', 2 * HOUR, null);
        assert.equal(await b.sessions.find('s-before'), undefined, 'the old id is gone');
        await a.sessions.rotateSignedIn({
          oldHash: 's-alice',
          newHash: 's-alice-2',
          principal: { ...ALICE, name: 'Alice' },
          expiresAt: t0 + 2 * HOUR,
          sealedIdToken: 'v1.sealed-id-token',
        });
        assert.equal(
          (await b.sessions.find('s-alice-2'))?.id_token,
          'v1.sealed-id-token',
          'the sealed ID token is kept with the session, for logout',
        );
        await a.sessions.rotateSignedIn({
          oldHash: 's-alice-2',
          newHash: 's-alice',
          principal: { ...ALICE, name: 'Alice' },
          expiresAt: t0 + 2 * HOUR,
        });

        await a.sessions.rotateSignedIn({ oldHash: undefined, newHash: 's-bob', principal: { ...BOB, name: 'Bob' }, expiresAt: t0 + HOUR });
        assert.equal((await b.sessions.find('s-bob'))?.subject, 'bob', 'without an old id it only creates');
        assert.equal((await b.sessions.find('s-alice'))?.subject, 'alice', 'and leaves other sessions alone');
      });

      test('rotateSignedIn keeps the sealed ID token of that sign-in with the new session; a sign-in without one stores none', async () => {
        const t0 = await assertRotatedIn('s-token-before', 's-token', CAROL, 'Carol', HOUR, 'v1.k1.sealed-id-token');
        await b.sessions.rotateSignedIn({
          oldHash: undefined,
          newHash: 's-token-fresh',
          principal: { ...CAROL, name: 'Carol' },
          expiresAt: t0 + HOUR,
          sealedIdToken: 'v1.k1.another',
        });
        assert.equal((await a.sessions.find('s-token-fresh'))?.id_token, 'v1.k1.another', 'without an old id too');
        await a.sessions.rotateSignedIn({
          oldHash: 's-token',
          newHash: 's-token-none',
          principal: { ...CAROL, name: 'Carol' },
          expiresAt: t0 + HOUR,
        });
        assert.equal((await b.sessions.find('s-token-none'))?.id_token, null, "the previous sign-in's token is not carried over");
        assert.equal((await b.sessions.find('s-token-fresh'))?.id_token, 'v1.k1.another', 'other sessions keep theirs');
      });

      test('rotateSignedIn is atomic: when the new id is taken it fails with a constraint error (not an outage) and the old session stays', async () => {
        await a.sessions.create('s-keep', Date.now() + HOUR);
        await a.sessions.create('s-taken', Date.now() + HOUR);
        await assert.rejects(
          a.sessions.rotateSignedIn({
            oldHash: 's-keep',
            newHash: 's-taken',
            principal: { ...BOB, name: 'Bob' },
            expiresAt: Date.now() + HOUR,
          }),
          constraintError,
        );
        assert.equal((await b.sessions.find('s-keep'))?.id_hash, 's-keep', 'the delete was rolled back with the failed insert');
        assert.equal((await b.sessions.find('s-taken'))?.subject, null, 'the taken id is unchanged');
        await a.ping();
      });

      test('create refuses an id already in use', async () => {
        await a.sessions.create('s-dup', Date.now() + HOUR);
        await assert.rejects(b.sessions.create('s-dup', Date.now() + 2 * HOUR), constraintError);
      });

      test('delete removes only that session, and deleting an unknown id changes nothing', async () => {
        await a.sessions.create('s-gone', Date.now() + HOUR);
        await a.sessions.create('s-stays', Date.now() + HOUR);
        await b.sessions.delete('s-gone');
        await b.sessions.delete('s-never-was');
        assert.equal(await a.sessions.find('s-gone'), undefined);
        assert.equal((await a.sessions.find('s-stays'))?.id_hash, 's-stays');
      });
    });

    describe('login transactions', () => {
      const { a, b } = twoInstances();

      test('take returns the row put, exactly once among concurrent takes, and only to the session that started it', async () => {
        const t = loginTransaction('lt-1');
        await a.loginTransactions.put(t);
        assert.equal(await b.loginTransactions.take('lt-1', 'browser-2'), undefined, 'another browser consumes nothing');
        assert.equal(await b.loginTransactions.take('lt-unknown', 'browser-1'), undefined);
        const takes = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).loginTransactions.take('lt-1', 'browser-1')));
        assert.deepEqual(
          takes.filter((x) => x !== undefined),
          [t],
        );
        assert.equal(await a.loginTransactions.take('lt-1', 'browser-1'), undefined, 'a replayed callback finds nothing');
      });

      test('take hands back an expired transaction too (the caller checks expires_at) and consumes it', async () => {
        const t = loginTransaction('lt-expired', { expires_at: Date.now() - 1 });
        await a.loginTransactions.put(t);
        assert.deepEqual(await b.loginTransactions.take('lt-expired', 'browser-1'), t);
        assert.equal(await a.loginTransactions.take('lt-expired', 'browser-1'), undefined);
      });

      test('put refuses a second transaction with the same state', async () => {
        await a.loginTransactions.put(loginTransaction('lt-dup'));
        await assert.rejects(b.loginTransactions.put(loginTransaction('lt-dup', { session_hash: 'browser-2' })), constraintError);
        assert.equal(await a.loginTransactions.take('lt-dup', 'browser-2'), undefined, 'the second put wrote nothing');
        assert.equal((await a.loginTransactions.take('lt-dup', 'browser-1'))?.session_hash, 'browser-1');
      });
    });

    describe('OAuth flows', () => {
      const { a, b } = twoInstances();

      test('take returns the flow put, exactly once among concurrent takes, and only to the session that started it', async () => {
        const pending = pendingRow(ALICE);
        await a.pending.create(pending);
        const flow = oauthFlow('of-1', pending.id);
        await a.oauthFlows.put(flow);
        assert.equal(await b.oauthFlows.take('of-1', 'browser-2', 'github'), undefined, 'another browser consumes nothing');
        assert.equal(await b.oauthFlows.take('of-unknown', 'browser-1', 'github'), undefined);
        assert.equal(await b.oauthFlows.take('of-1', 'browser-1', 'gitlab'), undefined, "another provider's callback consumes nothing");
        const takes = await Promise.all(
          Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).oauthFlows.take('of-1', 'browser-1', 'github')),
        );
        assert.deepEqual(
          takes.filter((x) => x !== undefined),
          [flow],
        );
        assert.equal(await a.oauthFlows.take('of-1', 'browser-1', 'github'), undefined, 'a replayed callback finds nothing');
      });

      test("take on another provider's callback path consumes nothing, so the genuine callback still works", async () => {
        const pending = pendingRow(BOB, { provider: 'gitlab' });
        await a.pending.create(pending);
        const flow = oauthFlow('of-gitlab', pending.id);
        await a.oauthFlows.put(flow);
        assert.equal(await b.oauthFlows.take('of-gitlab', 'browser-1', 'github'), undefined);
        assert.equal(await a.oauthFlows.take('of-gitlab', 'browser-1', 'GitLab'), undefined, 'provider names are compared exactly');
        assert.equal(
          await b.transaction((tx) => tx.oauthFlows.take('of-gitlab', 'browser-1', 'linear')),
          undefined,
          'inside a transaction too',
        );
        assert.deepEqual(await b.oauthFlows.take('of-gitlab', 'browser-1', 'gitlab'), flow);
        assert.equal(await a.oauthFlows.take('of-gitlab', 'browser-1', 'gitlab'), undefined);
      });

      test('take hands back an expired flow too (the caller checks expires_at) and consumes it', async () => {
        const pending = pendingRow(ALICE);
        await a.pending.create(pending);
        const flow = oauthFlow('of-expired', pending.id, { expires_at: Date.now() - 1 });
        await a.oauthFlows.put(flow);
        assert.deepEqual(await b.oauthFlows.take('of-expired', 'browser-1', 'github'), flow);
        assert.equal(await a.oauthFlows.take('of-expired', 'browser-1', 'github'), undefined);
      });

      test('put refuses a flow for an unknown pending connection, and a second flow with the same state', async () => {
        await assert.rejects(a.oauthFlows.put(oauthFlow('of-orphan', 'pc-does-not-exist')), constraintError);
        assert.equal(await a.oauthFlows.take('of-orphan', 'browser-1', 'github'), undefined);

        const pending = pendingRow(ALICE);
        await a.pending.create(pending);
        await a.oauthFlows.put(oauthFlow('of-dup', pending.id));
        await assert.rejects(b.oauthFlows.put(oauthFlow('of-dup', pending.id, { session_hash: 'browser-2' })), constraintError);
        assert.equal(await a.oauthFlows.take('of-dup', 'browser-2', 'github'), undefined, 'the second put wrote nothing');
        assert.equal((await a.oauthFlows.take('of-dup', 'browser-1', 'github'))?.session_hash, 'browser-1');
      });
    });

    describe('pending connections', () => {
      const { a, b } = twoInstances();

      test('create stores an open row (created_at = updated_at, no outcome) that byId and byLinkHash return exactly', async () => {
        const row = pendingRow(ALICE, { client_name: null, scopes: null });
        const t0 = Date.now();
        await a.pending.create(row);
        const t1 = Date.now();
        const stored = await b.pending.byId(row.id);
        assert.ok(stored);
        assertStamped(stored.created_at, t0, t1, 'created_at');
        const expected: PendingConnection = {
          ...row,
          status: 'open',
          outcome_reason: null,
          purpose: null,
          service_id: null,
          activation_hash: null,
          activated_at: null,
          created_at: stored.created_at,
          updated_at: stored.created_at,
        };
        assert.deepEqual(stored, expected);
        assert.deepEqual(await b.pending.byLinkHash(row.link_hash), expected);

        const withText = pendingRow(ALICE, {
          client_name: 'Claude Desktop',
          scopes: 'repo read:org',
          purpose: "create the issue “Crash on start” in acme/widgets — ünïcode, 'quotes', 100%_%",
        });
        await a.pending.create(withText);
        const storedText = await b.pending.byId(withText.id);
        assert.deepEqual(
          [storedText?.client_name, storedText?.scopes, storedText?.purpose],
          ['Claude Desktop', 'repo read:org', withText.purpose],
          'text is stored and read back exactly',
        );
        assert.deepEqual(await b.pending.byLinkHash(withText.link_hash), storedText);
        const nullPurpose = pendingRow(ALICE, { purpose: null });
        await a.pending.create(nullPurpose);
        assert.equal((await b.pending.byId(nullPurpose.id))?.purpose, null, 'an explicit null purpose stays null');
        const emptyPurpose = pendingRow(ALICE, { purpose: '' });
        await a.pending.create(emptyPurpose);
        assert.equal((await b.pending.byId(emptyPurpose.id))?.purpose, '', 'an empty purpose is not turned into null');
        assert.equal(await b.pending.byId('pc-unknown'), undefined);
        assert.equal(await b.pending.byLinkHash('link-unknown'), undefined);
      });

      test('byActivationHash finds only open, unexpired rows with that unused code; redeemActivation uses a code once', async () => {
        const [c, d] = await fresh();
        const now = Date.now();
        const row = pendingRow(ALICE, { activation_hash: 'code-1' });
        await c.pending.create(row);
        assert.equal((await d.pending.byId(row.id))?.activation_hash, 'code-1', 'the hash is stored');
        assert.deepEqual(
          (await d.pending.byActivationHash('code-1', now)).map((r) => r.id),
          [row.id],
        );
        assert.deepEqual(await d.pending.byActivationHash('code-2', now), [], 'another hash finds nothing');
        assert.deepEqual(await d.pending.byActivationHash('code-1', row.expires_at), [], 'expired: nothing');
        assert.equal(await c.pending.redeemActivation(row.id, 'code-2', now), false, 'the id with another hash is not redeemed');
        assert.equal(await c.pending.redeemActivation(row.id, 'code-1', row.expires_at), false, 'not once expired');
        // Two instances redeem at once: exactly one wins.
        const both = await Promise.all([
          c.pending.redeemActivation(row.id, 'code-1', now),
          d.pending.redeemActivation(row.id, 'code-1', now),
        ]);
        assert.deepEqual(both.filter(Boolean).length, 1, 'one of two concurrent redemptions');
        const used = await d.pending.byId(row.id);
        assert.equal(used?.activated_at, now, 'when it was used');
        assert.equal(used?.status, 'open', 'the link itself is untouched');
        assert.deepEqual(await d.pending.byActivationHash('code-1', now), [], 'a used code finds nothing');

        const claimed = pendingRow(ALICE, { activation_hash: 'code-3' });
        const settled = pendingRow(ALICE, { activation_hash: 'code-4' });
        await c.pending.create(claimed);
        await c.pending.create(settled);
        assert.equal(await c.pending.claim(claimed.id), true);
        assert.equal(await c.pending.settle(settled.id, 'cancelled'), true);
        for (const [hash, what] of [
          ['code-3', 'authorizing'],
          ['code-4', 'settled'],
        ] as const) {
          assert.deepEqual(await d.pending.byActivationHash(hash), [], `${what}: nothing`);
          assert.equal(await d.pending.redeemActivation(hash === 'code-3' ? claimed.id : settled.id, hash), false, `${what}: not redeemed`);
        }

        // Two open rows with one hash (a collision): both are returned, so the caller can refuse.
        await c.pending.create(pendingRow(ALICE, { activation_hash: 'code-5' }));
        await c.pending.create(pendingRow(BOB, { activation_hash: 'code-5' }));
        await c.pending.create(pendingRow(CAROL, { activation_hash: 'code-5' }));
        assert.equal((await d.pending.byActivationHash('code-5')).length, 2, 'at most two');
      });

      test('create refuses a duplicate id and a duplicate link hash', async () => {
        const row = pendingRow(ALICE);
        await a.pending.create(row);
        await assert.rejects(b.pending.create({ ...row, link_hash: `${row.link_hash}-other` }), constraintError);
        await assert.rejects(b.pending.create({ ...row, id: `${row.id}-other` }), constraintError);
        assert.equal(await a.pending.byId(`${row.id}-other`), undefined);
        assert.equal(await a.pending.byLinkHash(`${row.link_hash}-other`), undefined);
      });

      test('countInFlight counts every owner’s unexpired open and authorizing rows, and nothing settled or expired', async () => {
        const [c, d] = await fresh();
        assert.equal(await d.pending.countInFlight(), 0);
        const open = pendingRow(ALICE);
        const authorizing = pendingRow(BOB, { provider: 'gitlab' });
        const settled = pendingRow(CAROL);
        const expired = pendingRow(CAROL, { expires_at: Date.now() - 1 });
        for (const row of [open, authorizing, settled, expired]) await c.pending.create(row);
        assert.equal(await c.pending.claim(authorizing.id), true);
        assert.equal(await c.pending.settle(settled.id, 'completed'), true);
        assert.equal(await d.pending.countInFlight(), 2, 'the open and the authorizing row');
        assert.equal(await d.pending.countInFlight(Date.now() + 2 * HOUR), 0, 'none once they expire');
      });

      test('latestInFlight is the newest unexpired, unsettled row of that owner for that provider', async () => {
        const provider = 'linear';
        const older = pendingRow(BOB, { provider });
        await a.pending.create(older);
        await sleep(3);
        const newer = pendingRow(BOB, { provider });
        await a.pending.create(newer);
        await a.pending.create(pendingRow(BOB, { provider: 'gitlab' }));
        await a.pending.create(pendingRow(CAROL, { provider }));

        assert.equal((await b.pending.latestInFlight(BOB, provider))?.id, newer.id);
        assert.equal(await a.pending.claim(newer.id), true);
        assert.deepEqual(
          await b.pending.latestInFlight(BOB, provider),
          await b.pending.byId(newer.id),
          'an authorizing row is still in flight, returned whole',
        );
        assert.equal(await a.pending.settle(newer.id, 'cancelled'), true);
        assert.equal((await b.pending.latestInFlight(BOB, provider))?.id, older.id, 'settled rows are not in flight');
        assert.equal((await b.pending.latestInFlight(BOB, provider, older.expires_at - 1))?.id, older.id);
        assert.equal(await b.pending.latestInFlight(BOB, provider, older.expires_at), undefined, 'expired at expires_at');
        assert.equal(await b.pending.latestInFlight(ALICE, provider), undefined, 'another owner’s rows are not mine');
        assert.equal(
          await b.pending.latestInFlight({ issuer: 'https://other.example', subject: 'bob' }, provider),
          undefined,
          'the issuer is part of the owner',
        );
        assert.equal(await b.pending.latestInFlight(BOB, 'atlassian'), undefined);
      });

      test('takeUntoldFailure hands the newest row, settled failed since then, to one of 10 concurrent takers, once', async () => {
        const provider = 'notion';
        const before = Date.now();
        const failed = pendingRow(BOB, { provider });
        await a.pending.create(failed);
        assert.equal(await b.pending.takeUntoldFailure(BOB, provider, before), undefined, 'an open row has not failed');
        assert.equal(await a.pending.settle(failed.id, 'failed', 'provider_error:invalid_scope'), true);
        assert.equal(await b.pending.takeUntoldFailure(BOB, provider, Date.now() + 1000), undefined, 'settled before `since`');
        assert.equal(await b.pending.takeUntoldFailure(ALICE, provider, before), undefined, 'another owner’s row is not mine');

        const takers = await Promise.all(
          Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).pending.takeUntoldFailure(BOB, provider, before)),
        );
        const taken = takers.filter((t) => t !== undefined);
        assert.equal(taken.length, 1, 'one taker is told');
        assert.equal(taken[0]!.id, failed.id);
        assert.equal(taken[0]!.outcome_reason, 'provider_error:invalid_scope', 'the reason as it was');
        assert.equal((await a.pending.byId(failed.id))?.outcome_reason, 'told:provider_error:invalid_scope');
        assert.equal(await b.pending.takeUntoldFailure(BOB, provider, before), undefined, 'told once');

        const reasonless = pendingRow(BOB, { provider });
        await sleep(3);
        await a.pending.create(reasonless);
        assert.equal(await a.pending.settle(reasonless.id, 'failed'), true);
        assert.equal((await b.pending.takeUntoldFailure(BOB, provider, before))?.id, reasonless.id, 'a failure without a reason too');
        const older = pendingRow(BOB, { provider: 'asana' });
        await a.pending.create(older);
        assert.equal(await a.pending.settle(older.id, 'failed'), true);
        await sleep(3);
        await a.pending.create(pendingRow(BOB, { provider: 'asana' }));
        assert.equal(await b.pending.takeUntoldFailure(BOB, 'asana', before), undefined, 'a newer link replaces an older failure');
      });

      test('claim moves an open link to authorizing exactly once among 20 concurrent claims from two instances', async () => {
        const row = pendingRow(ALICE);
        await a.pending.create(row);
        const at = Date.now() + 5;
        const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).pending.claim(row.id, at)));
        assert.equal(results.filter(Boolean).length, 1);
        const claimed = await b.pending.byId(row.id);
        assert.deepEqual([claimed?.status, claimed?.updated_at, claimed?.outcome_reason], ['authorizing', at, null]);
        assert.equal(await a.pending.claim(row.id), false, 'a used link cannot be claimed again');
        assert.equal(await a.pending.claim('pc-unknown'), false);
      });

      test('claim refuses an expired link (at expires_at) and a settled one, changing nothing', async () => {
        const row = pendingRow(ALICE, { expires_at: Date.now() + 1_000 });
        await a.pending.create(row);
        const was = await a.pending.byId(row.id);
        assert.equal(await a.pending.claim(row.id, row.expires_at), false);
        assert.equal(await a.pending.claim(row.id, row.expires_at + 1_000), false);
        assert.deepEqual(await b.pending.byId(row.id), was);
        assert.equal(await a.pending.claim(row.id, row.expires_at - 1), true, 'still claimable 1 ms before');

        const cancelled = pendingRow(ALICE);
        await a.pending.create(cancelled);
        assert.equal(await a.pending.settle(cancelled.id, 'cancelled'), true);
        assert.equal(await b.pending.claim(cancelled.id), false);
        assert.equal((await a.pending.byId(cancelled.id))?.status, 'cancelled');
      });

      test('settle changes an open or authorizing row once, with its reason; later settles change nothing', async () => {
        const open = pendingRow(ALICE);
        const authorizing = pendingRow(ALICE);
        await a.pending.create(open);
        await a.pending.create(authorizing);
        assert.equal(await a.pending.claim(authorizing.id), true);

        const t0 = Date.now();
        assert.equal(
          await a.pending.settle(open.id, 'denied', 'access_denied'),
          true,
          'an open (never claimed) link settles too, e.g. a cancel on the consent page',
        );
        const t1 = Date.now();
        const denied = await b.pending.byId(open.id);
        assert.deepEqual([denied?.status, denied?.outcome_reason], ['denied', 'access_denied']);
        assertStamped(denied?.updated_at, t0, t1, 'updated_at');
        assert.equal(await a.pending.settle(open.id, 'completed'), false);
        assert.equal(await b.pending.settle(open.id, 'failed', 'other'), false);
        assert.deepEqual(await a.pending.byId(open.id), denied, 'nothing changed');

        const concurrent = await Promise.all(
          Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).pending.settle(authorizing.id, i < 5 ? 'completed' : 'failed')),
        );
        assert.equal(concurrent.filter(Boolean).length, 1, 'an authorizing row settles exactly once');
        const settled = await a.pending.byId(authorizing.id);
        assert.equal(settled?.status, concurrent.indexOf(true) < 5 ? 'completed' : 'failed');
        assert.equal(settled?.outcome_reason, null, 'no reason given, none stored');
        assert.equal(await a.pending.settle('pc-unknown', 'failed'), false);
      });

      test('settledAmong reports only the settled ones of the ids asked, with their status', async () => {
        const [open, claimed, completed, denied] = [pendingRow(ALICE), pendingRow(ALICE), pendingRow(ALICE), pendingRow(BOB)];
        for (const r of [open, claimed, completed, denied]) await a.pending.create(r);
        await a.pending.claim(claimed.id);
        await a.pending.settle(completed.id, 'completed');
        await a.pending.settle(denied.id, 'denied', 'access_denied');
        assert.deepEqual(
          byId(await b.pending.settledAmong([open.id, claimed.id, completed.id, denied.id, 'pc-unknown'])),
          byId([
            { id: completed.id, status: 'completed' },
            { id: denied.id, status: 'denied' },
          ]),
        );
        assert.deepEqual(await b.pending.settledAmong([completed.id]), [{ id: completed.id, status: 'completed' }]);
        assert.deepEqual(await b.pending.settledAmong([open.id, claimed.id]), []);
        assert.deepEqual(await b.pending.settledAmong([]), []);
      });

      test('settledSince reports rows settled at or after a time (by updated_at), never open or claimed ones', async () => {
        const [open, claimed, settled] = [pendingRow(CAROL), pendingRow(CAROL), pendingRow(CAROL)];
        for (const r of [open, claimed, settled]) await a.pending.create(r);
        await a.pending.claim(claimed.id);
        await a.pending.settle(settled.id, 'cancelled');
        const at = (await a.pending.byId(settled.id))!.updated_at;
        const ours = (rows: Array<{ id: string }>) => rows.filter((r) => [open.id, claimed.id, settled.id].includes(r.id));
        assert.deepEqual(ours(await b.pending.settledSince(0)), [{ id: settled.id, status: 'cancelled' }]);
        assert.deepEqual(
          ours(await b.pending.settledSince(at)),
          [{ id: settled.id, status: 'cancelled' }],
          'at the settlement time itself',
        );
        assert.deepEqual(ours(await b.pending.settledSince(at + 1)), [], 'not after it');
      });

      test('openOrCreate: 20 concurrent calls for one request, from two instances, make one row, and that row is returned to all', async () => {
        const olivia: Owner = { issuer: ALICE.issuer, subject: 'olivia' };
        const t0 = Date.now();
        const request = { scopes: null, purpose: 'list my issues' };
        const candidates = Array.from({ length: 20 }, () => pendingRow(olivia, request));
        const results = await Promise.all(candidates.map((row, i) => (i % 2 ? a : b).pending.openOrCreate(row, 3, t0)));
        const ids = new Set(results.map((r) => r.pending.id));
        assert.equal(ids.size, 1, 'one row for one (principal, provider, scopes, client name, purpose)');
        const winner = candidates.find((c) => ids.has(c.id))!;
        const stored = await a.pending.byId(winner.id);
        const expected: PendingConnection = {
          ...winner,
          purpose: 'list my issues',
          service_id: null,
          activation_hash: null,
          activated_at: null,
          status: 'open',
          outcome_reason: null,
          created_at: t0,
          updated_at: t0,
        };
        assert.deepEqual(stored, expected);
        for (const r of results) assert.deepEqual(r, { pending: stored, cancelled: [] });
        for (const c of candidates) if (c !== winner) assert.equal(await b.pending.byId(c.id), undefined, 'the others inserted nothing');

        const again = await b.pending.openOrCreate(pendingRow(olivia, request), 3, t0 + 1);
        assert.deepEqual(again, { pending: stored, cancelled: [] }, 'a later call for the same request gets the same open row');
        const claimed = await a.pending.openOrCreate(pendingRow(olivia, { ...request, client_name: 'Claimed' }), 3, t0 + 2);
        assert.equal(await a.pending.claim(claimed.pending.id, t0 + 3), true);
        const next = pendingRow(olivia, { ...request, client_name: 'Claimed' });
        assert.equal(
          (await b.pending.openOrCreate(next, 3, t0 + 4)).pending.id,
          next.id,
          'an authorizing row is not reused: its link is spent',
        );
      });

      test('openOrCreate: a different request makes another row; past maxOpen the oldest open ones are cancelled as superseded, never another status', async () => {
        const paul: Owner = { issuer: ALICE.issuer, subject: 'paul' };
        const t0 = Date.now();
        const open = (row: NewPendingConnection, at: number, on: Store = a) => on.pending.openOrCreate(row, 3, t0 + at);

        // Older than every open row, so a store cancelling by age alone would pick these first.
        const completed = (await open(pendingRow(paul, { provider: 'gitlab' }), 0)).pending;
        assert.equal(await a.pending.settle(completed.id, 'completed'), true);
        const authorizing = (await open(pendingRow(paul, { provider: 'linear' }), 1)).pending;
        assert.equal(await a.pending.claim(authorizing.id, t0 + 2), true);
        const othersOpen = (await open(pendingRow({ issuer: 'https://other.example', subject: 'paul' }), 3)).pending;
        const bobsOpen = (await open(pendingRow(BOB, { provider: 'bounded' }), 3)).pending;

        const first = await open(pendingRow(paul), 10);
        const second = await open(pendingRow(paul, { scopes: 'repo admin:org' }), 11, b);
        const third = await open(pendingRow(paul, { purpose: 'another reason' }), 12);
        assert.deepEqual(
          [first.cancelled, second.cancelled, third.cancelled],
          [[], [], []],
          'up to maxOpen open rows, nothing is cancelled',
        );
        assert.equal(new Set([first.pending.id, second.pending.id, third.pending.id]).size, 3, 'scopes and purpose tell requests apart');

        const fourth = await open(pendingRow(paul, { client_name: 'Other' }), 13, b);
        assert.deepEqual(fourth.cancelled, [first.pending.id], 'the oldest open one makes room');
        assert.equal(fourth.pending.status, 'open');
        assert.deepEqual(await b.pending.byId(first.pending.id), {
          ...first.pending,
          status: 'cancelled',
          outcome_reason: 'superseded',
          updated_at: t0 + 13,
        });
        assert.deepEqual(
          ours(await a.pending.settledSince(t0 + 13), [first.pending.id]),
          [{ id: first.pending.id, status: 'cancelled' }],
          'a polling waiter sees the cancellation',
        );

        const fifth = await open(pendingRow(paul, { provider: 'atlassian' }), 14);
        assert.deepEqual(fifth.cancelled, [second.pending.id], 'a row differing only in provider is another request too');
        assert.deepEqual(
          await Promise.all([third, fourth, fifth].map(async (r) => (await b.pending.byId(r.pending.id))?.status)),
          ['open', 'open', 'open'],
          'maxOpen open rows remain',
        );

        const repeat = await open(pendingRow(paul, { purpose: 'another reason' }), 15, b);
        assert.deepEqual(repeat, { pending: third.pending, cancelled: [] }, 'a repeat of an open request cancels nothing');

        assert.equal((await b.pending.byId(completed.id))?.status, 'completed', 'a completed row is never cancelled');
        assert.deepEqual(
          [(await b.pending.byId(authorizing.id))?.status, (await b.pending.byId(authorizing.id))?.outcome_reason],
          ['authorizing', null],
          'an authorizing row is never cancelled (its user is at the provider)',
        );
        assert.equal((await b.pending.byId(othersOpen.id))?.status, 'open', 'a same-named subject of another issuer is someone else');
        assert.equal((await b.pending.byId(bobsOpen.id))?.status, 'open', 'another owner’s rows are not counted');

        const rita: Owner = { issuer: ALICE.issuer, subject: 'rita' };
        const ritaOne = await a.pending.openOrCreate(pendingRow(rita), 1, t0 + 16);
        const ritaTwo = await b.pending.openOrCreate(pendingRow(rita, { scopes: 'x' }), 1, t0 + 17);
        assert.deepEqual(ritaTwo.cancelled, [ritaOne.pending.id], 'maxOpen 1 keeps only the new row');
      });

      test('openOrCreate: a cancellation is pushed to listening instances where the store has a settled feed', async () => {
        const quinn: Owner = { issuer: ALICE.issuer, subject: 'quinn' };
        const notified: string[] = [];
        const feed = b.settledFeed;
        const unsubscribe = feed?.subscribe(
          (id) => notified.push(id),
          () => {},
        );
        try {
          if (feed) await eventually(() => feed.live, 5_000, 'the feed to come up');
          const first = await a.pending.openOrCreate(pendingRow(quinn), 1);
          const second = await a.pending.openOrCreate(pendingRow(quinn, { provider: 'gitlab' }), 1);
          assert.deepEqual(second.cancelled, [first.pending.id]);
          // Without a feed, waiters poll settledSince, which the test above covers.
          if (feed) await eventually(() => notified.includes(first.pending.id), 2_000, 'the cancellation to be pushed to held calls');
          assert.deepEqual(notified, feed ? [first.pending.id] : [], 'only the cancelled row is announced');
        } finally {
          unsubscribe?.();
        }
      });

      test('prune removes settled and expired pending rows PENDING_PRUNE_GRACE_MS after they settle or expire (their flows with them), other expired rows at once, and returns how many went', async () => {
        const [db, other] = await fresh();
        const now = Date.now();
        const GRACE = PENDING_PRUNE_GRACE_MS;
        const expiredLong = pendingRow(ALICE, { expires_at: now - GRACE - 1 });
        const expiredEdge = pendingRow(ALICE, { expires_at: now - GRACE });
        const expiredRecently = pendingRow(ALICE, { expires_at: now - 60_000 });
        const settled = pendingRow(ALICE, { expires_at: now + DAY });
        const open = pendingRow(ALICE, { expires_at: now + DAY });
        // Claimed just before they expired: a claimed row stays until its flow has expired too.
        const claimedLong = pendingRow(ALICE, { expires_at: now - GRACE - OAUTH_FLOW_TTL_MS - 2 });
        const claimedRecently = pendingRow(ALICE, { expires_at: now - GRACE - 1 });
        for (const r of [expiredLong, expiredEdge, expiredRecently, settled, open, claimedLong, claimedRecently])
          await db.pending.create(r);
        assert.equal(await db.pending.claim(claimedLong.id, claimedLong.expires_at - 1), true);
        assert.equal(await db.pending.claim(claimedRecently.id, claimedRecently.expires_at - 1), true);
        assert.equal(await db.pending.settle(settled.id, 'failed', 'provider_error'), true);
        const settledAt = (await db.pending.byId(settled.id))!.updated_at;
        // Flows go with their pending row through ON DELETE CASCADE, so they are not counted on their own.
        await db.oauthFlows.put(oauthFlow('f-cascade', expiredLong.id, { expires_at: now + DAY }));
        await db.oauthFlows.put(oauthFlow('f-settled', settled.id, { expires_at: now + DAY }));
        await db.oauthFlows.put(oauthFlow('f-expired', expiredRecently.id, { expires_at: now - 1 }));
        await db.oauthFlows.put(oauthFlow('f-live', expiredRecently.id, { expires_at: now + DAY }));
        await db.oauthFlows.put(oauthFlow('f-open', open.id, { expires_at: now + DAY }));
        await db.loginTransactions.put(loginTransaction('l-expired', { expires_at: now - 1 }));
        await db.loginTransactions.put(loginTransaction('l-edge', { expires_at: now }));
        await db.loginTransactions.put(loginTransaction('l-live', { expires_at: now + DAY }));
        await db.sessions.create('b-expired', now - 1);
        await db.sessions.create('b-live', now + DAY);
        await db.rateLimits.hit('rl-stale', 60_000, now - DAY - 1);
        await db.rateLimits.hit('rl-recent', 60_000, now - HOUR);
        const present = async (rows: NewPendingConnection[]) => (await Promise.all(rows.map((r) => other.pending.byId(r.id)))).map(Boolean);

        assert.equal(await db.pending.prune(now), 6, 'expiredLong, claimedLong, f-expired, l-expired, b-expired, rl-stale');
        assert.deepEqual(
          await present([expiredLong, claimedLong, expiredEdge, expiredRecently, settled, open, claimedRecently]),
          [false, false, true, true, true, true, true],
          'expired or settled within the grace: kept for late waiters and the "expired" page',
        );
        assert.equal(await other.oauthFlows.take('f-cascade', 'browser-1', 'github'), undefined);
        assert.equal(await other.oauthFlows.take('f-expired', 'browser-1', 'github'), undefined);
        assert.equal(await other.loginTransactions.take('l-expired', 'browser-1'), undefined);
        assert.equal((await other.loginTransactions.take('l-edge', 'browser-1'))?.state_hash, 'l-edge', 'at expires_at itself: kept');
        assert.equal(await other.sessions.find('b-expired', now - 2), undefined, 'an expired session is gone, not just hidden');
        assert.deepEqual(
          await other.rateLimits.hit('rl-stale', 60_000, now),
          { hits: 1, resetAt: now + 60_000 },
          'the stale window is gone',
        );
        assert.deepEqual(
          await other.rateLimits.hit('rl-recent', 60_000, now - HOUR + 1),
          { hits: 2, resetAt: now - HOUR + 60_000 },
          'the recent one is kept',
        );
        assert.equal(await db.pending.prune(now), 0, 'nothing left to prune');

        assert.equal(await db.pending.prune(settledAt + GRACE), 2, 'expiredEdge and expiredRecently, the grace after they expired');
        assert.deepEqual(await present([expiredEdge, expiredRecently, settled, open, claimedRecently]), [false, false, true, true, true]);
        assert.equal(await other.oauthFlows.take('f-live', 'browser-1', 'github'), undefined, 'went with its pending row');
        assert.equal((await other.pending.byId(settled.id))?.status, 'failed', 'settled exactly the grace ago: kept');

        assert.equal(await db.pending.prune(settledAt + GRACE + 1), 1, 'settled more than the grace ago');
        assert.deepEqual(await present([settled, open, claimedRecently]), [false, true, true]);
        assert.equal(await other.oauthFlows.take('f-settled', 'browser-1', 'github'), undefined, 'went with its pending row');

        assert.equal(await db.pending.prune(now + OAUTH_FLOW_TTL_MS), 1, 'claimedRecently, once its flow has expired too');
        assert.deepEqual(await present([open, claimedRecently]), [true, false]);
        assert.equal((await other.oauthFlows.take('f-open', 'browser-1', 'github'))?.pending_id, open.id, 'an open row’s flow stays');
        assert.equal((await other.loginTransactions.take('l-live', 'browser-1'))?.state_hash, 'l-live');
        assert.equal((await other.sessions.find('b-live'))?.id_hash, 'b-live');
      });
    });

    describe('connections', () => {
      const { a, b } = twoInstances();

      test('save inserts an active row that find returns whole (no store-specific columns such as seq)', async () => {
        const t0 = Date.now();
        await a.connections.save(connection(ALICE, 'github'));
        const t1 = Date.now();
        const row = await b.connections.find(ALICE, 'github');
        assert.ok(row);
        assertStamped(row.created_at, t0, t1, 'created_at');
        assert.deepEqual(row, {
          ...connection(ALICE, 'github'),
          created_at: row.created_at,
          updated_at: row.created_at,
          last_used_at: null,
          status: 'active',
          status_reason: null,
        });
        assert.equal(await b.connections.find(ALICE, 'gitlab'), undefined);
        assert.equal(
          await b.connections.find({ issuer: 'https://other.example', subject: 'alice' }, 'github'),
          undefined,
          'the issuer is part of the owner',
        );
      });

      test('save again replaces the row, keeping created_at and making it active again', async () => {
        await a.connections.save(connection(BOB, 'github'));
        const first = (await a.connections.find(BOB, 'github'))!;
        assert.equal(await a.connections.markReauthRequired(BOB, 'github', 'invalid_grant'), true);
        await a.connections.touch(BOB, 'github', 1_700_000_000_000);
        await sleep(3);
        const next = connection(BOB, 'github', {
          account_id: 'acct-bob-2',
          account_login: 'bob-renamed',
          scopes: 'repo user',
          key_id: 'k2',
          sealed_tokens: 'sealed-2',
        });
        await b.connections.save(next);
        const again = (await a.connections.find(BOB, 'github'))!;
        assert.ok(again.updated_at > first.updated_at, 'updated_at moves');
        assert.deepEqual(again, {
          ...next,
          created_at: first.created_at,
          updated_at: again.updated_at,
          last_used_at: 1_700_000_000_000,
          status: 'active',
          status_reason: null,
        });
      });

      test('list returns the owner’s connections in byte order of provider, and nobody else’s', async () => {
        const dave: Owner = { issuer: ALICE.issuer, subject: 'dave' };
        for (const provider of ['linear', 'Zendesk', 'atlassian', 'github']) await a.connections.save(connection(dave, provider));
        await a.connections.save(connection({ issuer: 'https://other.example', subject: 'dave' }, 'gitlab'));
        const rows = await b.connections.list(dave);
        assert.deepEqual(
          rows.map((r) => r.provider),
          ['Zendesk', 'atlassian', 'github', 'linear'],
        );
        assert.deepEqual(rows[2], await b.connections.find(dave, 'github'), 'rows are whole, as find returns them');
        assert.deepEqual(await b.connections.list({ issuer: ALICE.issuer, subject: 'nobody' }), []);
      });

      test('replaceTokens is a compare-and-swap on the sealed value: exactly one of 10 concurrent writers wins', async () => {
        const erin: Owner = { issuer: ALICE.issuer, subject: 'erin' };
        await a.connections.save(connection(erin, 'github', { sealed_tokens: 'v1' }));
        await a.connections.markReauthRequired(erin, 'github', 'expired');
        const was = (await a.connections.find(erin, 'github'))!;
        await sleep(3);
        const writers = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            (i % 2 ? a : b).connections.replaceTokens(erin, 'github', 'v1', {
              key_id: 'k2',
              sealed_tokens: `v2-${i}`,
              scopes: 'repo user',
            }),
          ),
        );
        assert.equal(writers.filter(Boolean).length, 1);
        const row = (await a.connections.find(erin, 'github'))!;
        assert.ok(row.updated_at > was.updated_at);
        assert.deepEqual(row, {
          ...was,
          key_id: 'k2',
          sealed_tokens: `v2-${writers.indexOf(true)}`,
          scopes: 'repo user',
          updated_at: row.updated_at,
          status: 'active',
          status_reason: null,
        });
        assert.equal(
          await b.connections.replaceTokens(erin, 'github', 'v1', { key_id: 'k1', sealed_tokens: 'stale', scopes: 'repo' }),
          false,
          'a slower writer with the old value loses',
        );
        assert.equal(
          await b.connections.replaceTokens(CAROL, 'github', 'v1', { key_id: 'k1', sealed_tokens: 'x', scopes: 'repo' }),
          false,
          'no such connection',
        );
        assert.deepEqual(await a.connections.find(erin, 'github'), row);
      });

      test('markReauthRequired marks an active row once, keeping the row and its account binding', async () => {
        const frank: Owner = { issuer: ALICE.issuer, subject: 'frank' };
        await a.connections.save(connection(frank, 'github'));
        const was = (await a.connections.find(frank, 'github'))!;
        await sleep(3);
        assert.equal(await b.connections.markReauthRequired(frank, 'github', 'invalid_grant'), true);
        const marked = (await a.connections.find(frank, 'github'))!;
        assert.ok(marked.updated_at > was.updated_at);
        assert.deepEqual(marked, { ...was, status: 'reauth_required', status_reason: 'invalid_grant', updated_at: marked.updated_at });
        assert.equal(await b.connections.markReauthRequired(frank, 'github', 'again'), false, 'only an active row is marked');
        assert.deepEqual(await a.connections.find(frank, 'github'), marked, 'the first reason stays');
        assert.equal(await b.connections.markReauthRequired(frank, 'gitlab', 'x'), false, 'no such connection');
      });

      test('othersWithAccount lists the other principals linked to the same upstream account of that provider', async () => {
        await a.connections.save(connection(CAROL, 'gitlab', { account_id: 'shared' }));
        await a.connections.save(connection(BOB, 'gitlab', { account_id: 'shared' }));
        await a.connections.save(connection({ issuer: 'https://other.example', subject: 'carol' }, 'gitlab', { account_id: 'shared' }));
        await a.connections.save(connection(ALICE, 'gitlab', { account_id: 'other' }));
        await a.connections.save(connection(ALICE, 'bitbucket', { account_id: 'shared' }));
        const others = await b.connections.othersWithAccount(CAROL, 'gitlab', 'shared');
        assert.deepEqual(
          others.map((c) => `${c.issuer} ${c.subject}`).sort(),
          ['https://idp.example.com bob', 'https://other.example carol'],
          'not carol herself, and a same-named subject of another issuer is someone else',
        );
        assert.deepEqual(
          others.find((c) => c.subject === 'bob'),
          await b.connections.find(BOB, 'gitlab'),
          'rows are whole',
        );
        assert.deepEqual(
          await b.connections.othersWithAccount(CAROL, 'github', 'shared'),
          [],
          'another provider’s account of the same id is another account',
        );
        assert.deepEqual(
          await b.transaction((tx) => tx.connections.othersWithAccount(ALICE, 'gitlab', 'other')),
          [],
          'inside a transaction too',
        );
      });

      test('touch sets last_used_at (and nothing else); on a missing connection it changes nothing', async () => {
        const gina: Owner = { issuer: ALICE.issuer, subject: 'gina' };
        await a.connections.save(connection(gina, 'github'));
        const was = (await a.connections.find(gina, 'github'))!;
        await b.connections.touch(gina, 'github', 1_700_000_000_123);
        assert.deepEqual(await a.connections.find(gina, 'github'), { ...was, last_used_at: 1_700_000_000_123 });
        const t0 = Date.now();
        await b.connections.touch(gina, 'github');
        assertStamped((await a.connections.find(gina, 'github'))?.last_used_at, t0, Date.now(), 'last_used_at defaults to now');
        await b.connections.touch(gina, 'gitlab', 1);
        assert.equal(await a.connections.find(gina, 'gitlab'), undefined);
      });

      test('delete removes that one connection once', async () => {
        const hank: Owner = { issuer: ALICE.issuer, subject: 'hank' };
        await a.connections.save(connection(hank, 'github'));
        await a.connections.save(connection(hank, 'gitlab'));
        assert.equal(await b.connections.delete(hank, 'github'), true);
        assert.equal(await b.connections.delete(hank, 'github'), false);
        assert.equal(await a.connections.find(hank, 'github'), undefined);
        assert.deepEqual(
          (await a.connections.list(hank)).map((c) => c.provider),
          ['gitlab'],
        );
      });

      test('re-sealing: sealedUnderOtherKeys pages in seq order, reseal is a compare-and-swap, countByKey counts', async () => {
        const [db, other] = await fresh();
        const users = Array.from({ length: 6 }, (_, i): Owner => ({ issuer: ALICE.issuer, subject: `u${i}` }));
        for (const [i, owner] of users.entries())
          await db.connections.save(connection(owner, 'github', { key_id: i === 2 ? 'k2' : i === 5 ? 'Z9' : 'k1' }));
        // Saving again (an upsert) keeps a row's place in the order.
        await db.connections.save(connection(users[0]!, 'github', { sealed_tokens: 'sealed-u0-again' }));

        const page1 = await other.connections.sealedUnderOtherKeys('k2', 0, 2);
        assert.deepEqual(
          page1.map((r) => r.subject),
          ['u0', 'u1'],
        );
        assert.ok(page1.every((r) => Number.isSafeInteger(r.seq) && r.seq > 0));
        assert.ok(page1[0]!.seq < page1[1]!.seq);
        const { seq, ...u0 } = page1[0]!;
        assert.ok(seq > 0);
        assert.deepEqual(u0, await other.connections.find(users[0]!, 'github'), 'besides seq, the row is whole');
        const page2 = await other.connections.sealedUnderOtherKeys('k2', page1[1]!.seq, 10);
        assert.deepEqual(
          page2.map((r) => r.subject),
          ['u3', 'u4', 'u5'],
        );
        assert.deepEqual(await other.connections.sealedUnderOtherKeys('k2', page2[2]!.seq, 10), [], 'past the last row');

        assert.deepEqual(await other.connections.countByKey(), [
          { key_id: 'Z9', n: 1 },
          { key_id: 'k1', n: 4 },
          { key_id: 'k2', n: 1 },
        ]);

        const target = page1[0]!;
        await resealsOnce([db.connections, other.connections], target, 'sealed_tokens', () => other.connections.find(target, 'github'), u0);
        assert.equal(await db.connections.reseal({ ...u0, subject: 'nobody' }, { key_id: 'k2', sealed_tokens: 'x' }), false, 'no such row');
        assert.deepEqual(await other.connections.countByKey(), [
          { key_id: 'Z9', n: 1 },
          { key_id: 'k1', n: 3 },
          { key_id: 'k2', n: 2 },
        ]);
        assert.deepEqual(
          (await other.connections.sealedUnderOtherKeys('k2', 0, 10)).map((r) => r.subject),
          ['u1', 'u3', 'u4', 'u5'],
        );
        assert.deepEqual(await (await fresh())[0].connections.countByKey(), [], 'an empty table counts nothing');
      });
    });

    describe('refresh leases', () => {
      const { a, b } = twoInstances();

      test('one holder at a time; renew only while held; release only by the holder; expiry frees it', async () => {
        const t = Date.now();
        const acquire = (holder: string, at: number) => (holder === 'a' ? a : b).leases.acquire(ALICE, 'lease-p', holder, 1_000, at);
        assert.equal(await acquire('a', t), true);
        assert.equal(await acquire('a', t + 1), false, 'not even its holder takes it twice');
        assert.equal(await acquire('b', t + 500), false, 'held by a');
        assert.equal(await b.leases.renew(ALICE, 'lease-p', 'b', 1_000, t + 500), false, 'b does not hold it');
        assert.equal(await a.leases.renew(ALICE, 'lease-p', 'a', 1_000, t + 500), true, 'now expires at t + 1500');
        assert.equal(await acquire('b', t + 1_499), false, 'the renewal pushed the expiry out');
        assert.equal(await a.leases.renew(ALICE, 'lease-p', 'a', 1_000, t + 1_500), false, 'a lease cannot be renewed once expired');
        assert.equal(await acquire('b', t + 1_500), true, 'free at its expiry');
        assert.equal(await a.leases.renew(ALICE, 'lease-p', 'a', 1_000, t + 1_600), false, 'a lost it');

        await a.leases.release(ALICE, 'lease-p', 'a');
        assert.equal(await a.leases.acquire(ALICE, 'lease-p', 'c', 1_000, t + 1_600), false, 'a release by a non-holder frees nothing');
        await b.leases.release(ALICE, 'lease-p', 'b');
        assert.equal(await a.leases.acquire(ALICE, 'lease-p', 'c', 1_000, t + 1_600), true, 'free once its holder released it');
      });

      test('a lease is per owner and provider', async () => {
        const t = Date.now();
        assert.equal(await a.leases.acquire(BOB, 'github', 'h1', 30_000, t), true);
        assert.equal(await b.leases.acquire(BOB, 'gitlab', 'h2', 30_000, t), true, 'another provider');
        assert.equal(await b.leases.acquire(CAROL, 'github', 'h3', 30_000, t), true, 'another owner');
        assert.equal(
          await b.leases.acquire({ issuer: 'https://other.example', subject: 'bob' }, 'github', 'h4', 30_000, t),
          true,
          'another issuer',
        );
        assert.equal(await b.leases.acquire(BOB, 'github', 'h5', 30_000, t), false);
      });

      test('exactly one of ten concurrent acquirers on two instances gets the lease', async () => {
        const racers = await Promise.all(
          Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).leases.acquire(CAROL, 'lease-race', `h${i}`, 30_000)),
        );
        assert.equal(racers.filter(Boolean).length, 1);
        const winner = `h${racers.indexOf(true)}`;
        assert.equal(await a.leases.renew(CAROL, 'lease-race', winner, 30_000), true, 'held by the one that won');
      });
    });

    describe('audit', () => {
      after(closeOpened);
      test('record keeps event, owner, provider and detail (cut to 200 characters); list returns them in order, with optional filters', async () => {
        const [a, b] = await fresh();
        const t0 = Date.now();
        await a.audit.record('connection_created', ALICE, 'github');
        await b.audit.record('refresh_failed', ALICE, 'github', 'x'.repeat(500));
        await a.audit.record('connection_created', BOB, 'linear', 'first');
        await b.audit.record('keys_rotated', undefined, undefined, '3');
        await a.audit.record('connection_created', { issuer: 'https://other.example', subject: 'alice' }, 'github', 'elsewhere');
        const t1 = Date.now();

        const all = await b.audit.list();
        assert.deepEqual(
          all.map((r) => [r.event, r.issuer, r.subject, r.provider, r.detail]),
          [
            ['connection_created', ALICE.issuer, 'alice', 'github', null],
            ['refresh_failed', ALICE.issuer, 'alice', 'github', 'x'.repeat(200)],
            ['connection_created', BOB.issuer, 'bob', 'linear', 'first'],
            ['keys_rotated', null, null, null, '3'],
            ['connection_created', 'https://other.example', 'alice', 'github', 'elsewhere'],
          ],
        );
        for (const [i, r] of all.entries()) {
          assert.ok(Number.isSafeInteger(r.id) && (i === 0 || r.id > all[i - 1]!.id), 'ids are numbers, increasing');
          assertStamped(r.at, t0, t1, 'at');
        }
        assert.deepEqual(Object.keys(all[0]!).sort(), ['at', 'detail', 'event', 'id', 'issuer', 'provider', 'subject']);

        assert.deepEqual(
          (await a.audit.list({ issuer: ALICE.issuer, subject: 'alice' })).map((r) => r.event),
          ['connection_created', 'refresh_failed'],
        );
        assert.deepEqual(
          (await a.audit.list({ subject: 'alice' })).map((r) => r.detail),
          [null, 'x'.repeat(200), 'elsewhere'],
        );
        assert.deepEqual(
          (await a.audit.list({ issuer: 'https://other.example' })).map((r) => r.detail),
          ['elsewhere'],
        );
        assert.deepEqual(
          (await a.audit.list({ event: 'connection_created' })).map((r) => r.subject),
          ['alice', 'bob', 'alice'],
        );
        assert.deepEqual(
          (await a.audit.list({ subject: 'bob', event: 'connection_created' })).map((r) => r.detail),
          ['first'],
        );
        assert.deepEqual(await a.audit.list({ subject: 'bob', event: 'refresh_failed' }), []);
        assert.deepEqual(await a.audit.list({}), all);
      });

      test('prune deletes only rows recorded before the cutoff, oldest first, at most limit per call, and keeps the newer ones', async () => {
        const [a, b] = await fresh();
        for (let i = 0; i < 5; i++) await (i % 2 ? a : b).audit.record('token_exchanged', ALICE, 'github', `old ${i}`);
        await sleep(5);
        const before = Date.now();
        await sleep(2);
        await a.audit.record('token_exchanged', ALICE, 'github', 'new 0');
        await b.audit.record('upstream_call', BOB, 'github', 'new 1');
        const details = async () => (await a.audit.list()).map((r) => r.detail);

        assert.equal(await b.audit.prune(before, 2), 2, 'at most limit');
        assert.deepEqual(await details(), ['old 2', 'old 3', 'old 4', 'new 0', 'new 1'], 'the oldest went first');
        assert.equal(await a.audit.prune(before, 10_000), 3, 'the rest before the cutoff');
        assert.deepEqual(await details(), ['new 0', 'new 1'], 'rows at or after the cutoff stay');
        assert.equal(await b.audit.prune(before, 10_000), 0, 'nothing left to delete: idempotent');
        assert.equal(await a.audit.prune(Date.now() + HOUR, 1), 1);
        assert.deepEqual(await details(), ['new 1']);
      });
    });

    describe('admin queries', () => {
      after(closeOpened);

      test('connections pages across every principal in seq order, filtered by owner, provider and status, without tokens', async () => {
        const [a, b] = await fresh();
        await a.connections.save(connection(ALICE, 'github'));
        await b.connections.save(connection(ALICE, 'linear', { scopes: 'read write' }));
        await a.connections.save(connection(BOB, 'github'));
        await b.connections.save(connection(CAROL, 'github'));
        await a.connections.markReauthRequired(BOB, 'github', 'refresh_rejected');
        await a.connections.touch(CAROL, 'github', 1_700_000_000_000);

        const pages: string[][] = [];
        let after = 0;
        for (;;) {
          const page = await b.admin.connections({}, after, 3);
          if (page.length === 0) break;
          pages.push(page.map((r) => `${r.subject}/${r.provider}`));
          after = page[page.length - 1]!.seq;
        }
        assert.deepEqual(
          pages,
          [['alice/github', 'alice/linear', 'bob/github'], ['carol/github']],
          'in the order they were made, by pages',
        );

        const all = await a.admin.connections({}, 0, 100);
        for (const row of all) {
          assert.equal('sealed_tokens' in row, false, 'no sealed tokens');
          assert.equal('key_id' in row, false, 'no key id');
          assert.ok(Number.isSafeInteger(row.seq));
        }
        assert.deepEqual(Object.keys(all[0]!).sort(), [
          'account_id',
          'account_login',
          'created_at',
          'issuer',
          'last_used_at',
          'provider',
          'scopes',
          'seq',
          'status',
          'status_reason',
          'subject',
          'updated_at',
        ]);
        const carol = all.find((r) => r.subject === 'carol')!;
        assert.equal(carol.last_used_at, 1_700_000_000_000);
        assert.equal(all.find((r) => r.provider === 'linear')!.scopes, 'read write');

        const names = async (filter: Parameters<Store['admin']['connections']>[0]) =>
          (await a.admin.connections(filter, 0, 100)).map((r) => `${r.subject}/${r.provider}`);
        assert.deepEqual(await names({ owner: ALICE }), ['alice/github', 'alice/linear']);
        assert.deepEqual(await names({ owner: { issuer: 'https://other.example', subject: 'alice' } }), []);
        assert.deepEqual(await names({ provider: 'github' }), ['alice/github', 'bob/github', 'carol/github']);
        assert.deepEqual(await names({ status: 'reauth_required' }), ['bob/github']);
        assert.deepEqual(await names({ provider: 'github', status: 'active' }), ['alice/github', 'carol/github']);
        assert.deepEqual(await names({ owner: BOB, provider: 'linear' }), []);
      });

      test('audit pages oldest first by (at, id) after a cursor, from since, for one owner, and keeps connection_revoked_by_admin', async () => {
        const [a, b] = await fresh();
        const other: Owner = { issuer: 'https://other.example', subject: 'alice' };
        await a.audit.record('connection_created', ALICE, 'github');
        await b.audit.record('connection_created', BOB, 'github');
        await sleep(5);
        const since = Date.now();
        await sleep(2);
        await a.audit.record('refresh_failed', ALICE, 'github', 'unavailable');
        await b.audit.record('connection_revoked_by_admin', BOB, 'github', 'by ops@example.com: revoked upstream');
        await a.audit.record('keys_rotated', undefined, undefined, '3');
        await b.audit.record('connection_created', other, 'github');
        const all = await a.audit.list();

        const pageThrough = async (filter: Parameters<Store['admin']['audit']>[0], limit: number) => {
          const rows: number[] = [];
          let cursor: { at: number; id: number } | undefined;
          for (;;) {
            const page = await b.admin.audit(filter, cursor, limit);
            rows.push(...page.map((r) => r.id));
            if (page.length < limit) return rows;
            cursor = { at: page[page.length - 1]!.at, id: page[page.length - 1]!.id };
          }
        };
        assert.deepEqual(
          await pageThrough({}, 2),
          all.map((r) => r.id),
          'every row, in pages of 2',
        );
        assert.deepEqual((await b.admin.audit({}, undefined, 100))[3], all[3], 'the same rows as list');
        assert.equal(all[3]!.event, 'connection_revoked_by_admin');
        assert.deepEqual(
          (await pageThrough({ since }, 1)).map((id) => all.find((r) => r.id === id)!.event),
          ['refresh_failed', 'connection_revoked_by_admin', 'keys_rotated', 'connection_created'],
          'from since on',
        );
        assert.deepEqual(
          (await pageThrough({ owner: ALICE }, 1)).map((id) => all.find((r) => r.id === id)!.event),
          ['connection_created', 'refresh_failed'],
          'one owner: the issuer counts, not only the subject',
        );
        assert.deepEqual(
          (await pageThrough({ owner: BOB, since }, 5)).map((id) => all.find((r) => r.id === id)!.event),
          ['connection_revoked_by_admin'],
        );
        assert.deepEqual(await b.admin.audit({ since: Date.now() + HOUR }, undefined, 10), []);
      });

      test('stats counts connections by provider and status, open and authorizing links, and refresh failures since a time', async () => {
        const [a, b] = await fresh();
        await a.connections.save(connection(ALICE, 'github'));
        await a.connections.save(connection(BOB, 'github'));
        await a.connections.save(connection(CAROL, 'github'));
        await b.connections.save(connection(ALICE, 'linear'));
        await b.connections.markReauthRequired(CAROL, 'github', 'refresh_rejected');
        const open = pendingRow(ALICE);
        const claimed = pendingRow(BOB);
        const done = pendingRow(CAROL);
        await a.pending.create(open);
        await a.pending.create(claimed);
        await a.pending.create(done);
        await a.pending.create(pendingRow(CAROL, { provider: 'linear', expires_at: Date.now() - 1 }));
        assert.equal(await b.pending.claim(claimed.id), true);
        assert.equal(await b.pending.settle(done.id, 'completed'), true);
        await a.audit.record('refresh_failed', ALICE, 'github', 'unavailable');
        await sleep(5);
        const since = Date.now();
        await sleep(2);
        await a.audit.record('refresh_failed', ALICE, 'github', 'invalid_grant');
        await b.audit.record('refresh_failed', BOB, 'github', 'unavailable');
        await b.audit.record('refresh_failed', ALICE, 'linear', 'unavailable');
        await b.audit.record('reauth_required', ALICE, 'github', 'refresh_rejected');

        assert.deepEqual(await b.admin.stats(since), {
          connections: [
            { provider: 'github', status: 'active', n: 2 },
            { provider: 'github', status: 'reauth_required', n: 1 },
            { provider: 'linear', status: 'active', n: 1 },
          ],
          pending: { open: 1, authorizing: 1 },
          refreshFailures: [
            { provider: 'github', n: 2 },
            { provider: 'linear', n: 1 },
          ],
        });
        const later = await a.admin.stats(Date.now() + HOUR, Date.now() + 2 * HOUR);
        assert.deepEqual(later.pending, { open: 0, authorizing: 0 }, 'the open link expired, the authorization too');
        assert.deepEqual(later.refreshFailures, []);
      });
    });

    describe('rate limits', () => {
      const { a, b } = twoInstances();

      test('hits count, across instances, within a window opened by the first hit; a finished window starts again at the next hit', async () => {
        const t0 = 1_000_000;
        assert.deepEqual(await a.rateLimits.hit('rl-window', 60_000, t0), { hits: 1, resetAt: t0 + 60_000 });
        assert.deepEqual(await b.rateLimits.hit('rl-window', 60_000, t0 + 10), { hits: 2, resetAt: t0 + 60_000 });
        assert.deepEqual(await a.rateLimits.hit('rl-window', 60_000, t0 + 59_999), { hits: 3, resetAt: t0 + 60_000 });
        assert.deepEqual(
          await b.rateLimits.hit('rl-window', 60_000, t0 + 60_000),
          { hits: 1, resetAt: t0 + 120_000 },
          'a new window at the end of the old one',
        );
        assert.deepEqual(
          await a.rateLimits.hit('rl-window', 60_000, t0 + 200_000),
          { hits: 1, resetAt: t0 + 260_000 },
          'a window opened late starts at its first hit',
        );
        assert.deepEqual(await a.rateLimits.hit('rl-other', 60_000, t0 + 200_001), { hits: 1, resetAt: t0 + 260_001 }, 'keys count apart');
      });

      test('no hit is lost among 20 concurrent hits from two instances', async () => {
        const t0 = 2_000_000;
        const hits = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).rateLimits.hit('rl-race', 60_000, t0 + i)));
        assert.deepEqual(
          hits.map((r) => r.hits).sort((x, y) => x - y),
          Array.from({ length: 20 }, (_, i) => i + 1),
        );
        assert.ok(
          hits.every((r) => r.resetAt === hits.find((h) => h.hits === 1)!.resetAt),
          'one window for all of them',
        );
      });

      test('a hit of several counts them all at once; callers of one turn each get the count just after their own hits', async () => {
        const t0 = 2_500_000;
        assert.deepEqual(await a.rateLimits.hit('rl-many', 60_000, t0, 5), { hits: 5, resetAt: t0 + 60_000 });
        const sameTurn = await Promise.all([
          a.rateLimits.hit('rl-many', 60_000, t0 + 1, 3),
          a.rateLimits.hit('rl-many', 60_000, t0 + 1),
          a.rateLimits.hit('rl-many', 60_000, t0 + 1, 10),
        ]);
        assert.deepEqual(
          sameTurn.map((r) => r.hits),
          [8, 9, 19],
          'in the order they were asked',
        );
        assert.deepEqual(
          await b.rateLimits.hit('rl-many', 60_000, t0 + 2, 2),
          { hits: 21, resetAt: t0 + 60_000 },
          'seen by the other instance',
        );
      });

      test('undo takes one hit back and never below zero; reset forgets the key; both ignore unknown keys', async () => {
        const t0 = 3_000_000;
        /** A hit on instance a at t0 + `dt`, after `undos` undos on instance b. */
        const hitAfterUndos = async (undos: number, dt: number) => {
          for (let i = 0; i < undos; i++) await b.rateLimits.undo('rl-undo');
          return a.rateLimits.hit('rl-undo', 60_000, t0 + dt);
        };
        await a.rateLimits.hit('rl-undo', 60_000, t0);
        await a.rateLimits.hit('rl-undo', 60_000, t0 + 1);
        assert.deepEqual(await hitAfterUndos(1, 2), { hits: 2, resetAt: t0 + 60_000 }, 'the undone hit no longer counts; the window stays');
        assert.deepEqual(await hitAfterUndos(3, 3), { hits: 1, resetAt: t0 + 60_000 }, 'undone down to zero, not below');

        await b.rateLimits.reset('rl-undo');
        assert.deepEqual(await hitAfterUndos(0, 4), { hits: 1, resetAt: t0 + 4 + 60_000 }, 'after a reset the next hit opens a new window');
        await b.rateLimits.undo('rl-never-hit');
        await b.rateLimits.reset('rl-never-hit');
        assert.deepEqual(await a.rateLimits.hit('rl-never-hit', 60_000, t0), { hits: 1, resetAt: t0 + 60_000 });
      });
    });

    describe('token exchange', () => {
      let a: Store;
      let b: Store;
      before(async () => ([a, b] = await fresh()));

      test('a client assertion is usable once across instances until it expires; then its hash may be used again', async () => {
        const t0 = 5_000_000;
        assert.equal(await a.clientAssertions.use('jti-1', t0 + 60_000, t0), true);
        assert.equal(await b.clientAssertions.use('jti-1', t0 + 60_000, t0 + 1), false, 'a replay on another instance');
        assert.equal(await a.clientAssertions.use('jti-2', t0 + 60_000, t0 + 2), true, 'another jti');
        assert.equal(await b.clientAssertions.use('jti-1', t0 + 200_000, t0 + 60_001), true, 'expired rows no longer guard');
        assert.equal(await a.clientAssertions.use('jti-1', t0 + 200_000, t0 + 60_002), false);
        const raced = await Promise.all(
          Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).clientAssertions.use('jti-race', t0 + 60_000, t0)),
        );
        assert.equal(raced.filter(Boolean).length, 1, 'of concurrent uses exactly one wins');
      });

      test('prune removes expired client assertions', async () => {
        const now = Date.now();
        await a.clientAssertions.use('jti-old', now - 1000, now - 2000);
        await a.pending.prune(now);
        assert.equal(await b.clientAssertions.use('jti-old', now + 60_000, now - 2000), true, 'gone, so usable again even at its old time');
      });

      test('service usage keeps the latest time per (principal, provider, service)', async () => {
        await a.connections.save(connection(ALICE, 'github'));
        await a.connections.save(connection(BOB, 'github'));
        await a.serviceUsage.touch(ALICE, 'github', 'issue-bot', 1000);
        await b.serviceUsage.touch(ALICE, 'github', 'issue-bot', 3000);
        await a.serviceUsage.touch(ALICE, 'github', 'issue-bot', 2000);
        await b.serviceUsage.touch(ALICE, 'github', 'tracker-bot', 1500);
        await a.serviceUsage.touch(BOB, 'github', 'issue-bot', 9000);
        assert.deepEqual(await b.serviceUsage.list(ALICE), [
          { provider: 'github', service_id: 'issue-bot', last_used_at: 3000 },
          { provider: 'github', service_id: 'tracker-bot', last_used_at: 1500 },
        ]);
        assert.deepEqual(await a.serviceUsage.list({ issuer: 'https://other.example', subject: 'alice' }), []);
      });

      test('service usage goes with its connection: deleted with it, cleared when another account replaces it, never recorded without one', async () => {
        const DAN: Owner = { issuer: 'https://idp.example.com', subject: 'dan-usage' };
        await a.serviceUsage.touch(DAN, 'github', 'issue-bot', 1000);
        assert.deepEqual(await b.serviceUsage.list(DAN), [], 'no connection, no usage');

        await a.connections.save(connection(DAN, 'github'));
        await a.connections.save(connection(DAN, 'gitlab'));
        await a.serviceUsage.touch(DAN, 'github', 'issue-bot', 2000);
        await b.serviceUsage.touch(DAN, 'gitlab', 'issue-bot', 2000);
        // The same account saved again (more access, a reconnect) keeps its usage.
        await b.connections.save(connection(DAN, 'github', { scopes: 'repo delete_repo', sealed_tokens: 'sealed-2' }));
        assert.equal((await a.serviceUsage.list(DAN)).length, 2);

        // A delete rolled back keeps both; a committed one takes the usage with it, and only that provider's.
        await assert.rejects(
          a.transaction(async (tx) => {
            assert.equal(await tx.connections.delete(DAN, 'github'), true);
            throw new Error('rolled back');
          }),
          /rolled back/,
        );
        assert.equal((await b.serviceUsage.list(DAN)).length, 2, 'a rolled-back delete keeps the usage');
        assert.equal(await b.connections.delete(DAN, 'github'), true);
        assert.deepEqual(await a.serviceUsage.list(DAN), [{ provider: 'gitlab', service_id: 'issue-bot', last_used_at: 2000 }]);

        // Reconnected (even as another account): nothing from before it existed.
        await a.connections.save(connection(DAN, 'github', { account_id: 'acct-other', account_login: 'other' }));
        assert.deepEqual(
          (await b.serviceUsage.list(DAN)).map((u) => u.provider),
          ['gitlab'],
        );
        // Another upstream account replacing a connection in place clears its usage too.
        await a.serviceUsage.touch(DAN, 'github', 'issue-bot', 3000);
        await b.connections.save(connection(DAN, 'github', { account_id: 'acct-third', account_login: 'third' }));
        assert.deepEqual(
          (await a.serviceUsage.list(DAN)).map((u) => u.provider),
          ['gitlab'],
        );
      });

      test('a pending connection keeps its service; openOrCreate shows an open link again only to the same service', async () => {
        const base = pendingRow(ALICE, { id: 'svc-1', link_hash: 'svc-link-1' });
        const first = await a.pending.openOrCreate({ ...base, service_id: 'issue-bot' }, 20);
        assert.equal(first.pending.service_id, 'issue-bot');
        const same = await b.pending.openOrCreate({ ...base, id: 'svc-2', link_hash: 'svc-link-2', service_id: 'issue-bot' }, 20);
        assert.equal(same.pending.id, 'svc-1');
        const other = await b.pending.openOrCreate({ ...base, id: 'svc-3', link_hash: 'svc-link-3', service_id: 'tracker-bot' }, 20);
        assert.equal(other.pending.id, 'svc-3');
        const tool = await a.pending.openOrCreate({ ...base, id: 'svc-4', link_hash: 'svc-link-4' }, 20);
        assert.equal(tool.pending.id, 'svc-4');
        assert.equal(tool.pending.service_id, null);
        assert.equal((await b.pending.byId('svc-3'))?.service_id, 'tracker-bot');
      });

      test('the exchange audit events are recorded', async () => {
        await a.audit.record('token_exchanged', ALICE, 'github', 'service=issue-bot scopes=repo');
        await b.audit.record('token_exchange_refused', undefined, undefined, 'service=issue-bot reason=invalid_grant');
        assert.deepEqual(
          (await b.audit.list()).filter((r) => r.event.startsWith('token_')).map((r) => r.event),
          ['token_exchanged', 'token_exchange_refused'],
        );
      });
    });

    describe('webhook outbox', () => {
      after(closeOpened);
      let a: Store;
      let b: Store;
      before(async () => ([a, b] = await fresh()));
      const event = (id: string, endpoint = 'sink'): NewOutboxRow => ({
        id,
        endpoint,
        event_type: 'connection.created',
        payload: `{"type":"connection.created","n":"${id}"}`,
      });

      test('a claim is held by one instance until it lapses; only its holder settles it; a lapsed claim is taken again', async () => {
        const t = 10_000_000;
        await a.webhooks.enqueue([event('wh-1')], t);
        assert.deepEqual(await b.webhooks.claim('h-b', ['sink'], 10, 30_000, t - 1), [], 'not due before it was written');
        const [claimed] = await a.webhooks.claim('h-a', ['sink'], 10, 30_000, t);
        assert.equal(claimed?.id, 'wh-1');
        assert.deepEqual(
          [claimed!.status, claimed!.attempts, claimed!.claimed_by, claimed!.due_at, claimed!.created_at, claimed!.payload],
          ['pending', 1, 'h-a', t + 30_000, t, '{"type":"connection.created","n":"wh-1"}'],
        );
        assert.deepEqual(await b.webhooks.claim('h-b', ['sink'], 10, 30_000, t + 29_999), [], 'held while the claim lasts');
        const [again] = await b.webhooks.claim('h-b', ['sink'], 10, 30_000, t + 30_000);
        assert.deepEqual(
          [again?.id, again?.attempts, again?.claimed_by],
          ['wh-1', 2, 'h-b'],
          'a lapsed claim (its holder died) is taken again',
        );
        assert.equal(await a.webhooks.delivered('wh-1', 'h-a', t + 30_001), false, 'the first holder lost it');
        assert.equal(await b.webhooks.delivered('wh-1', 'h-b', t + 30_002), true);
        assert.equal(await b.webhooks.delivered('wh-1', 'h-b', t + 30_003), false, 'settled once');
        const row = await a.webhooks.byId('wh-1');
        assert.deepEqual([row?.status, row?.settled_at, row?.claimed_by], ['delivered', t + 30_002, null]);
        assert.deepEqual(await a.webhooks.claim('h-a', ['sink'], 10, 30_000, t + 10 * DAY), [], 'a delivered row is never claimed again');
      });

      test('of two instances claiming at once, each row goes to exactly one; only the endpoints named are claimed', async () => {
        const t = 20_000_000;
        const ids = Array.from({ length: 30 }, (_, i) => `wh-race-${String(i).padStart(2, '0')}`);
        await a.webhooks.enqueue(
          ids.map((id) => event(id, 'race')),
          t,
        );
        await b.webhooks.enqueue([event('wh-other', 'elsewhere')], t);
        const claims = await Promise.all(
          Array.from({ length: 12 }, (_, i) => (i % 2 ? a : b).webhooks.claim(`h${i}`, ['race', 'nowhere'], 4, 30_000, t)),
        );
        const claimed = claims.flat().map((r) => r.id);
        assert.equal(claimed.length, 30, 'every row claimed');
        assert.equal(new Set(claimed).size, 30, 'none twice');
        assert.deepEqual([...claimed].sort(), ids);
        assert.equal((await a.webhooks.byId('wh-other'))?.claimed_by, null, "another endpoint's row is left alone");
      });

      test('an undelivered row is due again at its retry time; without one it is failed for good; stats and prune see them', async () => {
        const t = 30_000_000;
        await a.webhooks.enqueue(
          [event('wh-retry', 'stats'), event('wh-fail', 'stats'), event('wh-ok', 'stats'), event('wh-wait', 'stats')],
          t,
        );
        const claimed = await a.webhooks.claim('h', ['stats'], 3, 30_000, t);
        assert.deepEqual(claimed.map((r) => r.id).sort(), ['wh-fail', 'wh-ok', 'wh-retry'], 'oldest due first, at most the limit');
        assert.equal(await b.webhooks.undelivered('wh-retry', 'someone-else', t + 5_000, 'http_500', t + 1), false, 'only by its holder');
        assert.equal(await a.webhooks.undelivered('wh-retry', 'h', t + 5_000, 'http_500', t + 1), true);
        assert.equal(await a.webhooks.undelivered('wh-fail', 'h', null, 'ECONNREFUSED', t + 2), true);
        assert.equal(await a.webhooks.delivered('wh-ok', 'h', t + 3), true);
        const retry = await b.webhooks.byId('wh-retry');
        assert.deepEqual(
          [retry?.status, retry?.due_at, retry?.claimed_by, retry?.last_error, retry?.settled_at],
          ['pending', t + 5_000, null, 'http_500', null],
        );
        const failed = await b.webhooks.byId('wh-fail');
        assert.deepEqual([failed?.status, failed?.settled_at, failed?.last_error], ['failed', t + 2, 'ECONNREFUSED']);
        assert.deepEqual(
          (await b.webhooks.claim('h2', ['stats'], 10, 30_000, t + 4_999)).map((r) => r.id),
          ['wh-wait'],
          'the retry is not due yet; the failed row never is',
        );
        assert.deepEqual(
          (await b.webhooks.claim('h2', ['stats'], 10, 30_000, t + 5_000)).map((r) => [r.id, r.attempts]),
          [['wh-retry', 2]],
        );
        const stats = await a.webhooks.stats();
        assert.deepEqual(
          stats.endpoints.find((e) => e.endpoint === 'stats'),
          { endpoint: 'stats', pending: 2, delivered: 1, failed: 1 },
        );
        assert.equal(typeof stats.oldestPendingAt, 'number');
        await a.webhooks.prune(t + 3, t + 2);
        assert.ok((await b.webhooks.byId('wh-ok')) && (await b.webhooks.byId('wh-fail')), 'nothing settled at or after the cut-offs goes');
        assert.equal(await a.webhooks.prune(t + 4, t + 3), 2, 'the delivered and the failed row');
        assert.equal(await b.webhooks.byId('wh-ok'), undefined);
        assert.equal(await b.webhooks.byId('wh-fail'), undefined);
        assert.equal((await b.webhooks.byId('wh-retry'))?.status, 'pending', 'a pending row is never pruned');
      });

      test('a released claim (our own shutdown cut the attempt) is due at once, its attempt uncounted, its last error and retry kept', async () => {
        const t = 35_000_000;
        await a.webhooks.enqueue([event('wh-cut', 'release')], t);
        await a.webhooks.claim('h', ['release'], 1, 30_000, t);
        assert.equal(await a.webhooks.undelivered('wh-cut', 'h', t + 5_000, 'http_503', t + 1), true, 'a first real failure');
        const [claimed] = await a.webhooks.claim('h', ['release'], 1, 30_000, t + 5_000);
        assert.equal(claimed?.attempts, 2);
        assert.equal(await b.webhooks.release('wh-cut', 'someone-else', t + 5_100), false, 'only by its holder');
        assert.equal(await a.webhooks.release('wh-cut', 'h', t + 5_100), true);
        assert.equal(await a.webhooks.release('wh-cut', 'h', t + 5_101), false, 'released once');
        const row = await b.webhooks.byId('wh-cut');
        assert.deepEqual(
          [row?.status, row?.attempts, row?.due_at, row?.claimed_by, row?.last_error, row?.settled_at],
          ['pending', 1, t + 5_100, null, 'http_503', null],
        );
        assert.deepEqual(
          (await b.webhooks.claim('h2', ['release'], 1, 30_000, t + 5_100)).map((r) => [r.id, r.attempts]),
          [['wh-cut', 2]],
          'another instance takes it at once, as the second attempt',
        );
      });

      test('rows enqueued in a transaction land with its other writes, or not at all', async () => {
        await assert.rejects(
          a.transaction(async (tx) => {
            await tx.connections.save(connection(CAROL, 'wh-tx'));
            await tx.webhooks.enqueue([event('wh-rolled-back')]);
            throw new Error('boom');
          }),
          /boom/,
        );
        assert.equal(await b.webhooks.byId('wh-rolled-back'), undefined);
        assert.equal(await b.connections.find(CAROL, 'wh-tx'), undefined);
        await a.transaction(async (tx) => {
          await tx.connections.save(connection(CAROL, 'wh-tx'));
          await tx.webhooks.enqueue([event('wh-committed')]);
          assert.equal(await b.webhooks.byId('wh-committed'), undefined, 'invisible outside before commit');
        });
        assert.equal((await b.webhooks.byId('wh-committed'))?.status, 'pending');
        assert.ok(await b.connections.find(CAROL, 'wh-tx'));
      });
    });

    describe('upstream clients', () => {
      let a: Store;
      let b: Store;
      before(async () => ([a, b] = await fresh()));
      const ISSUER = 'https://as.tracker.example';
      const KEY = 'https://broker.example/connect/tracker/callback';
      const registration = (clientId: string, overrides: Partial<UpstreamClientRow> = {}): UpstreamClientRow => ({
        issuer: ISSUER,
        client_key: KEY,
        client_id: clientId,
        client_secret_sealed: null,
        key_id: null,
        registered_at: 1_000,
        metadata_json: JSON.stringify({ client_id: clientId }),
        ...overrides,
      });

      test('a registration is kept per (issuer, client key); of concurrent ones from two instances, all read the first written', async () => {
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            (i % 2 ? a : b).upstreamClients.putIfAbsent(
              registration(`client-${i}`, { client_secret_sealed: `sealed-${i}`, key_id: 'k1', registered_at: 1_000 + i }),
            ),
          ),
        );
        const winner = results[0]!;
        for (const r of results) assert.deepEqual(r, winner, 'every instance uses the one stored');
        assert.deepEqual(await a.upstreamClients.find(ISSUER, KEY), winner);
        assert.match(winner.client_id, /^client-\d$/);
        assert.equal(winner.client_secret_sealed, `sealed-${winner.client_id.slice(7)}`);
        assert.equal(typeof winner.registered_at, 'number');
        assert.equal(await b.upstreamClients.find(ISSUER, 'https://broker.example/connect/other/callback'), undefined);
        assert.equal(await b.upstreamClients.find('https://as.other.example', KEY), undefined);
        const other = await b.upstreamClients.putIfAbsent(registration('client-other', { issuer: 'https://as.other.example' }));
        assert.equal(other.client_id, 'client-other', 'another issuer has its own registration');
        assert.equal(other.client_secret_sealed, null);
      });

      test('delete removes a registration only while it is still the named client', async () => {
        await a.upstreamClients.putIfAbsent(registration('c-1', { client_key: 'key-delete' }));
        assert.equal(await b.upstreamClients.delete(ISSUER, 'key-delete', 'c-2'), false, 'another client id deletes nothing');
        assert.equal((await a.upstreamClients.find(ISSUER, 'key-delete'))?.client_id, 'c-1');
        assert.equal(await b.upstreamClients.delete(ISSUER, 'key-delete', 'c-1'), true);
        assert.equal(await a.upstreamClients.find(ISSUER, 'key-delete'), undefined);
        assert.equal((await a.upstreamClients.putIfAbsent(registration('c-3', { client_key: 'key-delete' }))).client_id, 'c-3');
      });

      test('re-sealing: sealedUnderOtherKeys pages secrets in byte order of (issuer, client key), reseal is a compare-and-set, countByKey counts', async () => {
        const [db, other] = await fresh();
        // Byte order, not a language's: 'Z' before 'a', '/a' before '/b'.
        const rows = [
          registration('c-a1', { issuer: 'https://as.a.example', client_key: '/b', client_secret_sealed: 'sealed-a1', key_id: 'k1' }),
          registration('c-a0', { issuer: 'https://as.a.example', client_key: '/a', client_secret_sealed: 'sealed-a0', key_id: 'k1' }),
          registration('c-Z', { issuer: 'https://as.Z.example', client_key: '/a', client_secret_sealed: 'sealed-Z', key_id: 'Z9' }),
          registration('c-cur', { issuer: 'https://as.c.example', client_key: '/a', client_secret_sealed: 'sealed-cur', key_id: 'k2' }),
          registration('c-public', { issuer: 'https://as.b.example', client_key: '/a' }),
          registration('c-nokey', { issuer: 'https://as.d.example', client_key: '/a', client_secret_sealed: 'sealed-nokey', key_id: null }),
        ];
        for (const row of rows) await db.upstreamClients.putIfAbsent(row);
        const ids = (page: UpstreamClientRow[]) => page.map((r) => r.client_id);

        const page1 = await other.upstreamClients.sealedUnderOtherKeys('k2', undefined, 2);
        assert.deepEqual(ids(page1), ['c-Z', 'c-a0']);
        assert.deepEqual(page1[1], rows[1], 'the row is whole');
        const page2 = await other.upstreamClients.sealedUnderOtherKeys('k2', page1[1], 10);
        assert.deepEqual(ids(page2), ['c-a1', 'c-nokey'], 'a public client has nothing to re-seal; a secret without a key id is listed');
        assert.deepEqual(await other.upstreamClients.sealedUnderOtherKeys('k2', page2[1], 10), [], 'past the last row');
        assert.deepEqual(await other.upstreamClients.countByKey(), [
          { key_id: '', n: 1 },
          { key_id: 'Z9', n: 1 },
          { key_id: 'k1', n: 2 },
          { key_id: 'k2', n: 1 },
        ]);

        const target = page1[1]!;
        const reread = () => other.upstreamClients.find(target.issuer, target.client_key);
        await resealsOnce([db.upstreamClients, other.upstreamClients], target, 'client_secret_sealed', reread, target);
        // A registration replaced meanwhile (forgotten, then registered anew) is not overwritten.
        const replaced = rows[0]!;
        assert.equal(await db.upstreamClients.delete(replaced.issuer, replaced.client_key, replaced.client_id), true);
        await db.upstreamClients.putIfAbsent({ ...replaced, client_id: 'c-a1-new', client_secret_sealed: 'sealed-new', key_id: 'k2' });
        assert.equal(await other.upstreamClients.reseal(replaced, { key_id: 'k2', client_secret_sealed: 'stale' }), false);
        assert.equal((await db.upstreamClients.find(replaced.issuer, replaced.client_key))?.client_secret_sealed, 'sealed-new');
        assert.deepEqual(await other.upstreamClients.countByKey(), [
          { key_id: '', n: 1 },
          { key_id: 'Z9', n: 1 },
          { key_id: 'k2', n: 3 },
        ]);
        assert.deepEqual(ids(await other.upstreamClients.sealedUnderOtherKeys('k2', undefined, 10)), ['c-Z', 'c-nokey']);
        assert.deepEqual(await (await fresh())[0].upstreamClients.countByKey(), [], 'an empty table counts nothing');
      });
    });

    describe('gateway', () => {
      let a: Store;
      let b: Store;
      before(async () => ([a, b] = await fresh()));

      test('upstream tool definitions are shared across instances and written only when they change', async () => {
        assert.equal(await a.upstreamTools.get('github'), undefined);
        assert.equal(await a.upstreamTools.put('github', '[{"name":"get_me"}]', 1000), true);
        assert.deepEqual(await b.upstreamTools.get('github'), {
          upstream: 'github',
          definitions_json: '[{"name":"get_me"}]',
          seen_at: 1000,
        });
        assert.equal(await b.upstreamTools.put('github', '[{"name":"get_me"}]', 2000), false, 'the same definitions: no write');
        assert.equal((await a.upstreamTools.get('github'))?.seen_at, 1000);
        assert.equal(await b.upstreamTools.put('github', '[{"name":"get_me"},{"name":"list_issues"}]', 3000), true);
        await a.upstreamTools.put('everything', '[]', 4000);
        assert.deepEqual(
          (await a.upstreamTools.all()).map((r) => [r.upstream, r.definitions_json, r.seen_at]),
          [
            ['everything', '[]', 4000],
            ['github', '[{"name":"get_me"},{"name":"list_issues"}]', 3000],
          ],
        );
      });

      test('the upstream_call audit event is recorded', async () => {
        await a.audit.record('upstream_call', ALICE, 'github', 'tool=get_me outcome=result ms=12');
        assert.deepEqual(
          (await b.audit.list({ event: 'upstream_call' })).map((r) => [r.provider, r.detail]),
          [['github', 'tool=get_me outcome=result ms=12']],
        );
      });
    });

    describe('transactions', () => {
      const { a, b } = twoInstances();

      test('commits every write at once: none is visible to another instance before, all are after, and the result comes back', async () => {
        const row = pendingRow(BOB, { provider: 'tx-commit' });
        let seenBefore: unknown = 'not looked';
        const result = await a.transaction(async (tx) => {
          await tx.pending.create(row);
          await tx.connections.save(connection(BOB, 'tx-commit'));
          assert.equal((await tx.pending.byId(row.id))?.status, 'open', 'the transaction sees its own writes');
          seenBefore = [await b.pending.byId(row.id), await b.connections.find(BOB, 'tx-commit')];
          return tx.pending.claim(row.id);
        });
        assert.equal(result, true);
        assert.deepEqual(seenBefore, [undefined, undefined], 'nothing visible outside before commit');
        assert.equal((await b.pending.byId(row.id))?.status, 'authorizing');
        assert.equal((await b.connections.find(BOB, 'tx-commit'))?.sealed_tokens, 'sealed-bob-tx-commit-1');
      });

      test('a throw rolls back every write of every repository, and the error comes out unchanged', async () => {
        const t = Date.now();
        const existing = pendingRow(ALICE, { provider: 'tx-existing' });
        await a.pending.create(existing);
        await a.connections.save(connection(ALICE, 'tx-existing', { sealed_tokens: 'v1' }));
        await a.oauthFlows.put(oauthFlow('tx-flow-existing', existing.id));
        await a.sessions.create('tx-session-old', t + HOUR);
        await a.rateLimits.hit('tx-rl', 60_000, t);
        const snapshot = async () => ({
          pending: await b.pending.byId(existing.id),
          connections: await b.connections.list(ALICE),
          audit: await b.audit.list(),
          oldSession: await b.sessions.find('tx-session-old'),
        });
        const was = await snapshot();

        const created = pendingRow(ALICE, { provider: 'tx-rollback' });
        const boom = new Error('boom');
        await assert.rejects(
          a.transaction(async (tx) => {
            await tx.pending.create(created);
            assert.equal(await tx.pending.claim(existing.id), true);
            assert.equal(await tx.pending.settle(created.id, 'completed'), true);
            await tx.connections.save(connection(ALICE, 'tx-rollback'));
            assert.equal(
              await tx.connections.replaceTokens(ALICE, 'tx-existing', 'v1', { key_id: 'k2', sealed_tokens: 'v2', scopes: 'all' }),
              true,
            );
            await tx.connections.touch(ALICE, 'tx-existing', 42);
            await tx.audit.record('connection_created', ALICE, 'tx-rollback');
            await tx.sessions.rotateSignedIn({
              oldHash: 'tx-session-old',
              newHash: 'tx-session-new',
              principal: { ...ALICE, name: 'A' },
              expiresAt: t + HOUR,
            });
            await tx.loginTransactions.put(loginTransaction('tx-login'));
            await tx.oauthFlows.put(oauthFlow('tx-flow', created.id));
            assert.equal((await tx.oauthFlows.take('tx-flow-existing', 'browser-1', 'tx-existing'))?.pending_id, existing.id);
            assert.equal(await tx.leases.acquire(ALICE, 'tx-existing', 'tx-holder', 30_000, t), true);
            assert.equal((await tx.rateLimits.hit('tx-rl', 60_000, t + 1)).hits, 2);
            assert.equal((await tx.pending.byId(created.id))?.status, 'completed', 'the transaction sees its own writes');
            throw boom;
          }),
          (err) => err === boom,
        );

        assert.deepEqual(await snapshot(), was);
        assert.equal(await b.pending.byId(created.id), undefined);
        assert.equal(await b.sessions.find('tx-session-new'), undefined);
        assert.equal(await b.loginTransactions.take('tx-login', 'browser-1'), undefined);
        assert.equal(await b.oauthFlows.take('tx-flow', 'browser-1', 'tx-rollback'), undefined);
        assert.equal(
          (await b.oauthFlows.take('tx-flow-existing', 'browser-1', 'tx-existing'))?.pending_id,
          existing.id,
          'a take inside is undone too',
        );
        assert.equal(
          await b.leases.acquire(ALICE, 'tx-existing', 'other-holder', 30_000, t),
          true,
          'the lease taken inside was never held',
        );
        assert.equal((await b.rateLimits.hit('tx-rl', 60_000, t + 2)).hits, 2, 'the hit inside did not count');
      });

      test('a failing statement (a duplicate key) rolls back the writes before it, and the store goes on working', async () => {
        const dup = pendingRow(BOB, { provider: 'tx-dup' });
        await assert.rejects(
          a.transaction(async (tx) => {
            await tx.connections.save(connection(BOB, 'tx-dup'));
            await tx.pending.create(dup);
            await tx.pending.create(dup);
          }),
          constraintError,
        );
        assert.equal(await b.connections.find(BOB, 'tx-dup'), undefined);
        assert.equal(await b.pending.byId(dup.id), undefined);
        await a.pending.create(dup);
        assert.equal((await b.pending.byId(dup.id))?.id, dup.id);
        await a.ping();
      });

      test('of 10 users linking one upstream account at once, each checking othersWithAccount first, exactly one is saved', async () => {
        const owners = Array.from({ length: 10 }, (_, i): Owner => ({ issuer: ALICE.issuer, subject: `racer-${i}` }));
        const outcomes = await Promise.all(
          // One instance: on SQLite a second handle in the same process would block the thread in
          // busy_timeout while the first awaits inside its transaction (two processes do not).
          owners.map((owner) =>
            a.transaction(async (tx) => {
              if ((await tx.connections.othersWithAccount(owner, 'github', 'shared-42')).length > 0) return 'refused';
              await sleep(20); // widen the window between the check and the write
              await tx.connections.save(connection(owner, 'github', { account_id: 'shared-42' }));
              return 'saved';
            }),
          ),
        );
        assert.equal(outcomes.filter((o) => o === 'saved').length, 1, outcomes.join(','));
        const holders = await Promise.all(owners.map((o) => a.connections.find(o, 'github')));
        assert.equal(holders.filter(Boolean).length, 1);
      });
    });
  });
}

repositoryContract('SQLite', false, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'broker-contract-'));
  let n = 0;
  return {
    async database() {
      const path = join(dir, `contract-${++n}.db`);
      return async () => openSqliteStore(path);
    },
    async destroy() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

/** PostgreSQL 15 is the first that creates a database with an ICU collation. */
async function serverVersion(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    return Number((await client.query<{ server_version_num: string }>('SHOW server_version_num')).rows[0]!.server_version_num);
  } finally {
    await client.end();
  }
}

repositoryContract('PostgreSQL', postgresSkipReason(), async () => {
  const server = await startPostgres();
  // A language collation, as production databases often have ('Z' sorts after 'a'): the store
  // must still order as SQLite does, in byte order.
  const options = (await serverVersion(server.url)) >= 150_000 ? { icuLocale: 'en-US' } : {};
  return {
    async database() {
      const url = await server.createDatabase(undefined, options);
      return () => openPostgresStore(url);
    },
    destroy: () => server.destroy(),
  };
});
