import type { CallToolResult } from '@modelcontextprotocol/server';
import type { Logger } from '../../log.js';
import { ProviderError } from '../../providers/provider.js';
import { toolError } from '../results.js';

/** Turns a provider failure into a tool error the model can relay; anything else is rethrown. */
export function providerFailure(err: unknown, log: Logger, tool: string): CallToolResult {
  if (!(err instanceof ProviderError)) throw err;
  log.warn('provider_call_failed', { tool, errorCode: err.code, detail: err.detail });
  if (err.code === 'unauthorized') return toolError(`${err.message} Open the connections page to reconnect.`);
  return toolError(err.message);
}
