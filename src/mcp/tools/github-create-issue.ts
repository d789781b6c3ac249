import type { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { McpCall } from '../call.js';
import type { ToolDeps } from '../context.js';
import { withConnection } from '../require-connection.js';
import { CONNECT_LINK_OUTPUT, sandboxNote } from '../results.js';
import { T } from '../messages.js';

const inputSchema = z.object({
  // GitHub's own rules: owners are 1-39 letters, digits and inner hyphens; repository names are
  // 1-100 of [A-Za-z0-9._-] but never `.` or `..`, which would also walk the API path upwards.
  owner: z
    .string()
    .regex(/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?$/, 'owner must be a GitHub user or organisation name')
    .describe('Repository owner (user or organisation)'),
  repo: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,100}$/, 'repo must be a GitHub repository name')
    .refine((name) => name !== '.' && name !== '..', 'repo must be a GitHub repository name, not . or ..')
    .describe('Repository name'),
  title: z.string().trim().min(1, 'title must not be empty').max(256).describe('Issue title'),
  body: z.string().max(65_536).optional().describe('Issue body (Markdown)'),
  labels: z
    .array(z.string().min(1).max(50))
    .max(20)
    .optional()
    .describe('Labels to apply (needs push access; GitHub drops them otherwise)'),
});

const outputSchema = z.object({
  status: z.enum(['created', 'not_connected', 'approval_required']),
  number: z.number().int().optional(),
  url: z.string().optional(),
  repository: z.string().optional(),
  reason: z.string().optional(),
  ...CONNECT_LINK_OUTPUT,
});

/** Creating issues needs `public_repo` (or the broader `repo`) from an OAuth App; GitHub Apps have no scopes. */
export const CREATE_ISSUE_SCOPES = ['public_repo'];

export function registerGitHubCreateIssue(server: McpServer, deps: ToolDeps, call: McpCall): void {
  const { provider, api } = deps.github;
  server.registerTool(
    'github_create_issue',
    {
      title: 'Create a GitHub issue',
      description: T.createIssueDescription,
      inputSchema,
      outputSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    (args, ctx) =>
      withConnection(
        {
          ctx,
          call,
          deps,
          provider,
          purpose: `create the issue in ${args.owner}/${args.repo}`,
          scopes: CREATE_ISSUE_SCOPES,
          tool: 'github_create_issue',
        },
        async (connection) => {
          const issue = await api.createIssue(connection.tokens, args);
          const repository = `${args.owner}/${args.repo}`;
          deps.log.info('tool_github_create_issue', { repository, number: issue.number });
          return {
            content: [
              {
                type: 'text',
                text: T.createdIssue(issue.number, repository, connection.row.account_login, issue.url) + sandboxNote(provider),
              },
            ],
            structuredContent: { status: 'created', number: issue.number, url: issue.url, repository },
          };
        },
      ),
  );
}
