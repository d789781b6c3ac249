import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runNode } from '../support/node-process.js';

describe('npm run demo', () => {
  it('walks through sign-in, the URL elicitation, the browser steps and the repeat, and prints the created issue', async () => {
    const {
      code,
      stdout: out,
      stderr: err,
    } = await runNode(['--import', 'tsx', 'src/dev/demo.ts'], {
      ...process.env,
      GITHUB_CLIENT_ID: '',
      GITHUB_CLIENT_SECRET: '',
    });
    assert.equal(code, 0, err);
    for (const step of [
      /1\. The assistant signs in to the broker \(MCP authorization against the embedded IdP\)/,
      /"resultType": "input_required"/,
      /"mode": "url"/,
      /url: +http:\/\/127\.0\.0\.1:\d+\/connect\/github\?req=[A-Za-z0-9_-]{43}\n/,
      /click "Authorize" as octocat → 200 \/connect\/github\/callback — "Connected as @octocat"/,
      /"requestState": "v1\./,
      /5\. Result\n {3}Created issue #1 in octo-org\/demo as @octocat/,
    ]) {
      assert.match(out, step);
    }
    assert.doesNotMatch(out, /gho_|eyJ[A-Za-z0-9_-]{30,}\.[A-Za-z0-9_-]{30,}\./, 'no provider token or full JWT is printed');
  });
});
