/** Every sentence the MCP tools and endpoint say to a person (through the assistant), in one place for review. */
export const M = {
  instructions:
    'Tools that act on a third-party account ask the user to connect it through a link to this server; the tokens never reach the client.',
  storeDown: 'The connection broker cannot reach its database right now, so nothing was done. Try again in a moment.',
  idpDown: 'The identity provider cannot be reached to verify the access token; try again shortly.',
  notJson: 'Unsupported Media Type: Content-Type must be application/json',
  tooLarge: (limit: number) => `Request body too large: the limit is ${limit} bytes`,
  parseError: 'Parse error: the body is not valid JSON',
  tooDeep: (depth: number) => `Invalid Request: the JSON nests deeper than ${depth} levels`,
  notConnected: (provider: string, why: string) => `${provider} was not connected (${why}), so nothing was done.`,
  failedAtProvider: (provider: string, code: string) =>
    `${provider} was not connected: it answered the authorization with the error "${code}", so nothing was done. Tell the person; call again only if they want to retry, and that call gives a new link.`,
  declinedLink: (provider: string) => `${provider} was not connected (you chose not to open the link), so nothing was done.`,
  linkInResult: (provider: string, state: string, scopes: string[], url: string, purpose: string) =>
    `${provider} ${state}, so I cannot ${purpose} yet. Open this link to connect ${provider}${scopes.length ? ` (access asked: ${scopes.join(', ')})` : ''}: ${url} ; then ask me again. The link works only for the person who asked, once, and expires soon.`,
  otherDevice: (activateUrl: string, code: string) => ` On another device, open ${activateUrl} and enter the code ${code}.`,
  stateNotConnected: 'is not connected for your account',
  stateReconnect: 'needs to be reconnected',
  stateMoreAccess: 'needs to grant more access',
  askMoreAccess: (provider: string, scopes: string[], purpose: string) =>
    `${provider} needs to grant more access (${scopes.join(', ')}) so I can ${purpose}. Open the link and approve; your current connection keeps working meanwhile.`,
  askReconnect: (provider: string, purpose: string) =>
    `${provider} no longer accepts the saved connection. Reconnect it so I can ${purpose}; your assistant never sees the token.`,
  askConnect: (provider: string, purpose: string) =>
    `Connect your ${provider} account so I can ${purpose}. Open the link, sign in, and approve; your assistant never sees the token.`,
};

/** What the policy and the approval gate say (src/mcp/policy.ts). */
export const P = {
  waitingForApproval: (tool: string) =>
    `Waiting for approval of ${tool}. Open the link to follow the request; call again once it is decided.`,
  approvalLinkInResult: (tool: string, url: string) =>
    `This call of ${tool} needs approval first, so nothing was done yet. The person can follow the request at ${url} ; once it is approved, ask me again with the same arguments.`,
  approvalDenied: (tool: string, reason: string) => `The call of ${tool} was not approved${reason ? `: ${reason}` : ''}. Nothing was done.`,
  approvalsUnavailable: (tool: string) =>
    `The policy says a call of ${tool} needs approval, but this broker has no approvals set up, so nothing was done. Tell the operator.`,
};

/** What the built-in tools say: their descriptions (read by the model) and their results. */
export const T = {
  connectAccountDescription: (providers: string[]) =>
    `Makes sure the user has linked their account at a provider (${providers.join(', ')}), asking them to connect it in their browser if not. Never returns tokens.`,
  linkedAs: (provider: string, login: string, scopes: string[]) =>
    `${provider} is linked as @${login}${scopes.length ? ` (scopes: ${scopes.join(', ')})` : ''}.`,
  disconnectDescription:
    "Unlinks one of the user's third-party accounts after asking them to confirm: revokes the grant at the provider and deletes the stored tokens.",
  disconnected: (provider: string, login: string) =>
    `Disconnected @${login} from ${provider}: the grant was revoked at ${provider} and the stored tokens were deleted.`,
  deletedUnconfirmed: (provider: string, login: string, why: string | undefined) =>
    `Deleted the stored ${provider} tokens for @${login}, but ${provider} could not confirm the revocation (${why}). The user can also remove the app in their ${provider} settings.`,
  cannotConfirm: (provider: string, connectionsUrl: string) =>
    `Disconnecting ${provider} needs the user's confirmation, which this client cannot ask for. Disconnect at ${connectionsUrl}.`,
  confirmDisconnect: (provider: string, login: string) =>
    `Disconnect your ${provider} account @${login}? Its access will be revoked at ${provider} and the stored tokens deleted.`,
  createIssueDescription:
    "Creates an issue in a GitHub repository as the user's linked GitHub account. If no account is linked yet, asks the user to connect one first.",
  createdIssue: (number: number, repository: string, login: string, url: string) =>
    `Created issue #${number} in ${repository} as @${login}: ${url}`,
  whoamiDescription:
    'Tells which GitHub account is linked for the user, checking with GitHub that it still works. Asks the user to connect one if none is linked.',
  linkedAccounts: (rows: Array<{ provider: string; login: string; scopes: string[]; reconnect: boolean }>, manageUrl: string) =>
    `Linked accounts:\n${rows
      .map((r) => `- ${r.provider}: @${r.login} (scopes: ${r.scopes.join(', ') || 'none'})${r.reconnect ? ' — needs reconnecting' : ''}`)
      .join('\n')}\nManage them at ${manageUrl}`,
  noAccounts: (manageUrl: string) =>
    `No accounts are linked yet. Tools ask to connect when they need an account, or link one at ${manageUrl}`,
};
