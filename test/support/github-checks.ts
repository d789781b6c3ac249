// Checks of what the GitHub stand-in and the dev sandbox answer, shared by the suites that look at
// the same answer from different sides.
import assert from 'node:assert/strict';
import type { GitHubStandIn } from './github-standin.js';

/** A GitHub App user-to-server token answer: exactly these fields, a ghu_ access token and a ghr_ refresh token. */
export function assertGitHubAppTokens(tokens: object): void {
  assert.deepEqual(Object.keys(tokens), ['access_token', 'expires_in', 'refresh_token', 'refresh_token_expires_in', 'scope', 'token_type']);
  const { access_token, refresh_token } = tokens as { access_token?: unknown; refresh_token?: unknown };
  assert.match(String(access_token), /^ghu_[A-Za-z0-9]{36}$/);
  assert.match(String(refresh_token), /^ghr_[A-Za-z0-9]{76}$/);
}

/** The tool created the first issue of octo-org/hello, as @octocat, and said so in its structured result. */
export function assertFirstIssueCreated(github: GitHubStandIn, structuredContent: unknown): void {
  assert.deepEqual(structuredContent, {
    status: 'created',
    number: 1,
    url: `${github.webUrl}/octo-org/hello/issues/1`,
    repository: 'octo-org/hello',
  });
  assert.equal(github.issues.length, 1);
  assert.equal(github.issues[0]!.author, 'octocat');
}
