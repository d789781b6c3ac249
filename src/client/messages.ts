// Everything the helper says to the person behind the assistant. Never a token, a secret or an
// assertion: only the provider's name, the purpose the tool gave, scopes and the broker's codes.

/** Names people know providers by; any other id is shown as given. */
const KNOWN_NAMES: Record<string, string> = { github: 'GitHub', gitlab: 'GitLab', google: 'Google', slack: 'Slack', linear: 'Linear' };

export function providerDisplayName(id: string): string {
  return KNOWN_NAMES[id] ?? id;
}

/** Text from the broker, made safe to show: no control characters, bounded. */
export function shown(text: string | undefined, max = 200): string {
  if (!text) return '';
  const clean = text.replace(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069]/g, ' ').trim();
  return clean.length > max ? `${clean.slice(0, max - 1)}…` : clean;
}

/** Where a "connect first" answer carries the same as data (shaped after SEP-2643), as the broker's own tools do. */
export const DENIAL_META_KEY = 'mcp-connect-broker/authorization';

export const messages = {
  connect: (p: string, purpose: string) =>
    `Connect your ${p} account so I can ${purpose}. Open the link, sign in, and approve; the broker hands the token to this service, never to your assistant.`,
  reconnect: (p: string, purpose: string) =>
    `${p} no longer accepts the saved connection. Reconnect it so I can ${purpose}; the broker hands the token to this service, never to your assistant.`,
  moreAccess: (p: string, purpose: string, missing: string[]) =>
    `${p} needs to grant more access${missing.length ? ` (${missing.join(', ')})` : ''} so I can ${purpose}. Open the link and approve; your current connection keeps working meanwhile.`,
  linkInResult: (p: string, reason: string, missing: string[], url: string, purpose: string) =>
    `${p} ${reason === 'reauth_required' ? 'needs to be reconnected' : reason === 'insufficient_scope' ? 'needs to grant more access' : 'is not connected for your account'}, so I cannot ${purpose} yet. Open this link to connect ${p}${missing.length ? ` (access asked: ${missing.join(', ')})` : ''}: ${url} ; then ask me again. The link works only for the person who asked, once, and expires soon.`,
  approvalPending: (purpose: string) =>
    `Someone must approve this first, so I can ${purpose}. Open the link to follow the request; call again once it is decided.`,
  approvalLinkInResult: (purpose: string, url: string) =>
    `Someone must approve this before I can ${purpose}. Open this link to follow the request: ${url} ; then ask me again once it is decided.`,
  approvalDeclined: (purpose: string) => `The approval was not followed up (you chose not to open the link), so I did not ${purpose}.`,
  refusedByPolicy: (description: string) => `${description} Nothing was done.`,
  declined: (p: string) => `${p} was not connected (you chose not to open the link), so nothing was done.`,
  denied: (p: string, reason: string) => `${p} was not connected (${deniedWhy(p, reason)}), so nothing was done.`,
  notSignedIn:
    'This tool needs the signed-in user: the server must verify the bearer token (for example with verifyBearerToken) before the tool runs.',
  tokenInResult: (p: string) =>
    `The tool's answer contained the ${p} access token, so it was withheld and nothing is shown. This is a bug in the service: tokens must never reach the assistant.`,
  invalidState:
    'Invalid or expired requestState: it does not belong to this user, this tool and these arguments, or it is too old. Call the tool again without it.',
  brokerError: (p: string, error: string, description: string, scopes: readonly string[], brokerOrigin: string, retryAfter?: number) => {
    const why = description ? `: ${description}` : '';
    switch (error) {
      case 'invalid_client':
        return `The connection broker did not accept this service's credentials (invalid_client${why}). The operator must check the service's id and secret or key. Nothing was done.`;
      case 'invalid_grant':
        return `The connection broker did not accept your sign-in for this service (invalid_grant${why}). Sign in to this server again, then retry. Nothing was done.`;
      case 'invalid_scope':
        return `This service may not obtain ${scopes.join(', ') || 'that access'} at ${p} (invalid_scope${why}): the broker's configuration for it does not allow it. Nothing was done.`;
      case 'invalid_target':
        return `This service may not use ${p} through the connection broker (invalid_target${why}). Nothing was done.`;
      case 'rate_limited':
        return `The connection broker is busy${retryAfter ? `; try again in ${retryAfter} s` : '; try again shortly'}. Nothing was done.`;
      case 'unreachable':
        return `The connection broker at ${brokerOrigin} could not be reached (${description || 'no answer'}). Nothing was done; try again later.`;
      case 'aborted':
        return 'The request was cancelled. Nothing was done.';
      default:
        return `The connection broker refused the token exchange (${error}${why}). Nothing was done.`;
    }
  },
};

function deniedWhy(p: string, reason: string): string {
  switch (reason) {
    case 'cancelled':
      return 'you cancelled on the connect page';
    case 'denied':
      return `you cancelled at ${p}`;
    case 'account_linked_elsewhere':
      return `that ${p} account is already linked to another user`;
    default:
      return shown(reason, 60) || 'it was refused';
  }
}
