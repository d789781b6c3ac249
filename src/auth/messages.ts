/** Every sentence the sign-in pages show a person, in one place for review. */
export const M = {
  idpUnavailable: 'The sign-in service cannot be reached right now. Please try again in a moment.',
  signInExpired: 'This sign-in link is not valid any more. Please start again from the page you were on.',
  signInCancelled: 'You cancelled signing in, so nothing happened.',
  signInRefused: 'The sign-in service reported a problem. Please try again.',
  signInUnverified: 'The sign-in could not be verified. Please try again.',
  noIdentity: 'The sign-in service returned no identity.',
  noSubjectClaim: (claim: string) =>
    `The sign-in service did not say who you are in the way this service is set up to read it (the ${claim} claim is missing). Please tell the operator of this service.`,
  accountRefused: (problem: string) => `${problem} This account cannot sign in here.`,
  signedOutHereOnly:
    'You are signed out of this service, but not of your identity provider: it offers no sign-out to this service, so its session remains and the next sign-in here may not ask for your password. Sign out at the identity provider itself, or close the browser, if others use this computer. Your connected accounts stay connected.',
  signedOutSignIn:
    'You signed out of this service in this browser, so it does not sign you back in by itself. Sign in to continue. Your connected accounts stay connected.',
  signedOutEverywhere:
    'You are signed out of this service and of your identity provider: the next visit asks you to sign in again. Your connected accounts stay connected.',
  // Why /mcp and the token exchange refuse a token (WWW-Authenticate error_description, invalid_grant).
  untypedWithoutScope: 'The token has no typ header and grants no scope (scope or scp): it is not recognisably an access token',
  idTokenClaim: (claim: string) =>
    `The token carries ${claim === 'nonce' ? 'a nonce' : `an ${claim}`}: it is an ID token, not an access token`,
  pageClientAudience: "The token is issued to the broker's sign-in client: it is an ID token, not an access token",
};
