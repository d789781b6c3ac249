/**
 * The sentences a person sees when an OAuth provider's server (a configured provider's, or an
 * `auth: mcp` upstream's) refuses or fails a token request: one wording for both, from
 * src/providers/oauth-client.ts. `name` is the provider's configured name, never the server's words.
 */
export const oauthMessages = {
  unreachable: (name: string) => `${name} cannot be reached right now. Please try again in a moment.`,
  refusedAddress: (name: string) =>
    `${name} is not set up correctly: it sends this service to an address it does not connect to (not https, not public, or a redirect). Nothing was sent there. Tell the operator.`,
  cancelled: (name: string) => `You cancelled at ${name}.`,
  codeRefused: (name: string) => `${name} did not accept the authorization (it may have expired). Please start again.`,
  refreshRefused: (name: string) => `${name} no longer accepts the saved authorization; reconnect ${name}.`,
  noRefreshToken: (name: string) => `The ${name} access has expired and cannot be renewed; reconnect ${name}.`,
  clientRefused: (name: string) => `This service is not set up correctly with ${name}. Tell the operator.`,
  notCompleted: (name: string) => `${name} could not complete the authorization. Please try again.`,
  garbled: (name: string) => `${name} did not answer properly (it may be down). Please try again in a moment.`,
  revokeUnconfirmed: (name: string) => `${name} did not confirm the revocation.`,
};
