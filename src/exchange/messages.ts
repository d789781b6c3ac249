/** Every `error_description` the token endpoint sends, in one place for review. */
export const M = {
  contentType: 'The token endpoint takes application/x-www-form-urlencoded bodies only.',
  duplicate: (name: string) => `The parameter ${name} was sent more than once.`,
  missing: (name: string) => `The parameter ${name} is required.`,
  grantType: 'Only grant_type=urn:ietf:params:oauth:grant-type:token-exchange is supported here.',
  subjectTokenType: 'subject_token_type must be urn:ietf:params:oauth:token-type:access_token.',
  requestedTokenType: 'requested_token_type, when sent, must be urn:ietf:params:oauth:token-type:access_token.',
  wait: 'wait must be a whole number of seconds from 0 to 50.',
  twoAuthMethods: 'Use one client authentication method per request: HTTP Basic or a client assertion, not both.',
  noClientAuth: 'Client authentication is required: HTTP Basic (client_secret_basic) or a client assertion (private_key_jwt).',
  badBasic: 'The Authorization header is not valid HTTP Basic credentials.',
  clientSecretInForm: 'Send the client secret as HTTP Basic credentials (client_secret_basic), or authenticate with a client assertion.',
  assertionType: 'client_assertion_type must be urn:ietf:params:oauth:client-assertion-type:jwt-bearer.',
  /**
   * Every failed authentication of a client that named itself, whatever failed (an unknown id, a
   * wrong secret, another method than its own, an assertion's signature, typ, claims or reuse):
   * one text, so that no caller learns from it which services exist or how they authenticate.
   * Why it failed goes to the broker's log.
   */
  clientAuthFailed:
    "Client authentication failed. Check the client's id, its registered method and its credentials; the broker's log says which check failed.",
  noTarget: 'Name the provider: audience=<provider id> or resource=<the provider API base URL>.',
  unknownTarget: 'The audience or resource is not a provider this broker connects to.',
  targetMismatch: 'audience and resource name different providers.',
  notAllowed: (provider: string) => `This client may not obtain tokens for ${provider}.`,
  beyondAllow: (scopes: string[]) => `This client may not ask for ${scopes.join(', ')}.`,
  subjectToken: (why: string) => `The subject token was refused: ${why}.`,
  actorToken:
    'actor_token is not supported: this broker hands out the user’s own connection to the service that asks, never on behalf of another actor (RFC 8693 delegation).',
  delegatedSubject: (claim: string) =>
    `The subject token carries ${claim}: delegation is not supported here, and such a token is never served as the user’s own.`,
  connectRequest: 'connect_request is not valid for this client, user and provider.',
  idpDown: 'The identity provider cannot be reached to check the subject token; try again shortly.',
  storeDown: 'The broker cannot reach its database right now; try again shortly.',
  providerDown: (provider: string) => `${provider} cannot be reached to renew the token; try again shortly.`,
  authFailuresLimited: 'Too many failed client authentications from this address in a minute.',
  rateLimited: (perMinute: number) => `Too many token requests: at most ${perMinute} a minute per client.`,
  interaction: {
    not_connected: (provider: string) =>
      `The user has not connected ${provider}: send them to connect_uri, then repeat with connect_request.`,
    reauth_required: (provider: string) => `${provider} no longer accepts the saved connection: the user must reconnect at connect_uri.`,
    insufficient_scope: (provider: string) => `The ${provider} connection lacks scopes: the user must approve more at connect_uri.`,
  },
  denied: {
    cancelled: 'The user cancelled connecting the account.',
    denied: 'The user or the provider refused the authorization.',
    account_linked_elsewhere: 'That provider account is already linked to another user of this broker.',
    failed: 'The provider answered the authorization with an error; ask the user before requesting a new link.',
  },
  internal: 'Something went wrong on the broker; try again.',
  approvalsUnavailable: 'The policy says this exchange needs approval, but this broker has no approvals set up; tell the operator.',
  approvalPending:
    'This exchange needs approval first: the user can follow the request at approval_uri; repeat the same request (with wait=<seconds> to hold) once it is decided.',
  approvalDenied: (reason: string) => `The exchange was not approved${reason ? `: ${reason}` : ''}.`,
} as const;
