// Where the per-request overhead goes, timed in this process on broker A's data: token
// verification, the store, decryption, the last-used write, building the per-request MCP server.
import { McpServer, type McpRequestContext } from '@modelcontextprotocol/server';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { AccessTokenVerifier } from '../../src/auth/bearer.js';
import { OidcClient } from '../../src/auth/oidc-client.js';
import { principalFromVerifiedClaims } from '../../src/auth/principal.js';
import { ConnectionService } from '../../src/connections/index.js';
import { Sealer } from '../../src/crypto/index.js';
import { withHttpFacts, type ToolDeps } from '../../src/mcp/index.js';
import { createToolStateCodec } from '../../src/mcp/request-state.js';
import { buildMcpServer } from '../../src/mcp/server.js';
import { openSqliteStore } from '../../src/store/index.js';
import { BROKER_CLIENT } from '../../test/support/stack.js';
import { definePhase } from '../lib/phase.js';
import { say, silent } from '../lib/settings.js';
import { ms, round, us } from '../lib/stats.js';
import type { PerRequestOverhead } from './throughput.js';

/** Mean µs of `fn(warm … warm + n - 1)` after `fn(0 … warm - 1)` as a warm-up. */
async function time(n: number, fn: (i: number) => unknown, warm = Math.min(n, 500)): Promise<number> {
  for (let i = 0; i < warm; i++) await fn(i);
  const t0 = performance.now();
  for (let i = warm; i < warm + n; i++) await fn(i);
  return ((performance.now() - t0) * 1000) / n;
}

export const overhead = definePhase({
  name: 'overhead',
  keys: ['overheadPartsMicroseconds'],
  async run({ stack, report }) {
    const { idp, publicUrl, brokerDb, encryptionKey, users, tokens } = stack;
    const verifier = new AccessTokenVerifier(
      new OidcClient({ issuer: new URL(idp.issuer), clientId: BROKER_CLIENT.id, clientSecret: BROKER_CLIENT.secret }),
      `${publicUrl}/mcp`,
    );
    await verifier.verifyAccessToken(tokens[0]!); // discovery + JWKS fetch, then cached
    const store = openSqliteStore(brokerDb);
    const sealer = new Sealer([encryptionKey]);
    const service = new ConnectionService(store, sealer, silent);
    const principals = users.map((u) => principalFromVerifiedClaims(idp.issuer, u.sub));
    const rowsFor = await Promise.all(principals.map(async (p) => (await store.connections.find(p, 'github'))!));
    // A token seen for the first time pays for the signature check; a repeat finds it verified.
    const unseen = await Promise.all(
      Array.from({ length: 600 }, (_, i) => idp.mintAccessToken({ sub: `bench-unseen-${i}`, expiresInSeconds: 3600 })),
    );
    const parts: Record<string, number> = {
      jwtVerifyFirstSight: await time(500, (i) => verifier.verifyAccessToken(unseen[i]!), 100),
      jwtVerifyRepeat: await time(20000, (i) => verifier.verifyAccessToken(tokens[i % tokens.length]!)),
      storeFind: await time(20000, (i) => store.connections.find(principals[i % principals.length]!, 'github')),
      storeList: await time(20000, (i) => store.connections.list(principals[i % principals.length]!)),
      decrypt: await time(20000, (i) => {
        const r = rowsFor[i % rowsFor.length]!;
        return sealer.open({ keyId: r.key_id, value: r.sealed_tokens }, { issuer: r.issuer, subject: r.subject, provider: r.provider });
      }),
      connectionOpen: await time(20000, (i) => service.open(principals[i % principals.length]!, 'github')),
      touch: await time(2000, (i) => store.connections.touch(principals[i % principals.length]!, 'github')),
      // What the SDK's per-request server costs: ours (every tool registered) against the baseline's.
      baselineServerBuild: await time(5000, () => {
        const server = new McpServer({ name: 'b', version: '1' }, { capabilities: { tools: {} } });
        server.registerTool('ping', { description: 'Answers pong.', inputSchema: z.object({}) }, () => ({
          content: [{ type: 'text', text: 'pong' }],
        }));
      }),
    };
    try {
      const deps = {
        codec: createToolStateCodec(randomBytes(32), 600),
        log: silent,
        publicUrl: new URL(publicUrl),
        store,
        connections: service,
        github: { provider: {}, api: {} },
        providers: new Map(),
      };
      // As the HTTP layer hands it over: the verified principal plus the scope of the call.
      const authInfo = await verifier.verifyAccessToken(tokens[0]!);
      const forCall = {
        era: 'modern',
        authInfo: withHttpFacts(authInfo, { method: 'tools/call', params: { name: 'list_connections', arguments: {} } }, undefined),
      } as McpRequestContext;
      const forList = { era: 'modern', authInfo: withHttpFacts(authInfo, { method: 'tools/list' }, undefined) } as McpRequestContext;
      parts.brokerServerBuildForCall = await time(5000, () => buildMcpServer(forCall, deps as unknown as ToolDeps));
      parts.brokerServerBuildAllTools = await time(5000, () => buildMcpServer(forList, deps as unknown as ToolDeps));
    } catch (err) {
      process.stderr.write(`(broker server build not measured: ${err instanceof Error ? err.message : String(err)})\n`);
    }
    await store.close();
    report.results.overheadPartsMicroseconds = Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, round(v)]));
    // From the throughput phase of the same run, when it ran.
    const perRequest = report.results.perRequestOverhead as PerRequestOverhead | undefined;
    if (perRequest) {
      report.row({
        section: 'overhead',
        measure: 'per request vs baseline',
        value: `list_connections +${ms(perRequest.wallMs.list_connections!)} at c=1, +${us(perRequest.cpuUs.list_connections!)} CPU; github_whoami +${ms(perRequest.wallMs.github_whoami!)}, +${us(perRequest.cpuUs.github_whoami!)} CPU (broker only)`,
      });
    }
    report.row({
      section: 'overhead',
      measure: 'of which (in-process, mean)',
      value:
        `JWT verify ${us(parts.jwtVerifyFirstSight!)} first sight / ${us(parts.jwtVerifyRepeat!)} repeat; store find ${us(parts.storeFind!)}, list ${us(parts.storeList!)}; ` +
        `decrypt ${us(parts.decrypt!)}; touch ${us(parts.touch!)}; MCP server per tools/call ${parts.brokerServerBuildForCall ? us(parts.brokerServerBuildForCall) : 'n/a'} (baseline ${us(parts.baselineServerBuild!)})`,
    });
    say(`overhead parts: ${JSON.stringify(report.results.overheadPartsMicroseconds)}`);
  },
});
