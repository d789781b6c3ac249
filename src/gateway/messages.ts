/** Every sentence the gateway says to a person (through the assistant), in one place for review. */
export const G = {
  connectToolDescription: (name: string) =>
    `Connect ${name} so its tools appear. Asks the user to link their account in the browser (the assistant never sees the token), then tells when the tools are available.`,
  connectedToolsAvailable: (name: string, prefix: string) =>
    `${name} is connected. Its tools are available now (their names start with ${prefix}); list the tools again to see them.`,
  reachableNoAuth: (name: string, prefix: string) =>
    `${name} needs no account. Its tools are available (their names start with ${prefix}); list the tools again to see them.`,
  purpose: (name: string, tool: string) => `use ${tool} at ${name}`,
  connectPurpose: (name: string) => `use ${name}'s tools`,
  timeout: (id: string) => `The upstream MCP server "${id}" did not answer in time, so the result is unknown. Try again in a moment.`,
  unavailable: (id: string) => `The upstream MCP server "${id}" cannot be reached right now. Try again in a moment.`,
  httpError: (id: string) => `The upstream MCP server "${id}" failed to answer (a server error). Try again later.`,
  malformed: (id: string) => `The upstream MCP server "${id}" sent an answer this broker cannot read, so the result is unknown.`,
  tooLarge: (id: string, max: number) =>
    `The upstream MCP server "${id}" answered with more than ${max} bytes, which this broker does not relay. Ask for less (a narrower query, a smaller page).`,
  tooDeep: (id: string, depth: number) =>
    `The upstream MCP server "${id}" answered with JSON nested deeper than ${depth} levels, which this broker does not relay, so the result is unknown.`,
  overBounds: (id: string) =>
    `The upstream MCP server "${id}" lists its tools beyond this broker's bounds (too many tools, or a name, title or description too long), so its tools cannot be called until it lists fewer or shorter ones.`,
  unknownTool: (name: string) => `Tool ${name} not found`,
  declinedUpstreamLink: (name: string) => `${name}'s link was not opened (you chose not to), so nothing was done.`,
  elicitationUnsupported: (id: string) =>
    `"${id}" asked for input mid-call, which this broker cannot relay to your client yet (the upstream speaks MCP 2025-11-25), so the request was declined and the upstream's action did not go ahead.`,
  needsMoreAccess: (id: string) =>
    `The upstream MCP server "${id}" needs more access than your connected account grants for this tool. Reconnect with more access at the connections page, then try again.`,
  inputRequired: (id: string) =>
    `The upstream MCP server "${id}" asks for a confirmation or more input for this tool, which this broker cannot relay yet, so nothing was done.`,
  stillUnauthorized: (id: string) =>
    `The upstream MCP server "${id}" does not accept your connection. Reconnect your account at the connections page, then try again.`,
  tokenRefusedByUpstream: (id: string, provider: string) =>
    `The upstream MCP server "${id}" refused your ${provider} token, which ${provider} itself has not refused, so your connection is unchanged (other tools that use it keep working). This upstream's tools cannot be used with it for now; tell the operator if this goes on.`,
  scopesNotAllowed: (id: string, scopes: string[]) =>
    `The upstream MCP server "${id}" asked for more access (${scopes.join(', ')}) than the operator allows for it, so nothing was done and no change to your connection was asked for.`,
  tooManyInFlight: (id: string, cap: number) =>
    `You already have ${cap} calls in progress at the upstream MCP server "${id}", the most this broker sends it for one user at once, so this call was not sent. Wait for one to finish, then try again.`,
  upstreamError: (id: string, message: string) => `The upstream MCP server "${id}" refused the call: ${message}`,
};
