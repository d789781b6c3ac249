// The connection core's one policy for a refused token (src/connections/use.ts), which the built-in
// tools and the gateway both run: against a real SQLite store and connection service, with a
// provider whose refresh and token check the test scripts.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { principalFromVerifiedClaims } from '../src/auth/principal.js';
import { ConnectionService, useConnection, type OpenConnection, type TokenAudience } from '../src/connections/index.js';
import { Sealer } from '../src/crypto/index.js';
import { createLogger } from '../src/log.js';
import { ProviderError, type Provider, type ProviderTokens, type TokenVerdict } from '../src/providers/provider.js';
import { openSqliteStore, type Store } from '../src/store/index.js';
import { scriptedProvider } from './support/scripted-provider.js';

const tokens = (n: number, refresh = true): ProviderTokens => ({
  accessToken: `ghu_${n}`,
  tokenType: 'bearer',
  ...(refresh ? { refreshToken: `ghr_${n}` } : {}),
  expiresAt: Date.now() + 3_600_000,
  scopes: [],
});

describe('useConnection: the one policy for a refused token', () => {
  let dir: string;
  let store: Store;
  let service: ConnectionService;
  let next = 0;
  const log = createLogger('error');

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'broker-use-'));
    store = openSqliteStore(join(dir, 'db.sqlite'));
    service = new ConnectionService(store, new Sealer([randomBytes(32)]), log, { pollMs: 10 });
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  interface Setup {
    /** The provider's answer to `checkAccessToken`; absent: the provider offers no check. */
    verdict?: TokenVerdict;
    freshTokenRetryMs?: number;
    withRefreshToken?: boolean;
    /** Make the stored connection older than a minute (no replication wait). */
    old?: boolean;
  }

  /** A fresh principal connected with token ghu_<n>, a provider scripted by `setup`, and what it was asked. */
  async function connected(setup: Setup = {}) {
    const n = ++next;
    const owner = principalFromVerifiedClaims('https://idp.test', `user-${n}`);
    await service.save(owner, 'github', { id: String(n), login: `login-${n}` }, tokens(n, setup.withRefreshToken ?? true), {
      refuseShared: false,
    });
    const asked = { refreshes: 0, checks: [] as string[] };
    const provider: Provider = {
      ...scriptedProvider(async () => {
        asked.refreshes++;
        return tokens(1000 + n);
      }),
      freshTokenRetryMs: setup.freshTokenRetryMs ?? 0,
      ...(setup.verdict
        ? {
            checkAccessToken: async (token: string) => {
              asked.checks.push(token);
              return setup.verdict!;
            },
          }
        : {}),
    };
    const open = (await service.usable(owner, provider)) as { kind: 'ok'; connection: OpenConnection };
    assert.equal(open.kind, 'ok');
    const connection: OpenConnection = setup.old
      ? { ...open.connection, row: { ...open.connection.row, updated_at: Date.now() - 120_000 } }
      : open.connection;
    return { owner, provider, connection, asked, n };
  }

  /** A server that refuses (401) the tokens in `refused` and answers `ok:<token>` to any other. */
  function server(refused: Set<string>) {
    const sent: string[] = [];
    return {
      sent,
      send: async (token: string) => {
        sent.push(token);
        return refused.has(token) ? ({ kind: 'unauthorized' } as const) : ({ kind: 'ok', token } as const);
      },
      refused: (answer: { kind: string }) => answer.kind === 'unauthorized',
    };
  }

  const run = (setup: Awaited<ReturnType<typeof connected>>, audience: TokenAudience, s: ReturnType<typeof server>) =>
    useConnection(
      { connections: service, log },
      { principal: setup.owner, provider: setup.provider, connection: setup.connection, audience, send: s.send, refused: s.refused },
    );

  it('hands back the answer of a server that accepts the token, and asks nothing more', async () => {
    const c = await connected({ verdict: 'refused' });
    const s = server(new Set());
    const used = await run(c, { kind: 'provider' }, s);
    assert.deepEqual(used, { kind: 'answered', answer: { kind: 'ok', token: `ghu_${c.n}` } });
    assert.deepEqual(s.sent, [`ghu_${c.n}`]);
    assert.deepEqual(c.asked, { refreshes: 0, checks: [] });
  });

  it("waits out a just-issued token's replication once when the provider's own API refuses it, and sends the same token again", async () => {
    const c = await connected({ freshTokenRetryMs: 20 });
    let refusals = 1;
    const sent: string[] = [];
    const used = await useConnection(
      { connections: service, log },
      {
        principal: c.owner,
        provider: c.provider,
        connection: c.connection,
        audience: { kind: 'provider' },
        send: async (token) => {
          sent.push(token);
          if (refusals-- > 0) throw new ProviderError('unauthorized', 'GitHub refused the token');
          return 'created';
        },
      },
    );
    assert.deepEqual(used, { kind: 'answered', answer: 'created' });
    assert.deepEqual(sent, [`ghu_${c.n}`, `ghu_${c.n}`]);
    assert.equal(c.asked.refreshes, 0, 'no refresh for a token that only had to replicate');
  });

  it('refreshes a refused token once (single flight) and retries with the new one', async () => {
    const c = await connected({ old: true });
    const s = server(new Set([`ghu_${c.n}`]));
    const used = await run(c, { kind: 'third_party', id: 'gh-mcp' }, s);
    assert.deepEqual(used, { kind: 'answered', answer: { kind: 'ok', token: `ghu_${1000 + c.n}` } });
    assert.deepEqual(s.sent, [`ghu_${c.n}`, `ghu_${1000 + c.n}`]);
    assert.equal(c.asked.refreshes, 1);
    assert.equal((await store.connections.find(c.owner, 'github'))?.status, 'active');
  });

  it("marks the connection for reconnecting when the provider's own API still refuses, without asking the provider again", async () => {
    const c = await connected({ old: true, withRefreshToken: false, verdict: 'accepted' });
    const s = server(new Set([`ghu_${c.n}`]));
    const used = await run(c, { kind: 'provider' }, s);
    assert.equal(used.kind, 'reconnect');
    assert.deepEqual(c.asked.checks, [], "the provider's API is the provider's word");
    const row = await store.connections.find(c.owner, 'github');
    assert.equal(row?.status, 'reauth_required');
    assert.ok(
      (await store.audit.list({ issuer: c.owner.issuer, subject: c.owner.subject })).some(
        (e) => e.event === 'reauth_required' && e.detail === 'api_401',
      ),
    );
  });

  it('keeps the connection when a third party refuses a token the provider still accepts, and says so', async () => {
    for (const verdict of ['accepted', 'unknown'] as const) {
      const c = await connected({ old: true, withRefreshToken: false, verdict });
      const used = await run(c, { kind: 'third_party', id: 'gh-mcp' }, server(new Set([`ghu_${c.n}`])));
      assert.equal(used.kind, 'refused', verdict);
      assert.equal(used.kind === 'refused' && used.verdict, verdict);
      assert.deepEqual(c.asked.checks, [`ghu_${c.n}`]);
      assert.equal((await store.connections.find(c.owner, 'github'))?.status, 'active', verdict);
    }
  });

  it('marks the connection when the provider refuses the token a third party refused', async () => {
    const c = await connected({ old: true, withRefreshToken: false, verdict: 'refused' });
    const used = await run(c, { kind: 'third_party', id: 'gh-mcp' }, server(new Set([`ghu_${c.n}`])));
    assert.equal(used.kind, 'reconnect');
    assert.equal((await store.connections.find(c.owner, 'github'))?.status, 'reauth_required');
    assert.ok(
      (await store.audit.list({ issuer: c.owner.issuer, subject: c.owner.subject })).some(
        (e) => e.event === 'reauth_required' && e.detail === 'upstream_401',
      ),
    );
  });

  it("takes the word of the token's own audience (an `auth: mcp` upstream) without a provider check", async () => {
    const c = await connected({ old: true, withRefreshToken: false, verdict: 'accepted' });
    const used = await run(c, { kind: 'audience', id: 'linear' }, server(new Set([`ghu_${c.n}`])));
    assert.equal(used.kind, 'reconnect');
    assert.equal(used.kind === 'reconnect' && used.verdict, 'not_checked');
    assert.deepEqual(c.asked.checks, []);
  });

  it('lets any other failure through untouched, and marks nothing', async () => {
    const c = await connected({ old: true, verdict: 'refused' });
    await assert.rejects(
      useConnection(
        { connections: service, log },
        {
          principal: c.owner,
          provider: c.provider,
          connection: c.connection,
          audience: { kind: 'provider' },
          send: async () => {
            throw new ProviderError('unavailable', 'GitHub did not answer');
          },
        },
      ),
      (err: unknown) => err instanceof ProviderError && err.code === 'unavailable',
    );
    assert.equal(c.asked.refreshes, 0);
    assert.equal((await store.connections.find(c.owner, 'github'))?.status, 'active');
  });
});
