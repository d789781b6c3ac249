import { createMcpHandler, McpServer, type McpHttpHandler, type McpRequestContext } from '@modelcontextprotocol/server';
import type { ToolDeps } from './context.js';
import { registerConnectAccount } from './tools/connect-account.js';
import { registerDisconnectAccount } from './tools/disconnect-account.js';
import { registerGitHubCreateIssue } from './tools/github-create-issue.js';
import { registerGitHubWhoami } from './tools/github-whoami.js';
import { registerListConnections } from './tools/list-connections.js';

export const SERVER_INFO = { name: 'mcp-connect-broker', version: '0.1.0' };

/** One McpServer per HTTP request (stateless), with every tool registered. */
export function buildMcpServer(rc: McpRequestContext, deps: ToolDeps): McpServer {
  const server = new McpServer(SERVER_INFO, {
    capabilities: { tools: {} },
    requestState: { verify: (state, ctx) => deps.codec.verify(state, ctx) },
    instructions: 'Tools that act on a third-party account ask the user to connect it through a link to this server; the tokens never reach the client.',
  });
  server.server.onerror = (err) => deps.log.warn('mcp_error', { message: err.message });
  const facts = { era: rc.era };
  registerGitHubCreateIssue(server, deps, facts);
  registerGitHubWhoami(server, deps, facts);
  registerListConnections(server, deps);
  registerDisconnectAccount(server, deps, facts);
  registerConnectAccount(server, deps, facts);
  return server;
}

export function createMcpEndpointHandler(deps: ToolDeps): McpHttpHandler {
  return createMcpHandler((rc) => buildMcpServer(rc, deps), {
    onerror: (err) => deps.log.warn('mcp_handler_error', { message: err.message }),
  });
}
