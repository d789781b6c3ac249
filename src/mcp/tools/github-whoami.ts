import type { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { RequestFacts, ToolDeps } from '../context.js';
import { requireConnection } from '../require-connection.js';
import { sandboxNote } from '../results.js';
import { providerFailure } from './provider-failure.js';

const outputSchema = z.object({
  status: z.enum(['connected', 'not_connected']),
  login: z.string().optional(),
  id: z.string().optional(),
  reason: z.string().optional(),
});

export function registerGitHubWhoami(server: McpServer, deps: ToolDeps, facts: RequestFacts): void {
  server.registerTool(
    'github_whoami',
    {
      title: 'Which GitHub account is linked',
      description: "Tells which GitHub account is linked for the user, checking with GitHub that it still works. Asks the user to connect one if none is linked.",
      inputSchema: z.object({}),
      outputSchema,
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    async (_args, ctx) => {
      const gate = await requireConnection(ctx, facts, deps, deps.github, 'see which GitHub account is yours');
      if (!gate.ok) return gate.result;
      try {
        const account = await deps.github.fetchAccount(gate.connection.tokens);
        deps.connections.touch(gate.principal, deps.github.id);
        return {
          content: [{ type: 'text', text: `Your linked GitHub account is @${account.login} (id ${account.id}).${sandboxNote(deps.github)}` }],
          structuredContent: { status: 'connected', login: account.login, id: account.id },
        };
      } catch (err) {
        return providerFailure(err, deps.log, 'github_whoami');
      }
    },
  );
}
