// `npm run admin`, through the function the command runs (test/system/admin-process.test.ts runs the
// command itself, test/system/admin-live.test.ts beside a broker process), against a
// database a broker is serving at the same time (the in-process broker of the stack, plus a second
// store writing while the command runs), on SQLite and on PostgreSQL (where initdb exists).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import { runAdmin } from '../src/cli/admin.js';
import { loadConfig } from '../src/config/env.js';
import { ConnectionService } from '../src/connections/index.js';
import { Sealer } from '../src/crypto/index.js';
import type { BrokerEvents, EventSink } from '../src/events/index.js';
import { createLogger } from '../src/log.js';
import { openStore, sqliteHandle, type AuditEvent, type Owner, type Store } from '../src/store/index.js';
import { buildProviders } from '../src/providers/registry.js';
import { ProviderError } from '../src/providers/provider.js';
import { Browser } from './support/browser.js';
import { providersFile } from './support/gateway.js';
import { connectUpstream } from './support/mcp-auth-connect.js';
import { startProtectedUpstream, type ProtectedUpstream } from './support/mcp-auth-upstream.js';
import { modernClient } from './support/mcp.js';
import { postgresSkipReason, startPostgres, type PgServer } from './support/postgres.js';
import { seedConnection } from './support/seed.js';
import { completeConnect, startStack, type Stack } from './support/stack.js';
import { pendingRow } from './support/store-rows.js';
import { productionEnv } from './support/production-env.js';
import type { ProcessRun } from './support/node-process.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const OTHER_ISSUER = 'https://other-idp.example.com';
const LIST_FIELDS = ['createdAt', 'issuer', 'lastUsedAt', 'login', 'provider', 'scopes', 'status', 'subject'];
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** An in-memory stream for runAdmin in this process; `onWrite` runs at each chunk the command writes. */
function sink(onWrite?: () => void): NodeJS.WritableStream & { text: () => string } {
  let text = '';
  return {
    write(chunk: string | Uint8Array) {
      text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
      onWrite?.();
      return true;
    },
    text: () => text,
  } as unknown as NodeJS.WritableStream & { text: () => string };
}

/** `npm run admin` in this process: the function the command runs, with exactly `env`, its output collected. */
async function adminHere(env: Record<string, string>, args: string[]): Promise<ProcessRun> {
  const stdout = sink();
  const stderr = sink();
  const code = await runAdmin(args, { stdout, stderr, env });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

interface Backend {
  /** Extra broker environment (DATABASE_URL). */
  env: Record<string, string>;
  /** Writes an audit row stamped `at` (the store stamps Date.now(), so history is written directly). */
  insertAudit(store: Store, at: number, event: AuditEvent, owner: Owner, provider: string, detail: string): Promise<void>;
  close(): Promise<void>;
}

function adminSuite(name: string, skip: string | false, start: () => Promise<Backend>): void {
  describe(`npm run admin on ${name}, while the broker serves the same database`, { skip }, () => {
    let backend: Backend;
    let stack: Stack;
    let env: Record<string, string>;
    let store: Store;
    let alice: Owner;
    let stopWriter = false;
    let writer: Promise<void> = Promise.resolve();
    let concurrentWrites = 0;
    /** Every output of every command run, searched for tokens at the end. */
    const outputs: string[] = [];
    /** Every token the stand-in issued for the connections here, and their sealed forms. */
    const secrets: string[] = [];

    const admin = async (args: string[], extra: Record<string, string> = {}): Promise<ProcessRun> => {
      const run = await adminHere({ ...env, ...extra }, args);
      outputs.push(run.stdout, run.stderr);
      return run;
    };

    const seed = async (sub: string, login: string, scopes = ['repo']) => {
      const issued = stack.github.issueTokenFor(login, { scopes });
      secrets.push(issued.accessToken);
      await seedConnection(
        env,
        sub,
        'github',
        { id: `id-${login}`, login },
        { accessToken: issued.accessToken, tokenType: 'bearer', scopes },
      );
    };

    before(async () => {
      backend = await start();
      // The broker's own audit prune waits a day here: `audit prune` below counts the history it writes.
      stack = await startStack({ env: backend.env, brokerOptions: () => ({ auditRetention: { firstDelayMs: DAY } }) });
      env = stack.env;
      alice = { issuer: env.OIDC_ISSUER!, subject: 'alice' };
      store = await openStore(loadConfig(env).database);

      // alice connects through the real flow (a tool call, the browser, the stand-in's OAuth)…
      const browser = new Browser();
      const client = await modernClient({
        url: stack.mcpUrl,
        token: await stack.token('alice'),
        onUrl: async (url) => {
          await completeConnect(browser, url, 'alice');
          return { action: 'accept' };
        },
      });
      const result = await client.callTool({ name: 'github_whoami', arguments: {} });
      await client.close();
      assert.equal(result.isError, undefined, JSON.stringify(result));
      // …the others through the store API, with tokens the stand-in knows (so revocation reaches it).
      await seed('bob', 'bob-gh');
      await seed('carol', 'carol-gh', ['repo', 'read:org']);
      await seed('dave', 'dave-gh');
      await store.connections.markReauthRequired({ issuer: alice.issuer, subject: 'dave' }, 'github', 'refresh_rejected');
      // The same subject at another issuer is another person.
      const issued = stack.github.issueTokenFor('other-alice', { scopes: ['repo'] });
      secrets.push(issued.accessToken);
      await new ConnectionService(store, new Sealer(loadConfig(env).tokenKeys), createLogger('error')).save(
        principalFromVerifiedClaims(OTHER_ISSUER, 'alice'),
        'github',
        { id: 'id-other-alice', login: 'other-alice' },
        { accessToken: issued.accessToken, tokenType: 'bearer', scopes: ['repo'] },
        { refuseShared: false },
      );
      // alice's token came from the real flow: read it back (the only unsealing here) to search outputs for it.
      const aliceRow = await store.connections.find(alice, 'github');
      const opened = JSON.parse(
        new Sealer(loadConfig(env).tokenKeys).open(
          { keyId: aliceRow!.key_id, value: aliceRow!.sealed_tokens },
          { ...alice, provider: 'github' },
        ),
      ) as { accessToken: string };
      secrets.push(opened.accessToken);
      for (const row of await store.admin.connections({}, 0, 100)) {
        const full = await store.connections.find(row, row.provider);
        secrets.push(full!.sealed_tokens);
      }

      // A second store keeps writing while the commands run, as a busy service would.
      const busy = { issuer: alice.issuer, subject: 'busy-service-user' };
      writer = (async () => {
        while (!stopWriter) {
          await store.audit.record('token_exchanged', busy, 'github', 'concurrent');
          await store.rateLimits.hit(`admin-test-${concurrentWrites % 7}`, 60_000);
          concurrentWrites++;
          await sleep(3);
        }
      })();
    });

    after(async () => {
      stopWriter = true;
      await writer;
      await store?.close();
      await stack?.close();
      await backend?.close();
    });

    it('connections list: a readable table of every connection, oldest first, with login, scopes, status and times', async () => {
      const run = await admin(['connections', 'list']);
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stderr, '');
      const lines = run.stdout.trimEnd().split('\n');
      assert.match(lines[0]!, /^ISSUER\s+SUBJECT\s+PROVIDER\s+LOGIN\s+STATUS\s+SCOPES\s+CREATED\s+LAST USED$/);
      const rows = lines.slice(1).map((l) => l.split(/\s{2,}/));
      assert.deepEqual(
        rows.map((r) => [r[0], r[1], r[2], r[3], r[4]]),
        [
          [alice.issuer, 'alice', 'github', 'octocat', 'active'],
          [alice.issuer, 'bob', 'github', 'bob-gh', 'active'],
          [alice.issuer, 'carol', 'github', 'carol-gh', 'active'],
          [alice.issuer, 'dave', 'github', 'dave-gh', 'reauth_required'],
          [OTHER_ISSUER, 'alice', 'github', 'other-alice', 'active'],
        ],
      );
      assert.equal(rows[2]![5], 'repo,read:org');
      assert.match(rows[0]![6]!, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
      assert.equal(rows[1]![7], 'never', 'bob never used his');
      assert.notEqual(rows[0]![7], 'never', 'alice used hers (github_whoami)');
    });

    it('connections list --json: an array of exactly issuer, subject, provider, login, scopes, status, createdAt, lastUsedAt', async () => {
      const run = await admin(['connections', 'list', '--json']);
      assert.equal(run.code, 0, run.stderr);
      const list = JSON.parse(run.stdout) as Array<Record<string, unknown>>;
      assert.ok(Array.isArray(list));
      for (const item of list) assert.deepEqual(Object.keys(item).sort(), LIST_FIELDS);
      const aliceRow = (await store.connections.find(alice, 'github'))!;
      assert.deepEqual(list[0], {
        issuer: alice.issuer,
        subject: 'alice',
        provider: 'github',
        login: 'octocat',
        scopes: aliceRow.scopes.split(' '),
        status: 'active',
        createdAt: new Date(aliceRow.created_at).toISOString(),
        lastUsedAt: new Date(aliceRow.last_used_at!).toISOString(),
      });
      assert.match(String(list[0]!.lastUsedAt), ISO);
      assert.deepEqual(list[2]!.scopes, ['repo', 'read:org']);
      assert.equal(list[1]!.lastUsedAt, null);
      assert.deepEqual(
        list.map((c) => `${c.subject}:${c.status}`),
        ['alice:active', 'bob:active', 'carol:active', 'dave:reauth_required', 'alice:active'],
      );
    });

    it('connections list filters by --user <iss> <sub> (both parts), --provider and --status', async () => {
      const subjects = async (...args: string[]) => {
        const run = await admin(['connections', 'list', '--json', ...args]);
        assert.equal(run.code, 0, run.stderr);
        return (JSON.parse(run.stdout) as Array<{ issuer: string; subject: string }>).map(
          (c) => `${c.issuer === OTHER_ISSUER ? 'other:' : ''}${c.subject}`,
        );
      };
      assert.deepEqual(await subjects('--user', alice.issuer, 'alice'), ['alice']);
      assert.deepEqual(await subjects('--user', OTHER_ISSUER, 'alice'), ['other:alice']);
      assert.deepEqual(await subjects('--status', 'reauth_required'), ['dave']);
      assert.deepEqual(await subjects('--provider', 'github', '--status', 'active', '--user', alice.issuer, 'carol'), ['carol']);
      assert.deepEqual(await subjects('--provider', 'linear'), []);
      const empty = await admin(['connections', 'list', '--user', alice.issuer, 'nobody']);
      assert.equal(empty.code, 0);
      assert.equal(empty.stdout, 'No connections match.\n');
    });

    it('connections revoke: revokes at the stand-in like a disconnect, deletes the tokens, audits the admin by name; exit 1 when there is none', async () => {
      const bob = { issuer: alice.issuer, subject: 'bob' };
      assert.equal(stack.github.activeTokenCount('bob-gh'), 1);
      const run = await admin(['connections', 'revoke', alice.issuer, 'bob', 'github'], { ADMIN_ACTOR: 'ops@example.com' });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, `Revoked GitHub account @bob-gh of ${alice.issuer} bob at the provider, and deleted it.\n`);
      assert.deepEqual(
        stack.github.revokedGrants.filter((g) => g.login === 'bob-gh'),
        [{ clientId: stack.github.clientId, login: 'bob-gh' }],
      );
      assert.equal(stack.github.activeTokenCount('bob-gh'), 0, 'the token no longer works at GitHub');
      assert.equal(await store.connections.find(bob, 'github'), undefined, 'the stored tokens are gone');
      const audit = await store.audit.list({ issuer: bob.issuer, subject: 'bob' });
      assert.deepEqual(
        audit.filter((r) => r.event.startsWith('connection_revoked')).map((r) => [r.event, r.provider, r.detail]),
        [['connection_revoked_by_admin', 'github', 'by ops@example.com: revoked upstream']],
      );

      const again = await admin(['connections', 'revoke', alice.issuer, 'bob', 'github']);
      assert.equal(again.code, 1);
      assert.equal(again.stdout, '');
      assert.equal(again.stderr, `No github connection for ${alice.issuer} bob: nothing was revoked.\n`);
      const otherIssuer = await admin(['connections', 'revoke', OTHER_ISSUER, 'carol', 'github']);
      assert.equal(otherIssuer.code, 1, 'carol exists only at the first issuer');
      assert.ok(await store.connections.find({ issuer: alice.issuer, subject: 'carol' }, 'github'), 'and hers is untouched');

      // Without ADMIN_ACTOR the OS user is named; --json says what happened.
      const json = await admin(['connections', 'revoke', alice.issuer, 'carol', 'github', '--json']);
      assert.equal(json.code, 0, json.stderr);
      assert.deepEqual(JSON.parse(json.stdout), {
        issuer: alice.issuer,
        subject: 'carol',
        provider: 'github',
        login: 'carol-gh',
        deleted: true,
        revokedUpstream: true,
      });
      const carolAudit = await store.audit.list({ issuer: alice.issuer, subject: 'carol', event: 'connection_revoked_by_admin' });
      assert.deepEqual(
        carolAudit.map((r) => r.detail),
        [`by os:${userInfo().username}: revoked upstream`],
      );
      // Put them back for the suites after this one.
      await seed('bob', 'bob-gh');
      await seed('carol', 'carol-gh', ['repo', 'read:org']);
    });

    it('connections revoke tells the event seam connection.revoked, inside the deleting transaction', async () => {
      const dave = { issuer: alice.issuer, subject: 'dave' };
      const bob = { issuer: alice.issuer, subject: 'bob' };
      // A sink that writes through the transaction and then fails: the delete is rolled back with its write.
      const failing: EventSink = {
        async emit(_type, _data, tx) {
          await tx.audit.record('keys_rotated', dave, 'github', 'written by the failing sink');
          throw new Error('the outbox is full');
        },
      };
      const err = sink();
      const code = await runAdmin(['connections', 'revoke', dave.issuer, 'dave', 'github'], {
        stdout: sink(),
        stderr: err,
        env,
        events: failing,
      });
      assert.equal(code, 1);
      assert.equal(err.text(), 'admin: the outbox is full\n');
      assert.ok(await store.connections.find(dave, 'github'), 'the connection stays when the event cannot be written');
      assert.deepEqual(await store.audit.list({ issuer: dave.issuer, subject: 'dave', event: 'keys_rotated' }), []);

      const seen: Array<{ type: string; data: BrokerEvents['connection.revoked']; goneInside: boolean; stillThereOutside: boolean }> = [];
      const recording: EventSink = {
        async emit(type, data, tx) {
          // Inside the transaction the row is already gone; another store, outside it, still sees it until commit.
          const goneInside = (await tx.connections.find(bob, 'github')) === undefined;
          const stillThereOutside = (await store.connections.find(bob, 'github')) !== undefined;
          seen.push({ type, data: data as BrokerEvents['connection.revoked'], goneInside, stillThereOutside });
        },
      };
      const out = sink();
      assert.equal(
        await runAdmin(['connections', 'revoke', bob.issuer, 'bob', 'github'], {
          stdout: out,
          stderr: sink(),
          env: { ...env, ADMIN_ACTOR: 'oncall' },
          events: recording,
        }),
        0,
      );
      assert.deepEqual(seen, [
        {
          type: 'connection.revoked',
          data: {
            issuer: bob.issuer,
            subject: 'bob',
            provider: 'github',
            login: 'bob-gh',
            scopes: ['repo'],
            revokedUpstream: true,
            by: { kind: 'admin', actor: 'oncall' },
          },
          goneInside: true,
          stillThereOutside: true,
        },
      ]);
      await seed('bob', 'bob-gh');
    });

    it('audit export: JSON lines oldest first, paged through more rows than one page while the service writes', async () => {
      const bulk = { issuer: alice.issuer, subject: 'bulk' };
      await store.transaction(async (tx) => {
        for (let i = 0; i < 1_200; i++) await tx.audit.record('token_exchanged', bulk, 'github', `row ${i}`);
      });
      // The service writes while the export runs: a row each time the command writes a page out.
      const during: Array<Promise<void>> = [];
      const stdout = sink(() => during.push(store.audit.record('token_exchanged', bulk, 'github', 'written during the export')));
      const stderr = sink();
      const code = await runAdmin(['audit', 'export'], { stdout, stderr, env });
      await Promise.all(during);
      const run = { code, stdout: stdout.text(), stderr: stderr.text() };
      outputs.push(run.stdout, run.stderr);
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stderr, '');
      assert.ok(during.length >= 3, `the service wrote while the export ran (${during.length} rows)`);
      const lines = run.stdout.trimEnd().split('\n');
      const rows = lines.map(
        (l) =>
          JSON.parse(l) as {
            id: number;
            at: string;
            event: string;
            issuer: string | null;
            subject: string | null;
            provider: string | null;
            detail: string | null;
          },
      );
      for (const row of rows) assert.deepEqual(Object.keys(row), ['id', 'at', 'event', 'issuer', 'subject', 'provider', 'detail']);
      for (let i = 1; i < rows.length; i++) {
        const [p, c] = [rows[i - 1]!, rows[i]!];
        assert.ok(p.at < c.at || (p.at === c.at && p.id < c.id), `oldest first at line ${i + 1}`);
      }
      assert.equal(new Set(rows.map((r) => r.id)).size, rows.length, 'no row twice across pages');
      assert.deepEqual(
        rows.filter((r) => r.subject === 'bulk' && r.detail !== 'written during the export').map((r) => r.detail),
        Array.from({ length: 1_200 }, (_, i) => `row ${i}`),
        'every one of 1,200 rows (three pages of 500)',
      );
      const first = rows.find((r) => r.subject === 'alice' && r.issuer === alice.issuer)!;
      assert.equal(first.event, 'connection_created', "alice's real connect is on record");
      assert.match(first.at, ISO);
      // Everything recorded before the command started is there.
      const stored = await store.audit.list();
      const exported = new Set(rows.map((r) => r.id));
      assert.deepEqual(
        stored.filter((r) => r.id <= rows[rows.length - 1]!.id && !exported.has(r.id)).map((r) => r.id),
        [],
      );
    });

    it('audit export --since (a duration or an ISO instant) and --user', async () => {
      const erin = { issuer: alice.issuer, subject: 'erin' };
      const now = Date.now();
      await backend.insertAudit(store, now - 3 * DAY, 'connection_created', erin, 'github', 'three days ago');
      await backend.insertAudit(store, now - 2 * HOUR, 'refresh_failed', erin, 'github', 'two hours ago');
      await store.audit.record('connection_refreshed', erin, 'github', 'just now');
      await store.audit.record('connection_created', { issuer: OTHER_ISSUER, subject: 'erin' }, 'github', 'another erin');
      const details = async (...args: string[]) => {
        const run = await admin(['audit', 'export', '--user', erin.issuer, 'erin', ...args]);
        assert.equal(run.code, 0, run.stderr);
        return run.stdout
          .trimEnd()
          .split('\n')
          .filter(Boolean)
          .map((l) => (JSON.parse(l) as { detail: string }).detail);
      };
      assert.deepEqual(await details(), ['three days ago', 'two hours ago', 'just now'], 'only this erin, oldest first');
      assert.deepEqual(await details('--since', '24h'), ['two hours ago', 'just now']);
      assert.deepEqual(await details('--since', '1h'), ['just now']);
      assert.deepEqual(await details('--since', new Date(now - 4 * DAY).toISOString()), ['three days ago', 'two hours ago', 'just now']);
      assert.deepEqual(
        await details('--since', new Date(now - 2 * DAY).toISOString().slice(0, 10)),
        ['two hours ago', 'just now'],
        'a date is its UTC midnight',
      );
      const all = await admin(['audit', 'export', '--since', '2d']);
      assert.ok(
        !all.stdout.includes('three days ago') && all.stdout.includes('another erin'),
        '--since without --user: everyone since then',
      );
    });

    it('audit prune deletes the rows older than AUDIT_RETENTION_DAYS (or --older-than-days), keeps the newer ones, and says how many', async () => {
      const ivan = { issuer: alice.issuer, subject: 'ivan' };
      const now = Date.now();
      await backend.insertAudit(store, now - 100 * DAY, 'connection_created', ivan, 'github', '100 days ago');
      await backend.insertAudit(store, now - 95 * DAY, 'refresh_failed', ivan, 'github', '95 days ago');
      await backend.insertAudit(store, now - 40 * DAY, 'connection_refreshed', ivan, 'github', '40 days ago');
      await backend.insertAudit(store, now - 10 * DAY, 'connection_refreshed', ivan, 'github', '10 days ago');
      await store.audit.record('connection_refreshed', ivan, 'github', 'just now');
      const details = async () => (await store.audit.list({ issuer: ivan.issuer, subject: 'ivan' })).map((r) => r.detail);

      const run = await admin(['audit', 'prune']);
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, 'Deleted 2 audit row(s) recorded more than 90 day(s) ago.\n', 'the default retention, 90 days');
      assert.deepEqual(await details(), ['40 days ago', '10 days ago', 'just now']);

      const json = await admin(['audit', 'prune', '--older-than-days', '30', '--json'], { AUDIT_RETENTION_DAYS: '0' });
      assert.equal(json.code, 0, json.stderr);
      assert.deepEqual(JSON.parse(json.stdout), { deleted: 1 });
      assert.deepEqual(await details(), ['10 days ago', 'just now']);

      const forever = await admin(['audit', 'prune'], { AUDIT_RETENTION_DAYS: '0' });
      assert.equal(forever.code, 2);
      assert.equal(forever.stdout, '');
      assert.match(forever.stderr, /^admin: AUDIT_RETENTION_DAYS is 0 \(keep the audit trail forever\): give --older-than-days <n>/);
      assert.deepEqual(await details(), ['10 days ago', 'just now'], 'nothing deleted');

      const configured = await admin(['audit', 'prune', '--json'], { AUDIT_RETENTION_DAYS: '7' });
      assert.equal(configured.code, 0, configured.stderr);
      assert.deepEqual(JSON.parse(configured.stdout), { deleted: 1 });
      assert.deepEqual(await details(), ['just now'], 'the configured retention');
    });

    it('pending prune removes settled and expired pending connections now, and says how many', async () => {
      const frank = { issuer: alice.issuer, subject: 'frank' };
      const expired = [1, 2, 3].map(() => pendingRow(frank, { expires_at: Date.now() - 20 * 60_000 }));
      for (const row of expired) await store.pending.create(row);
      const open = pendingRow(frank, { provider: 'linear' });
      await store.pending.create(open);
      const run = await admin(['pending', 'prune']);
      assert.equal(run.code, 0, run.stderr);
      const n = Number(/^Pruned (\d+) row\(s\)/.exec(run.stdout)?.[1]);
      assert.ok(n >= 3, run.stdout);
      for (const row of expired) assert.equal(await store.pending.byId(row.id), undefined);
      assert.equal((await store.pending.byId(open.id))?.status, 'open', 'an open, unexpired link stays');
      await store.pending.create(pendingRow(frank, { expires_at: Date.now() - 20 * 60_000 }));
      const json = await admin(['pending', 'prune', '--json']);
      assert.equal(json.code, 0, json.stderr);
      assert.ok((JSON.parse(json.stdout) as { pruned: number }).pruned >= 1);
    });

    it('stats: connections by provider and status, open pending connections, refresh failures of the last day', async () => {
      const gina = { issuer: alice.issuer, subject: 'gina' };
      await store.audit.record('refresh_failed', gina, 'github', 'unavailable');
      await store.audit.record('refresh_failed', gina, 'github', 'invalid_grant');
      await backend.insertAudit(store, Date.now() - 2 * DAY, 'refresh_failed', gina, 'github', 'too old to count');
      const expected = await store.admin.stats(Date.now() - DAY);
      const failures = expected.refreshFailures.find((r) => r.provider === 'github')!.n;
      assert.ok(failures >= 2);
      const open = expected.pending.open;
      assert.ok(open >= 1);

      const json = await admin(['stats', '--json']);
      assert.equal(json.code, 0, json.stderr);
      assert.deepEqual(JSON.parse(json.stdout), {
        connections: [
          { provider: 'github', status: 'active', count: 4 },
          { provider: 'github', status: 'reauth_required', count: 1 },
        ],
        pendingConnections: { open, authorizing: expected.pending.authorizing },
        refreshFailuresLastDay: { total: failures, byProvider: [{ provider: 'github', count: failures }] },
      });
      const text = await admin(['stats']);
      assert.equal(text.code, 0, text.stderr);
      assert.match(text.stdout, /^Connections\n {2}PROVIDER\s+STATUS\s+COUNT\n {2}github\s+active\s+4\n {2}github\s+reauth_required\s+1\n/);
      assert.match(text.stdout, new RegExp(`\\nPending connections: ${open} open, ${expected.pending.authorizing} authorizing\\n`));
      assert.match(text.stdout, new RegExp(`\\nRefresh failures in the last 24 hours: ${failures} \\(github ${failures}\\)\\n$`));
    });

    it('stats: webhook deliveries per endpoint, failed ones included, once an endpoint holds events', async () => {
      const rows = ['msg_stats_1', 'msg_stats_2', 'msg_stats_3'].map((id) => ({
        id,
        endpoint: 'audit-sink',
        event_type: 'connection.created',
        payload: `{"n":"${id}"}`,
      }));
      await store.webhooks.enqueue(rows);
      const claimed = await store.webhooks.claim('admin-test', ['audit-sink'], 2, 30_000);
      assert.equal(claimed.length, 2);
      await store.webhooks.delivered(claimed[0]!.id, 'admin-test');
      await store.webhooks.undelivered(claimed[1]!.id, 'admin-test', null, 'HTTP 500 for a day');
      const json = await admin(['stats', '--json']);
      assert.equal(json.code, 0, json.stderr);
      const webhooks = (JSON.parse(json.stdout) as { webhooks?: { endpoints: unknown[]; oldestPendingAt: string | null } }).webhooks;
      assert.deepEqual(webhooks?.endpoints, [{ endpoint: 'audit-sink', pending: 1, delivered: 1, failed: 1 }]);
      assert.match(String(webhooks?.oldestPendingAt), /^\d{4}-\d{2}-\d{2}T/);
      const text = await admin(['stats']);
      assert.match(text.stdout, /\nWebhook audit-sink: 1 waiting, 1 delivered, 1 failed \(retries given up\)\n$/);
    });

    it('connections revoke deletes locally what the keys cannot open, and changes nothing for a provider not configured here', async () => {
      const hank = { issuer: alice.issuer, subject: 'hank' };
      await seed('hank', 'hank-gh');
      // The operator lost the key that sealed it: nothing can be sent to GitHub, the row still goes.
      const run = await admin(['connections', 'revoke', hank.issuer, 'hank', 'github'], {
        TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
        ADMIN_ACTOR: 'ops',
      });
      assert.equal(run.code, 0, run.stderr);
      assert.match(
        run.stdout,
        /^Deleted GitHub account @hank-gh of .* hank, but the provider did not confirm the revocation \(its tokens could not be opened/,
      );
      assert.equal(await store.connections.find(hank, 'github'), undefined);
      assert.deepEqual(
        (await store.audit.list({ ...hank, event: 'connection_revoked_by_admin' })).map((r) => r.detail),
        ['by ops: local delete only: tokens unreadable'],
      );
      assert.equal(stack.github.activeTokenCount('hank-gh'), 1, 'the grant is still live at GitHub, as the output says');

      await store.connections.save({
        ...hank,
        provider: 'linear',
        account_id: 'l-1',
        account_login: 'hank',
        scopes: 'read',
        key_id: 'k',
        sealed_tokens: 'x',
      });
      const unconfigured = await admin(['connections', 'revoke', hank.issuer, 'hank', 'linear']);
      assert.equal(unconfigured.code, 1);
      assert.equal(
        unconfigured.stderr,
        'The provider "linear" is not configured in this environment, so its grant cannot be revoked upstream: nothing was changed.\n',
      );
      assert.ok(await store.connections.find(hank, 'linear'), 'the row stays');
      await store.connections.delete(hank, 'linear');
    });

    it('prints no token and no sealed token in any output', () => {
      assert.ok(outputs.length >= 20);
      assert.ok(secrets.length >= 10);
      const all = outputs.join('\n');
      for (const secret of secrets) assert.equal(all.includes(secret), false, 'a token or sealed token in the output');
      assert.doesNotMatch(all, /\bgh[opsur]_[A-Za-z0-9]/, 'nothing shaped like a GitHub token');
    });
  });
}

/** `auth: mcp` upstreams (issue 14): the admin command builds the broker's provider set, so it revokes what the broker connected. */
function upstreamAdminSuite(name: string, skip: string | false, start: () => Promise<Backend>): void {
  describe(`npm run admin on ${name}: a connection to an auth: mcp upstream`, { skip }, () => {
    let backend: Backend;
    let upstream: ProtectedUpstream;
    let file: { path: string; remove(): void };
    let stack: Stack;
    let store: Store;

    before(async () => {
      backend = await start();
      // The upstream MCP server behind its own authorization server, declared as the broker declares it.
      upstream = await startProtectedUpstream();
      file = providersFile({ upstreams: [{ id: 'tracker', url: upstream.url, auth: 'mcp', displayName: 'Tracker' }] });
      stack = await startStack({ env: { ...backend.env, PROVIDERS_FILE: file.path } });
      store = await openStore(loadConfig(stack.env).database);
    });

    after(async () => {
      await store?.close();
      await stack?.close();
      await upstream?.close();
      file?.remove();
      await backend?.close();
    });

    it('lists it with --provider <upstream id>, revokes its grant at the upstream AS (RFC 7009), deletes it and audits the admin', async () => {
      const env = stack.env;
      const erin = { issuer: env.OIDC_ISSUER!, subject: 'erin' };
      const done = await connectUpstream(new Browser(), stack, upstream.issuer, 'erin', 'erin-at-tracker');
      assert.match(done.html, /Connected as @erin-at-tracker/, done.html);

      const list = await adminHere(env, ['connections', 'list', '--provider', 'tracker', '--json']);
      assert.equal(list.code, 0, list.stderr);
      assert.deepEqual(
        (JSON.parse(list.stdout) as Array<Record<string, unknown>>).map((r) => [r.subject, r.provider, r.login, r.status]),
        [['erin', 'tracker', 'erin-at-tracker', 'active']],
      );

      const sealer = new Sealer(loadConfig(env).tokenKeys);
      const tokens = (await new ConnectionService(store, sealer, createLogger('error')).open(
        principalFromVerifiedClaims(erin.issuer, 'erin'),
        'tracker',
      ))!.tokens;
      assert.ok(tokens.refreshToken, 'the upstream AS granted a refresh token');

      const run = await adminHere({ ...env, ADMIN_ACTOR: 'ops' }, ['connections', 'revoke', erin.issuer, 'erin', 'tracker']);
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stdout, `Revoked Tracker account @erin-at-tracker of ${erin.issuer} erin at the provider, and deleted it.\n`);
      const revocations = upstream.asRequests.filter((r) => r.method === 'POST' && r.path === '/token/revocation');
      assert.equal(revocations.length, 1, 'one RFC 7009 request, at the endpoint the AS advertises');
      assert.equal(revocations[0]!.body.get('token'), tokens.refreshToken);
      assert.equal(await store.connections.find(erin, 'tracker'), undefined, 'the stored tokens are gone');
      assert.deepEqual(
        (await store.audit.list({ ...erin, event: 'connection_revoked_by_admin' })).map((r) => [r.provider, r.detail]),
        [['tracker', 'by ops: revoked upstream']],
      );
      // The grant is dead at the AS: its refresh token no longer refreshes, through the broker's own client.
      const provider = buildProviders(loadConfig(env), { store, sealer, log: createLogger('error') }).providers.get('tracker')!;
      await assert.rejects(provider.refresh(tokens), ProviderError);
      for (const output of [list.stdout, list.stderr, run.stdout, run.stderr]) {
        assert.equal(output.includes(tokens.refreshToken), false);
        assert.equal(output.includes(tokens.accessToken), false);
      }

      const again = await adminHere(env, ['connections', 'revoke', erin.issuer, 'erin', 'tracker']);
      assert.equal(again.code, 1);
      assert.equal(again.stderr, `No tracker connection for ${erin.issuer} erin: nothing was revoked.\n`);
    });
  });
}

adminSuite('SQLite', false, sqliteBackend);
adminSuite('PostgreSQL', postgresSkipReason(), postgresBackend);
upstreamAdminSuite('SQLite', false, sqliteBackend);
upstreamAdminSuite('PostgreSQL', postgresSkipReason(), postgresBackend);

async function sqliteBackend(): Promise<Backend> {
  return {
    env: {},
    async insertAudit(store, at, event, owner, provider, detail) {
      sqliteHandle(store)
        .prepare('INSERT INTO audit_events (at, event, issuer, subject, provider, detail) VALUES (?, ?, ?, ?, ?, ?)')
        .run(at, event, owner.issuer, owner.subject, provider, detail);
    },
    async close() {},
  };
}

async function postgresBackend(): Promise<Backend> {
  const server: PgServer = await startPostgres();
  const url = await server.createDatabase();
  return {
    env: { DATABASE_URL: url },
    async insertAudit(_store, at, event, owner, provider, detail) {
      const client = new pg.Client({ connectionString: url });
      client.on('error', () => {});
      await client.connect();
      try {
        await client.query('INSERT INTO audit_events (at, event, issuer, subject, provider, detail) VALUES ($1, $2, $3, $4, $5, $6)', [
          at,
          event,
          owner.issuer,
          owner.subject,
          provider,
          detail,
        ]);
      } finally {
        await client.end();
      }
    },
    close: () => server.destroy(),
  };
}

describe('npm run admin: usage', () => {
  const env = { PATH: process.env.PATH ?? '' };

  it('answers --help and each command --help with exit 0, without any configuration', async () => {
    const top = await adminHere(env, ['--help']);
    assert.equal(top.code, 0, top.stderr);
    for (const command of ['connections list', 'connections revoke', 'audit export', 'audit prune', 'pending prune', 'stats'])
      assert.ok(top.stdout.includes(command), command);
    const one = await adminHere(env, ['audit', 'export', '--help']);
    assert.equal(one.code, 0);
    assert.match(one.stdout, /^Usage: npm run admin -- audit export \[--since <when>\] \[--user <iss> <sub>\]\n/);
    const out = sink();
    assert.equal(await runAdmin(['connections', 'revoke', '-h'], { stdout: out, stderr: sink(), env }), 0);
    assert.match(out.text(), /connections revoke <iss> <sub> <provider>/);
  });

  it('exits 2 with one stderr line naming what was wrong: unknown command or option, missing or extra argument, bad value', async () => {
    const cases: Array<[string[], string]> = [
      [[], 'no command given'],
      [['connexions', 'list'], 'unknown command "connexions"'],
      [['connections', 'delete'], 'unknown command "connections delete"'],
      [['connections'], '"connections" needs "list" or "revoke"'],
      [['connections', 'list', '--bogus'], 'unknown option --bogus for "connections list"'],
      [['connections', 'list', '--json=yes'], '--json takes no value'],
      [['connections', 'list', '--provider'], '--provider needs a value'],
      [['connections', 'list', '--provider', '--json'], '--provider needs a value'],
      [['connections', 'list', '--provider', 'a', '--provider', 'b'], '--provider is given twice'],
      [['connections', 'list', '--user', 'https://idp.example.com'], '--user needs two values: <iss> <sub>'],
      [['connections', 'list', '--status', 'gone'], '--status must be active or reauth_required (got "gone")'],
      [['connections', 'list', 'extra'], 'unexpected argument "extra" for "connections list"'],
      [['connections', 'revoke', 'https://idp.example.com', 'alice'], '"connections revoke" needs <provider>'],
      [
        ['connections', 'revoke', 'https://idp.example.com', 'alice', 'github', 'more'],
        'unexpected argument "more" for "connections revoke"',
      ],
      [['connections', 'revoke', '', 'alice', 'github'], '<iss> must not be empty'],
      [['audit', 'export', '--since', 'yesterday'], '--since must be an ISO 8601 date or instant'],
      [['audit', 'export', '--since', '2026-12-01T10:00:00'], '--since must be an ISO 8601 date or instant'],
      [['audit'], '"audit" needs "export" or "prune"'],
      [['audit', 'prune', '--older-than-days', '0'], '--older-than-days must be a whole number of days from 1 to 3650 (got "0")'],
      [['audit', 'prune', '--older-than-days', '3651'], '--older-than-days must be a whole number of days from 1 to 3650 (got "3651")'],
      [['audit', 'prune', '--older-than-days', '1.5'], '--older-than-days must be a whole number of days from 1 to 3650 (got "1.5")'],
      [['audit', 'prune', '--older-than-days', '30d'], '--older-than-days must be a whole number of days from 1 to 3650 (got "30d")'],
      [['audit', 'prune', '--older-than-days'], '--older-than-days needs a value'],
      [['stats', '--verbose'], 'unknown option --verbose for "stats"'],
    ];
    for (const [args, message] of cases) {
      const out = sink();
      const err = sink();
      assert.equal(await runAdmin(args, { stdout: out, stderr: err, env }), 2, args.join(' '));
      assert.equal(out.text(), '');
      assert.match(err.text(), /^admin: [^\n]+ \(see "npm run admin -- --help"\)\n$/);
      assert.ok(err.text().startsWith(`admin: ${message}`), `${args.join(' ')}: ${err.text()}`);
    }
  });

  it('exits 1, creating nothing, when DATABASE_PATH names no database (a mistyped path is not "no connections")', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'broker-admin-'));
    try {
      const path = join(dir, 'nope', 'broker.db');
      const run = await adminHere({ ...env, ...(productionEnv({ DATABASE_PATH: path }) as Record<string, string>) }, [
        'connections',
        'list',
      ]);
      assert.equal(run.code, 1);
      assert.equal(run.stdout, '');
      assert.equal(
        run.stderr,
        `admin: there is no database at DATABASE_PATH (${path}): run this with the service's environment, from its working directory\n`,
      );
      assert.equal(existsSync(join(dir, 'nope')), false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
