import type { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { McpCall } from '../call.js';
import type { ToolDeps } from '../context.js';
import { summarizeConnection } from '../../connections/index.js';
import { T } from '../messages.js';
import { NO_INPUT } from './inputs.js';

const outputSchema = z.object({
  connections: z.array(
    z.object({
      provider: z.string(),
      login: z.string(),
      scopes: z.array(z.string()),
      connectedAt: z.string(),
      lastUsedAt: z.string().nullable(),
      status: z.enum(['active', 'reauth_required']),
    }),
  ),
  manageUrl: z.string(),
});

export function registerListConnections(server: McpServer, deps: ToolDeps, call: McpCall): void {
  server.registerTool(
    'list_connections',
    {
      title: 'List linked accounts',
      description: 'Lists the third-party accounts the user has linked to this server (never their tokens).',
      inputSchema: NO_INPUT,
      outputSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async () => {
      const rows = await deps.connections.list(call.principal);
      const connections = rows.map(summarizeConnection);
      const manageUrl = new URL('/connections', deps.publicUrl).href;
      const text = connections.length
        ? T.linkedAccounts(
            connections.map((c) => ({
              provider: deps.providers.get(c.provider)?.displayName ?? c.provider,
              login: c.login,
              scopes: c.scopes,
              reconnect: c.status === 'reauth_required',
            })),
            manageUrl,
          )
        : T.noAccounts(manageUrl);
      return { content: [{ type: 'text', text }], structuredContent: { connections, manageUrl } };
    },
  );
}
