import { acceptedContent, inputRequired, inputResponse, type McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { supportsFormElicitation, type McpCall } from '../call.js';
import type { ToolDeps } from '../context.js';
import { nothingDone, toolError } from '../results.js';
import { T } from '../messages.js';
import { providerInput } from './inputs.js';

const CONFIRM_KEY = 'confirm_disconnect';

const confirmSchema = z.object({
  confirm: z.boolean().describe('Yes, disconnect this account'),
});

const outputSchema = z.object({
  status: z.enum(['disconnected', 'kept', 'not_connected']),
  provider: z.string(),
  revoked: z.boolean().optional(),
  revokeError: z.string().optional(),
});

export function registerDisconnectAccount(server: McpServer, deps: ToolDeps, call: McpCall): void {
  server.registerTool(
    'disconnect_account',
    {
      title: 'Disconnect a linked account',
      description: T.disconnectDescription,
      inputSchema: providerInput(deps.providers, 'Which provider to disconnect'),
      outputSchema,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
    },
    async ({ provider: providerId }, ctx) => {
      const provider = deps.providers.get(providerId)!;
      const { principal } = call;
      const existing = await deps.connections.find(principal, provider.id);
      if (!existing) {
        return nothingDone(`No ${provider.displayName} account is linked, so there is nothing to disconnect.`, {
          status: 'not_connected',
          provider: provider.id,
        });
      }

      const state = ctx.mcpReq.requestState<{ kind: string }>();
      const answer = inputResponse(ctx.mcpReq.inputResponses, CONFIRM_KEY);
      if (state?.kind === 'confirm_disconnect' && answer.kind === 'elicit') {
        const confirmed = acceptedContent(ctx.mcpReq.inputResponses, CONFIRM_KEY, confirmSchema)?.confirm === true;
        if (!confirmed) {
          return nothingDone(`Nothing was disconnected: @${existing.account_login} on ${provider.displayName} stays linked.`, {
            status: 'kept',
            provider: provider.id,
          });
        }
        const outcome = await deps.connections.disconnect(principal, provider);
        deps.log.info('connection_disconnected', { provider: provider.id, revoked: outcome.revoked, via: 'tool' });
        const text = outcome.revoked
          ? T.disconnected(provider.displayName, existing.account_login)
          : T.deletedUnconfirmed(provider.displayName, existing.account_login, outcome.revokeError);
        return {
          content: [{ type: 'text', text }],
          structuredContent: {
            status: 'disconnected',
            provider: provider.id,
            revoked: outcome.revoked,
            ...(outcome.revokeError ? { revokeError: outcome.revokeError } : {}),
          },
        };
      }

      if (call.era === 'legacy' || !supportsFormElicitation(call.capabilities)) {
        return toolError(T.cannotConfirm(provider.displayName, new URL('/connections', deps.publicUrl).href));
      }
      return inputRequired({
        inputRequests: {
          [CONFIRM_KEY]: inputRequired.elicit({
            message: T.confirmDisconnect(provider.displayName, existing.account_login),
            requestedSchema: confirmSchema,
          }),
        },
        requestState: await deps.codec.mint({ kind: 'confirm_disconnect', provider: provider.id }, ctx),
      });
    },
  );
}
