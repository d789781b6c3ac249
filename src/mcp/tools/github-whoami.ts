import type { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { McpCall } from '../call.js';
import type { ToolDeps } from '../context.js';
import { withConnection } from '../require-connection.js';
import { CONNECT_LINK_OUTPUT, sandboxNote } from '../results.js';
import { T } from '../messages.js';
import { NO_INPUT } from './inputs.js';

const outputSchema = z.object({
  status: z.enum(['connected', 'not_connected', 'approval_required']),
  login: z.string().optional(),
  id: z.string().optional(),
  reason: z.string().optional(),
  ...CONNECT_LINK_OUTPUT,
});

export function registerGitHubWhoami(server: McpServer, deps: ToolDeps, call: McpCall): void {
  const { provider, api } = deps.github;
  server.registerTool(
    'github_whoami',
    {
      title: 'Which GitHub account is linked',
      description: T.whoamiDescription,
      inputSchema: NO_INPUT,
      outputSchema,
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    (_args, ctx) =>
      withConnection(
        { ctx, call, deps, provider, purpose: 'see which GitHub account is yours', tool: 'github_whoami' },
        async (connection) => {
          const account = await api.user(connection.tokens);
          return {
            content: [
              { type: 'text', text: `Your linked GitHub account is @${account.login} (id ${account.id}).${sandboxNote(provider)}` },
            ],
            structuredContent: { status: 'connected', login: account.login, id: account.id },
          };
        },
      ),
  );
}
