import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import { ConnectionService } from '../src/connections/index.js';
import { Sealer } from '../src/crypto/index.js';
import { createLogger } from '../src/log.js';
import { ProviderError, type ProviderTokens } from '../src/providers/provider.js';
import { openSqliteStore, type Store } from '../src/store/index.js';
import { randomBytes } from 'node:crypto';
import { Browser, textOf } from './support/browser.js';
import { createIssues, GITHUB_APP, revokeGrantUpstream, seedExpired } from './support/expiring-tokens.js';
import { envelope, rawCall, resultText } from './support/mcp.js';
import { readConnection, seedConnection } from './support/seed.js';
import { scriptedProvider } from './support/scripted-provider.js';
import { completeConnect } from './support/stack.js';
import { clientAs, useStack } from './support/suite.js';

describe('expiring GitHub App tokens: one refresh for many concurrent calls', () => {
  const stack = useStack(GITHUB_APP);

  it('refreshes exactly once at GitHub for 50 concurrent tool calls on an expired token, and all 50 succeed', async () => {
    await seedExpired(stack.env, stack.github, 'alice', 'octocat');
    const results = await createIssues(stack.mcpUrl, await stack.token('alice'), 50, 'concurrent');
    const created = results.filter((r) => r.json?.result?.structuredContent?.status === 'created');
    assert.equal(
      created.length,
      50,
      `all 50 created: ${results.find((r) => r.json?.result?.structuredContent?.status !== 'created')?.text.slice(0, 300)}`,
    );
    assert.equal(stack.github.refreshCount, 1);
    assert.deepEqual(
      stack.github.refreshes.map((r) => r.ok),
      [true],
    );
    const row = (await readConnection(stack.env, 'alice', 'github'))!;
    assert.equal(row.status, 'active');
    const audit = await stack.broker.broker.store.audit.list({ subject: 'alice' });
    assert.equal(audit.filter((a) => a.event === 'connection_refreshed').length, 1);
    assert.doesNotMatch(JSON.stringify(audit), /gh[ur]_/, 'the audit trail holds no token');
  });

  it('does not refresh a token that is still valid', async () => {
    const before = stack.github.refreshCount;
    const results = await createIssues(stack.mcpUrl, await stack.token('alice'), 5, 'fresh');
    assert.equal(results.filter((r) => r.json?.result?.structuredContent?.status === 'created').length, 5);
    assert.equal(stack.github.refreshCount, before);
  });

  it('keeps the connection when GitHub no longer accepts the refresh token: reauth_required, then a reconnect restores it', async () => {
    await seedExpired(stack.env, stack.github, 'bob', 'hubot');
    // The refresh token dies upstream (as when the user revokes the app at GitHub).
    await revokeGrantUpstream(stack.github, 'hubot');
    const browser = new Browser();
    let consentText = '';
    const client = await clientAs(stack, 'bob', {
      onUrl: async (url) => {
        // While we are asked to reconnect, the row (and its account binding) is still there.
        const row = await readConnection(stack.env, 'bob', 'github');
        assert.equal(row?.status, 'reauth_required');
        assert.equal(row?.account_login, 'hubot');
        await completeConnect(browser, url, 'bob', { githubLogin: 'hubot', onSignedIn: (page) => (consentText = textOf(page.html)) });
        return { action: 'accept' };
      },
    });
    const result = await client.callTool({
      name: 'github_create_issue',
      arguments: { owner: 'octo-org', repo: 'refresh', title: 'after reconnect' },
    });
    await client.close();
    assert.match(consentText, /Reconnect your GitHub account/);
    assert.equal((result.structuredContent as { status: string }).status, 'created');
    assert.equal((await readConnection(stack.env, 'bob', 'github'))?.status, 'active');
    const events = (await stack.broker.broker.store.audit.list({ subject: 'bob' })).map((a) => a.event);
    assert.deepEqual(
      events.filter((e) => e !== 'connection_created'),
      ['refresh_failed', 'reauth_required'],
    );
  });

  it('marks a connection whose token GitHub rejects with 401 as reauth_required and asks to reconnect at once', async () => {
    const issued = stack.github.issueTokenFor('monalisa');
    await seedConnection(
      stack.env,
      'carol',
      'github',
      { id: String(stack.github.users.get('monalisa')!.id), login: 'monalisa' },
      {
        accessToken: issued.accessToken,
        tokenType: 'bearer',
        refreshToken: issued.refreshToken!,
        expiresAt: Date.now() + 3_600_000,
        scopes: [],
      },
    );
    stack.github.faults = { api: 401 };
    try {
      const r = await rawCall(stack.mcpUrl, await stack.token('carol'), {
        method: 'tools/call',
        params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
      });
      assert.equal(r.json.result.resultType, 'input_required');
      assert.match(r.json.result.inputRequests.connect_account.params.message, /no longer accepts the saved connection/);
    } finally {
      stack.github.faults = {};
    }
    assert.equal((await readConnection(stack.env, 'carol', 'github'))?.status, 'reauth_required');
  });

  it('reports GitHub rate limits as such and leaves the connection active', async () => {
    stack.github.faults = { api: 429 };
    try {
      const r = await rawCall(stack.mcpUrl, await stack.token('alice'), {
        method: 'tools/call',
        params: { name: 'github_whoami', arguments: {}, _meta: envelope() },
      });
      assert.equal(r.json.result.isError, true);
      assert.match(resultText(r.json.result), /rate limit/i);
    } finally {
      stack.github.faults = {};
    }
    assert.equal((await readConnection(stack.env, 'alice', 'github'))?.status, 'active');
  });
});

/** A provider whose refresh we script, to drive the race paths deterministically. */
describe('refresh races in the token service (two store handles on one file, like two processes)', () => {
  let dir: string;
  let stores: Store[];
  let services: ConnectionService[];
  const owner = principalFromVerifiedClaims('https://idp.test', 'erin');
  const expired = (n: number): ProviderTokens => ({
    accessToken: `ghu_old${n}`,
    tokenType: 'bearer',
    refreshToken: `ghr_old${n}`,
    expiresAt: Date.now() - 1000,
    scopes: [],
  });
  const fresh = (n: number): ProviderTokens => ({
    accessToken: `ghu_new${n}`,
    tokenType: 'bearer',
    refreshToken: `ghr_new${n}`,
    expiresAt: Date.now() + 3_600_000,
    scopes: [],
  });

  const sealer = new Sealer([randomBytes(32)]);
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'broker-race-'));
    stores = [openSqliteStore(join(dir, 'db.sqlite')), openSqliteStore(join(dir, 'db.sqlite'))];
    services = stores.map((s) => new ConnectionService(s, sealer, createLogger('error'), { pollMs: 10 }));
  });
  after(async () => {
    for (const s of stores) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lets exactly one of 50 concurrent callers on two handles refresh; the others get its tokens', async () => {
    await services[0]!.save(owner, 'github', { id: '1', login: 'erin' }, expired(1), { refuseShared: false });
    let calls = 0;
    const provider = scriptedProvider(async () => {
      calls++;
      await sleep(150);
      return fresh(1);
    });
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => services[i % 2]!.usable(owner, provider)));
    assert.equal(calls, 1);
    for (const r of results) {
      assert.equal(r.kind, 'ok');
      assert.equal(r.kind === 'ok' && r.connection.tokens.accessToken, 'ghu_new1');
    }
  });

  it('treats invalid_grant as a lost race when another process stored newer tokens meanwhile', async () => {
    await services[0]!.save(owner, 'github', { id: '1', login: 'erin' }, expired(2), { refuseShared: false });
    const provider = scriptedProvider(async () => {
      // Another process (without our lease, e.g. an older version) refreshed and stored first.
      await services[1]!.save(owner, 'github', { id: '1', login: 'erin' }, fresh(2), { refuseShared: false });
      throw new ProviderError('invalid_grant', 'GitHub no longer accepts the saved authorization', 'bad_refresh_token');
    });
    const r = await services[0]!.usable(owner, provider);
    assert.equal(r.kind, 'ok');
    assert.equal(r.kind === 'ok' && r.connection.tokens.accessToken, 'ghu_new2');
    assert.equal((await stores[0]!.connections.find(owner, 'github'))?.status, 'active');
  });

  it('never deletes on invalid_grant: the row stays, marked reauth_required, with its account', async () => {
    await services[0]!.save(owner, 'github', { id: '1', login: 'erin' }, expired(3), { refuseShared: false });
    const provider = scriptedProvider(async () => {
      throw new ProviderError('invalid_grant', 'dead', 'bad_refresh_token');
    });
    const r = await services[1]!.usable(owner, provider);
    assert.equal(r.kind, 'reauth_required');
    const row = await stores[0]!.connections.find(owner, 'github');
    assert.equal(row?.status, 'reauth_required');
    assert.equal(row?.account_login, 'erin');
  });

  it('leaves the connection untouched when the provider is down during a refresh, and reports it', async () => {
    await services[0]!.save(owner, 'github', { id: '1', login: 'erin' }, expired(4), { refuseShared: false });
    const before = (await stores[0]!.connections.find(owner, 'github'))!;
    const provider = scriptedProvider(async () => {
      throw new ProviderError('unavailable', 'GitHub did not answer', 'timeout');
    });
    await assert.rejects(
      services[0]!.usable(owner, provider),
      (err: unknown) => err instanceof ProviderError && err.code === 'unavailable',
    );
    const after = (await stores[0]!.connections.find(owner, 'github'))!;
    assert.equal(after.sealed_tokens, before.sealed_tokens);
    assert.equal(after.status, 'active');
  });

  it('stores the new pair even when rotate-keys re-encrypted the row during the refresh', async () => {
    await services[0]!.save(owner, 'github', { id: '1', login: 'erin' }, expired(6), { refuseShared: false });
    const provider = scriptedProvider(async () => {
      // rotate-keys runs meanwhile: same tokens, new ciphertext.
      const row = (await stores[1]!.connections.find(owner, 'github'))!;
      const plain = sealer.open(
        { keyId: row.key_id, value: row.sealed_tokens },
        { issuer: row.issuer, subject: row.subject, provider: row.provider },
      );
      const resealed = sealer.seal(plain, { issuer: row.issuer, subject: row.subject, provider: row.provider });
      assert.ok(await stores[1]!.connections.reseal(row, { key_id: resealed.keyId, sealed_tokens: resealed.value }));
      return fresh(6);
    });
    const r = await services[0]!.usable(owner, provider);
    assert.equal(r.kind === 'ok' && r.connection.tokens.accessToken, 'ghu_new6');
    assert.equal((await services[1]!.open(owner, 'github'))?.tokens.refreshToken, 'ghr_new6', 'the only live refresh token is stored');
  });

  it('persists the refreshed tokens, so another process reads the new pair right away', async () => {
    await services[0]!.save(owner, 'github', { id: '1', login: 'erin' }, expired(5), { refuseShared: false });
    let seenByOthersWhileReturning = '';
    const provider = scriptedProvider(async () => fresh(5));
    const r = await services[0]!.usable(owner, provider);
    // Read through the other handle, as another process would, right after the call returned.
    seenByOthersWhileReturning = (await services[1]!.open(owner, 'github'))?.tokens.accessToken ?? '';
    assert.equal(r.kind, 'ok');
    assert.equal(seenByOthersWhileReturning, 'ghu_new5');
  });
});
