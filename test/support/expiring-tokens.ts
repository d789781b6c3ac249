// Shared by the suites that seed expired GitHub App tokens: test/token-refresh.test.ts (one process),
// test/token-exchange.test.ts, test/system/token-refresh-processes.test.ts and test/system/scale-out.test.ts.
import type { ProviderTokens } from '../../src/providers/provider.js';
import type { GitHubStandIn } from './github-standin.js';
import { envelope, rawCall } from './mcp.js';
import { seedConnection } from './seed.js';

/** A stand-in issuing expiring GitHub App user tokens, and the broker configured for them. */
export const GITHUB_APP = { standIn: { kind: 'github-app' as const, accessTokenTtlSeconds: 3600 }, env: { GITHUB_APP_TYPE: 'github-app' } };

/** Seeds `sub`'s GitHub connection with a token pair the stand-in issued, already expired. */
export async function seedExpired(env: Record<string, string>, github: GitHubStandIn, sub: string, login: string): Promise<void> {
  const issued = github.issueTokenFor(login);
  const tokens: ProviderTokens = {
    accessToken: issued.accessToken,
    tokenType: 'bearer',
    refreshToken: issued.refreshToken!,
    expiresAt: Date.now() - 60_000,
    scopes: [],
  };
  github.expireAccessTokens(login);
  const user = github.users.get(login)!;
  await seedConnection(env, sub, 'github', { id: String(user.id), login }, tokens);
}

/** Kills `login`'s grant at the stand-in the way GitHub's DELETE /applications/{client_id}/grant does, so its refresh tokens die upstream. */
export async function revokeGrantUpstream(github: GitHubStandIn, login: string): Promise<void> {
  const res = await fetch(`${github.apiUrl}/applications/${github.clientId}/grant`, {
    method: 'DELETE',
    headers: {
      authorization: `Basic ${Buffer.from(`${github.clientId}:${github.clientSecret}`).toString('base64')}`,
      'content-type': 'application/json',
    },
    body: JSON.stringify({ access_token: github.issueTokenFor(login).accessToken }),
  });
  await res.arrayBuffer();
}

/** `n` concurrent github_create_issue calls in octo-org/refresh, titled `${tag} ${i}`. */
export async function createIssues(mcpUrl: string, token: string, n: number, tag: string) {
  return Promise.all(
    Array.from({ length: n }, (_, i) =>
      rawCall(mcpUrl, token, {
        method: 'tools/call',
        params: { name: 'github_create_issue', arguments: { owner: 'octo-org', repo: 'refresh', title: `${tag} ${i}` }, _meta: envelope() },
      }),
    ),
  );
}
