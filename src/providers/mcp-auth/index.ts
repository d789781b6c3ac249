// `auth: mcp` upstreams: the broker as an OAuth client of an upstream MCP server's own authorization server.
export {
  createMcpAuthProvider,
  McpAuthProvider,
  variablePrefix,
  preRegisteredClient,
  clientDocumentPath,
  upstreamCallback,
  type McpAuthProviderOptions,
} from './provider.js';
export { clientDocumentRoutes } from './client-documents.js';
export { discoverUpstreamAuthorization, type UpstreamAuthorization } from './discovery.js';
