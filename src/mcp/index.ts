// The MCP edge, as others see it: the broker builds it, and a request router (the gateway) serves
// through it. Nothing here knows who routes.
export {
  canonicalJson,
  mcpCallOf,
  stateBindingOf,
  supportsFormElicitation,
  supportsUrlElicitation,
  withHttpFacts,
  type McpCall,
} from './call.js';
export type { RequestRouter, ToolDeps } from './context.js';
export { builtinToolProvider, createMcpEndpointHandler, SERVER_INFO } from './server.js';
export { accountFor, annotationsOf, listableTools, NO_ACCOUNT, policyGate, type PolicyTool } from './policy.js';
export { createToolStateCodec, type BuiltinState, type StateSigner } from './request-state.js';
export { requireConnection, type ConnectionGate, type ConnectionNeed } from './require-connection.js';
export { nothingDone, toolError } from './results.js';
export { providerFailure } from './tools/provider-failure.js';
export { M as McpMessages } from './messages.js';
