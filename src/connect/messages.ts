/** Every sentence the connect pages show a person, in one place for review. */
export const M = {
  unknownLink: 'This connect link is not valid. Check that you opened the whole link, or ask your assistant for a new one.',
  declinedInClient:
    'This request was declined or cancelled in the AI assistant that asked for it, so this link does not work any more and nothing was connected. To connect an account, ask your assistant again; it will give you a new link.',
  undescribedScope: (provider: string) => `A permission ${provider} did not describe to us:`,
  linkExpired: 'This connect link has expired. Ask your assistant to try again; it will give you a new link.',
  linkUsed: 'This connect link has already been used. Each link works once; ask your assistant for a new one if you still need to connect.',
  providerUnavailable: (problem: string) => `${problem} Your link still works: reload this page to try again.`,
  cancelledOnConsent: (provider: string) => `You cancelled, so your ${provider} account was not connected. You can close this tab.`,
  linkBusy: 'This connect link is being used right now. Ask your assistant for a new one if you still need to connect.',
  invalidCallback: 'This authorization response is not valid, has expired or was already used. Nothing was connected.',
  providerRefused: (provider: string) => `${provider} reported a problem and nothing was connected. Ask your assistant to try again.`,
  cancelledAtProvider: (provider: string) => `You cancelled at ${provider}, so nothing was connected. You can close this tab.`,
  notSaved: (provider: string) =>
    `${provider} approved, but this service could not save the connection because its database is unavailable. Nothing was connected: ask your assistant to try again in a moment; it will give you a new link.`,
  exchangeFailed: (problem: string) => `${problem} Nothing was connected; ask your assistant to try again.`,
  accountChanged: (provider: string, linked: string, login: string) =>
    `Your ${provider} connection here is to ${linked}, but ${provider} signed you in as @${login}. Nothing was changed: ${linked} stays linked, and the access @${login} just granted was not kept. To link @${login} instead, disconnect ${linked} on your connected accounts page first; otherwise sign in to ${provider} as ${linked} and ask your assistant to try again.`,
  accountShared: (provider: string, login: string) =>
    `That ${provider} account (@${login}) is already linked to another user of this service, so it was not connected. Sign in to ${provider} with another account, or ask the operator.`,
  nothingToDisconnect: (provider: string) => `No ${provider} account was connected.`,
  disconnectedAndRevoked: (provider: string) => `Your ${provider} account is disconnected and the access was revoked at ${provider}.`,
  disconnectedNotRevoked: (provider: string, why: string) =>
    `Your ${provider} account is disconnected here, but ${provider} could not confirm the revocation (${why}). You can also remove the app in your ${provider} settings.`,
};
