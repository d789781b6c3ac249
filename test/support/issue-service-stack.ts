// Test helper: the broker with the example issue service (examples/issue-service/) declared as a
// token-exchange service and running beside it, as the e2e suites use them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startIssueService, type IssueService } from '../../examples/issue-service/service.js';
import { freePort } from '../../src/dev/free-port.js';
import { writeYamlLines } from './config-file.js';
import { startStack, type Stack } from './stack.js';

export const ISSUE_SERVICE = { id: 'issue-bot', secret: 'issue-bot-secret-for-the-e2e-test-0123' };
export const ISSUE_SERVICE_STATE_KEY = 'an-e2e-state-key-of-at-least-thirty-two-bytes';

export interface IssueServiceStack {
  stack: Stack;
  service: IssueService;
  /** The MCP audience the service is declared with (and serves under). */
  audience: string;
  close(): Promise<void>;
}

/** A broker whose PROVIDERS_FILE declares the issue service (repeats held 5 s), and the service itself. */
export async function startIssueServiceStack(folderPrefix: string): Promise<IssueServiceStack> {
  const audience = `http://127.0.0.1:${await freePort()}/mcp`;
  const dir = mkdtempSync(join(tmpdir(), folderPrefix));
  const file = writeYamlLines(join(dir, 'services.yaml'), [
    'services:',
    `  - id: ${ISSUE_SERVICE.id}`,
    '    displayName: Example issue service',
    `    audiences: [${audience}]`,
    '    auth: client_secret_basic',
    '    allow: { github: [public_repo, repo] }',
  ]);
  const stack = await startStack({ env: { PROVIDERS_FILE: file, SERVICE_ISSUE_BOT_SECRET: ISSUE_SERVICE.secret }, holdSeconds: 5 });
  const service = await startIssueService({
    brokerUrl: stack.publicUrl,
    serviceId: ISSUE_SERVICE.id,
    serviceSecret: ISSUE_SERVICE.secret,
    stateKey: ISSUE_SERVICE_STATE_KEY,
    oidcIssuer: stack.idp.issuer,
    audience,
    githubApiUrl: stack.github.apiUrl,
    broker: { waitSeconds: 10 },
  });
  return {
    stack,
    service,
    audience,
    async close() {
      await service.close();
      await stack.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
