import type { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { McpCall } from '../call.js';
import type { ToolDeps } from '../context.js';
import { withConnection } from '../require-connection.js';
import { CONNECT_LINK_OUTPUT, sandboxNote } from '../results.js';
import { T } from '../messages.js';
import { providerInput } from './inputs.js';
import { scopeList } from '../../providers/scopes.js';

const outputSchema = z.object({
  ...CONNECT_LINK_OUTPUT,
  status: z.enum(['connected', 'not_connected', 'approval_required']),
  provider: z.string().optional(),
  login: z.string().optional(),
  scopes: z.array(z.string()).optional(),
  reason: z.string().optional(),
});

/** Links an account at any configured provider (asking the user through the connect page if needed). */
export function registerConnectAccount(server: McpServer, deps: ToolDeps, call: McpCall): void {
  server.registerTool(
    'connect_account',
    {
      title: 'Link an account',
      description: T.connectAccountDescription([...deps.providers.values()].map((p) => p.displayName)),
      inputSchema: providerInput(deps.providers, 'Which provider to link'),
      outputSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    ({ provider: id }, ctx) => {
      const provider = deps.providers.get(id)!;
      return withConnection(
        { ctx, call, deps, provider, purpose: `use your ${provider.displayName} account`, tool: 'connect_account' },
        async (connection) => {
          const scopes = scopeList(connection.row.scopes);
          return {
            content: [
              {
                type: 'text',
                text: T.linkedAs(provider.displayName, connection.row.account_login, scopes) + sandboxNote(provider),
              },
            ],
            structuredContent: { status: 'connected', provider: provider.id, login: connection.row.account_login, scopes },
          };
        },
      );
    },
  );
}
