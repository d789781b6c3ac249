/** Every sentence a person (or an operator reading a page) sees from `auth: mcp` upstreams, in one place for review. */
export const M = {
  unreachable: (name: string) => `${name} cannot be reached right now. Please try again in a moment.`,
  noAuthorization: (name: string) =>
    `${name} did not say where to sign in: it answered without a resource_metadata challenge and publishes no OAuth protected resource metadata. Tell the operator.`,
  wrongResource: (name: string, expected: string) =>
    `${name} is not set up correctly: its protected resource metadata is not for ${expected}. Nothing was sent to it. Tell the operator.`,
  refusedAddress: (name: string) =>
    `${name} is not set up correctly: it sends this service to an address it does not connect to (not https, not public, or a redirect). Nothing was sent there. Tell the operator.`,
  noAuthorizationServer: (name: string) =>
    `${name} is not set up correctly: its protected resource metadata names no authorization server. Tell the operator.`,
  insecureUrl: (name: string, what: string) =>
    `${name} is not set up correctly: its ${what} is not an https URL (plain http is allowed only on this machine, for an upstream itself served over plain http there). Nothing was sent there. Tell the operator.`,
  wrongIssuer: (name: string) =>
    `${name} is not set up correctly: its authorization server's metadata names another issuer. Nothing was sent to it. Tell the operator.`,
  noPkce: (name: string) =>
    `${name}'s authorization server does not support PKCE with S256, which this service requires. Tell the operator.`,
  noMetadata: (name: string) => `${name}'s authorization server publishes no OAuth authorization server metadata. Tell the operator.`,
  noRegistration: (name: string, variable: string, documentNeedsHttps: boolean) =>
    `This service cannot sign in to ${name}: its authorization server ${documentNeedsHttps ? 'accepts client ID metadata documents, which need this service on an https PUBLIC_URL, and offers no dynamic registration' : 'offers neither client ID metadata documents nor dynamic registration'}. Tell the operator: register a client there and set ${variable}.`,
  registrationFailed: (name: string) =>
    `${name}'s authorization server refused to register this service. Please try again later, or tell the operator.`,
  cancelled: (name: string) => `You cancelled at ${name}.`,
  codeRefused: (name: string) => `${name} did not accept the authorization (it may have expired). Please start again.`,
  refreshRefused: (name: string) => `${name} no longer accepts the saved authorization; reconnect ${name}.`,
  noRefreshToken: (name: string) => `The ${name} access has expired and cannot be renewed; reconnect ${name}.`,
  clientRefused: (name: string) => `This service is not set up correctly with ${name}. Tell the operator.`,
  notCompleted: (name: string) => `${name} could not complete the authorization. Please try again.`,
  garbled: (name: string) => `${name} did not answer properly (it may be down). Please try again in a moment.`,
  noAccountId: (name: string) => `${name} sent an account id with control or invisible characters. This account cannot be linked.`,
  revokeUnconfirmed: (name: string) => `${name} did not confirm the revocation.`,
  /** The login shown for an account the authorization server does not name (no OpenID Connect): the upstream's configured name, never the server's words. */
  anonymousLogin: (name: string) => `account at ${name}`,
};
