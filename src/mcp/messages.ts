/** Every sentence the MCP tools and endpoint say to a person (through the assistant), in one place for review. */
export const M = {
  instructions:
    'Tools that act on a third-party account ask the user to connect it through a link to this server; the tokens never reach the client.',
  storeDown: 'The connection broker cannot reach its database right now, so nothing was done. Try again in a moment.',
  idpDown: 'The identity provider cannot be reached to verify the access token; try again shortly.',
  declinedLink: (provider: string) => `${provider} was not connected (you chose not to open the link), so nothing was done.`,
  cannotOpenLinks: (provider: string, state: string, connectionsUrl: string) =>
    `${provider} ${state}, and this client cannot open links. Link it at ${connectionsUrl}, then try again.`,
  stateNotConnected: 'is not connected for your account',
  stateReconnect: 'needs to be reconnected',
  stateMoreAccess: 'needs to grant more access',
  askMoreAccess: (provider: string, scopes: string[], purpose: string) =>
    `${provider} needs to grant more access (${scopes.join(', ')}) so I can ${purpose}. Open the link and approve; your current connection keeps working meanwhile.`,
  askReconnect: (provider: string, purpose: string) =>
    `${provider} no longer accepts the saved connection. Reconnect it so I can ${purpose}; the token stays with this server.`,
  askConnect: (provider: string, purpose: string) =>
    `Connect your ${provider} account so I can ${purpose}. Open the link, sign in, and approve; the token stays with this server.`,
};
