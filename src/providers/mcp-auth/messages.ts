/**
 * Every sentence a person (or an operator reading a page) sees from `auth: mcp` upstreams' discovery,
 * registration and accounts, in one place for review; those of token requests, shared with every
 * OAuth provider, are in src/providers/messages.ts.
 */
export const M = {
  noAuthorization: (name: string) =>
    `${name} did not say where to sign in: it answered without a resource_metadata challenge and publishes no OAuth protected resource metadata. Tell the operator.`,
  wrongResource: (name: string, expected: string) =>
    `${name} is not set up correctly: its protected resource metadata is not for ${expected}. Nothing was sent to it. Tell the operator.`,
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
  noAccountId: (name: string) => `${name} sent an account id with control or invisible characters. This account cannot be linked.`,
  /** The login shown for an account the authorization server does not name (no OpenID Connect): the upstream's configured name, never the server's words. */
  anonymousLogin: (name: string) => `account at ${name}`,
};
