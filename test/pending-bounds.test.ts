// Issue 10, point 1: one signed-in user cannot pile up pending connections. The same open request
// is shown the same link, a principal holds at most PENDING_CONNECTIONS_PER_USER open links (the
// oldest open one is cancelled, never a completed one), and settled or expired rows go within minutes.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  openSqliteStore,
  PENDING_PRUNE_GRACE_MS,
  OAUTH_FLOW_TTL_MS,
  sqliteHandle,
  type NewPendingConnection,
  type Owner,
  type Store,
} from '../src/store/index.js';
import { envelope, rawCall } from './support/mcp.js';
import { heldCalls, type Stack } from './support/stack.js';
import { useStack } from './support/suite.js';

const CONNECT_KEY = 'connect_account';
const ISSUE = { owner: 'octo-org', repo: 'bounded', title: 'Needs a connection' };

function call(stack: Stack, token: string, extra: Record<string, unknown> = {}, clientName = 'raw-client') {
  const meta = { ...envelope(), 'io.modelcontextprotocol/clientInfo': { name: clientName, version: '1.0.0' } };
  return rawCall(stack.mcpUrl, token, {
    method: 'tools/call',
    params: { name: 'github_create_issue', arguments: ISSUE, ...extra, _meta: meta },
  });
}

function rows(
  stack: Stack,
  subject: string,
): Array<{ id: string; status: string; outcome_reason: string | null; client_name: string | null }> {
  return sqliteHandle(stack.broker.broker.store)
    .prepare('SELECT id, status, outcome_reason, client_name FROM pending_connections WHERE subject = ? ORDER BY created_at, rowid')
    .all(subject) as Array<{
    id: string;
    status: string;
    outcome_reason: string | null;
    client_name: string | null;
  }>;
}

const openRows = (stack: Stack, subject: string) => rows(stack, subject).filter((r) => r.status === 'open').length;

/** npm test makes 1,000 calls; the quick loop (TEST_QUICK=1) 200 of the same kind. */
const CALLS = process.env.TEST_QUICK === '1' ? 200 : 1000;

describe('bounded pending connections (one user, many calls)', () => {
  const stack = useStack({ holdSeconds: 3 });

  it(`leaves one open pending connection after ${CALLS.toLocaleString('en')} tools/call from one user, every one answered with the same link`, async () => {
    const token = await stack.token('bound-alice');
    const urls = new Set<string>();
    let answered = 0;
    const started = Date.now();
    // Ten at a time: concurrent calls must not each mint a row either.
    for (let batch = 0; batch < CALLS / 10; batch++) {
      const results = await Promise.all(Array.from({ length: 10 }, () => call(stack, token)));
      for (const r of results) {
        assert.equal(r.status, 200, r.text);
        assert.equal(r.json.result.resultType, 'input_required', r.text);
        urls.add(r.json.result.inputRequests[CONNECT_KEY].params.url as string);
        answered++;
      }
    }
    const open = openRows(stack, 'bound-alice');
    console.log(
      `# ${CALLS} tools/call from one user in ${Date.now() - started} ms: ${open} open pending row(s), ${rows(stack, 'bound-alice').length} row(s) in all, ${urls.size} distinct link(s)`,
    );
    assert.equal(answered, CALLS);
    assert.equal(open, 1, 'one open row per (provider, scopes, client)');
    assert.equal(rows(stack, 'bound-alice').length, 1);
    assert.equal(urls.size, 1, 'the same opaque link every time');
  });

  it('makes one row, not 100, for a 2025-11-25 JSON-RPC batch of 100 calls', async () => {
    const batch = Array.from({ length: 100 }, (_, i) => ({
      jsonrpc: '2.0',
      id: i + 1,
      method: 'tools/call',
      params: { name: 'github_create_issue', arguments: ISSUE },
    }));
    const res = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
        authorization: `Bearer ${await stack.token('bound-legacy')}`,
      },
      body: JSON.stringify(batch),
    });
    assert.equal(res.status, 200);
    const messages = [...(await res.text()).matchAll(/^data: (.*)$/gm)].map(
      (m) => JSON.parse(m[1]!) as { error?: { code: number; data: { elicitations: Array<{ url: string }> } } },
    );
    assert.equal(messages.length, 100);
    assert.ok(
      messages.every((m) => m.error?.code === -32042),
      'each call is asked to connect (-32042)',
    );
    assert.equal(new Set(messages.map((m) => m.error!.data.elicitations[0]!.url)).size, 1, 'every call names the same link');
    assert.equal(rows(stack, 'bound-legacy').length, 1);
  });

  it('keeps at most 20 open per user: the oldest open ones are cancelled (superseded), settled and claimed ones never', async () => {
    const token = await stack.token('bound-carol');
    const store = stack.broker.broker.store;
    const owner: Owner = { issuer: stack.idp.issuer, subject: 'bound-carol' };
    const base = {
      issuer: owner.issuer,
      subject: owner.subject,
      provider: 'github',
      client_name: 'seeded',
      scopes: null,
      expires_at: Date.now() + 600_000,
    };
    await store.pending.create({ ...base, id: 'bound-completed', link_hash: 'bound-completed' });
    await store.pending.settle('bound-completed', 'completed');
    await store.pending.create({ ...base, id: 'bound-claimed', link_hash: 'bound-claimed' });
    assert.equal(await store.pending.claim('bound-claimed'), true);

    // A different client name is a different request: 25 of them.
    const links: string[] = [];
    for (let i = 1; i <= 25; i++)
      links.push((await call(stack, token, {}, `assistant-${i}`)).json.result.inputRequests[CONNECT_KEY].params.url as string);
    assert.equal(new Set(links).size, 25);

    const all = rows(stack, 'bound-carol');
    assert.equal(all.filter((r) => r.status === 'open').length, 20, 'the cap (PENDING_CONNECTIONS_PER_USER default 20)');
    const cancelled = all.filter((r) => r.status === 'cancelled');
    assert.deepEqual(
      cancelled.map((r) => r.client_name),
      ['assistant-1', 'assistant-2', 'assistant-3', 'assistant-4', 'assistant-5'],
      'the oldest open ones went',
    );
    assert.ok(cancelled.every((r) => r.outcome_reason === 'superseded'));
    assert.equal((await store.pending.byId('bound-completed'))?.status, 'completed', 'a completed one is never cancelled');
    assert.equal((await store.pending.byId('bound-claimed'))?.status, 'authorizing', 'nor one the user is authorizing');
    // The newest is still the one shown again.
    assert.equal((await call(stack, token, {}, 'assistant-25')).json.result.inputRequests[CONNECT_KEY].params.url, links[24]);
  });

  it('answers a call held on a link at once when newer links cancel it, with a normal "nothing was done"', async () => {
    const token = await stack.token('bound-dora');
    const first = await call(stack, token, {}, 'held-client');
    const started = Date.now();
    const held = call(
      stack,
      token,
      { inputResponses: { [CONNECT_KEY]: { action: 'accept' } }, requestState: first.json.result.requestState },
      'held-client',
    );
    await heldCalls(stack);
    for (let i = 0; i < 20; i++) await call(stack, token, {}, `crowd-${i}`);
    const repeat = await held;
    const elapsed = Date.now() - started;
    assert.equal(repeat.json.result.resultType, 'complete', repeat.text);
    assert.equal(repeat.json.result.isError, undefined);
    assert.deepEqual(repeat.json.result.structuredContent, { status: 'not_connected', reason: 'superseded' });
    assert.match(repeat.json.result.content[0].text, /newer connect links replaced this one/);
    assert.ok(elapsed < 2500, `answered before its 3 s hold ran out (${elapsed} ms)`);
  });
});

describe('PENDING_CONNECTIONS_PER_USER', () => {
  const stack = useStack({ env: { PENDING_CONNECTIONS_PER_USER: '2' } });

  it('sets the cap: with 2, a third request cancels the oldest open link', async () => {
    const token = await stack.token('capped-erin');
    for (const name of ['first', 'second', 'third']) await call(stack, token, {}, name);
    assert.deepEqual(
      rows(stack, 'capped-erin').map((r) => [r.client_name, r.status]),
      [
        ['first', 'cancelled'],
        ['second', 'open'],
        ['third', 'open'],
      ],
    );
  });
});

describe('pruning pending connections (SQLite store)', () => {
  let dir: string;
  let store: Store;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'broker-prune-'));
    store = openSqliteStore(join(dir, 'prune.db'));
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('removes settled and expired rows (and their flows) within minutes, keeping what a held repeat or a live flow still needs', async () => {
    const now = Date.now();
    const owner: Owner = { issuer: 'https://idp.example.com', subject: 'pruned' };
    const row = (id: string, expiresAt: number): NewPendingConnection => ({
      id,
      link_hash: `h-${id}`,
      ...owner,
      provider: 'github',
      client_name: null,
      scopes: null,
      expires_at: expiresAt,
    });
    const db = sqliteHandle(store);
    const backdate = (id: string, updatedAt: number) =>
      db.prepare('UPDATE pending_connections SET updated_at = ? WHERE id = ?').run(updatedAt, id);
    const minutes = (n: number) => n * 60_000;

    // Settled a few minutes ago: gone, flow and all.
    await store.pending.create(row('settled-old', now + minutes(5)));
    await store.pending.settle('settled-old', 'cancelled');
    backdate('settled-old', now - PENDING_PRUNE_GRACE_MS - 1);
    await store.oauthFlows.put({
      state_hash: 'flow-of-settled',
      pending_id: 'settled-old',
      session_hash: 's',
      code_verifier: 'v',
      expires_at: now + minutes(5),
    });
    // Just settled: a held repeat or a polling watcher still reads how it ended.
    await store.pending.create(row('settled-new', now + minutes(5)));
    await store.pending.settle('settled-new', 'completed');
    // Expired a few minutes ago without being opened: gone.
    await store.pending.create(row('expired-old', now - PENDING_PRUNE_GRACE_MS - 1));
    // Expired just now: kept a little while, so the page still says "expired".
    await store.pending.create(row('expired-new', now - 1_000));
    // Claimed, link expired, but its flow (10 minutes from the claim) may still come back: kept.
    await store.pending.create(row('claimed-live', now + minutes(1)));
    assert.equal(await store.pending.claim('claimed-live'), true);
    db.prepare('UPDATE pending_connections SET expires_at = ?, updated_at = ? WHERE id = ?').run(
      now - PENDING_PRUNE_GRACE_MS - 1,
      now - minutes(4),
      'claimed-live',
    );
    // Claimed long enough ago that its flow is dead too: gone.
    await store.pending.create(row('claimed-dead', now + minutes(1)));
    assert.equal(await store.pending.claim('claimed-dead'), true);
    db.prepare('UPDATE pending_connections SET expires_at = ?, updated_at = ? WHERE id = ?').run(
      now - PENDING_PRUNE_GRACE_MS - 1,
      now - OAUTH_FLOW_TTL_MS - PENDING_PRUNE_GRACE_MS - 1,
      'claimed-dead',
    );
    // Open and live.
    await store.pending.create(row('open-live', now + minutes(5)));

    assert.ok(PENDING_PRUNE_GRACE_MS <= minutes(5), 'within minutes, not a day');
    assert.equal(await store.pending.prune(now), 3);
    const left = (db.prepare('SELECT id FROM pending_connections ORDER BY id').all() as Array<{ id: string }>).map((r) => r.id);
    assert.deepEqual(left, ['claimed-live', 'expired-new', 'open-live', 'settled-new']);
    assert.equal(
      (db.prepare("SELECT COUNT(*) AS n FROM oauth_flows WHERE state_hash = 'flow-of-settled'").get() as { n: number }).n,
      0,
      'its flow went with it',
    );
  });
});
