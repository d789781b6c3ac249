import type { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { RequestFacts, ToolDeps } from '../context.js';
import { requireConnection } from '../require-connection.js';
import { sandboxNote } from '../results.js';
import { providerFailure } from './provider-failure.js';

const inputSchema = z.object({
  owner: z.string().regex(/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/, 'owner must be a GitHub user or organisation name').describe('Repository owner (user or organisation)'),
  repo: z.string().regex(/^[A-Za-z0-9._-]{1,100}$/, 'repo must be a GitHub repository name').describe('Repository name'),
  title: z.string().trim().min(1, 'title must not be empty').max(256).describe('Issue title'),
  body: z.string().max(65_536).optional().describe('Issue body (Markdown)'),
  labels: z.array(z.string().min(1).max(50)).max(20).optional().describe('Labels to apply (needs push access; GitHub drops them otherwise)'),
});

const outputSchema = z.object({
  status: z.enum(['created', 'not_connected']),
  number: z.number().int().optional(),
  url: z.string().optional(),
  repository: z.string().optional(),
  reason: z.string().optional(),
});

export function registerGitHubCreateIssue(server: McpServer, deps: ToolDeps, facts: RequestFacts): void {
  server.registerTool(
    'github_create_issue',
    {
      title: 'Create a GitHub issue',
      description: "Creates an issue in a GitHub repository as the user's linked GitHub account. If no account is linked yet, asks the user to connect one first.",
      inputSchema,
      outputSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    async (args, ctx) => {
      const gate = await requireConnection(ctx, facts, deps, deps.github, `create the issue in ${args.owner}/${args.repo}`);
      if (!gate.ok) return gate.result;
      try {
        const issue = await deps.github.createIssue(gate.connection.tokens, args);
        deps.connections.touch(gate.principal, deps.github.id);
        const repository = `${args.owner}/${args.repo}`;
        deps.log.info('tool_github_create_issue', { repository, number: issue.number });
        return {
          content: [{ type: 'text', text: `Created issue #${issue.number} in ${repository} as @${gate.connection.row.account_login}: ${issue.url}${sandboxNote(deps.github)}` }],
          structuredContent: { status: 'created', number: issue.number, url: issue.url, repository },
        };
      } catch (err) {
        return providerFailure(err, deps.log, 'github_create_issue');
      }
    },
  );
}
