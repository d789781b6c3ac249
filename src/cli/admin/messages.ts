/** Every line `npm run admin` shows a person: help, usage errors and outcomes. */

const RUN = 'npm run admin --';

export const HELP = {
  top: `Usage: ${RUN} <command> [options]

Works on the broker's database (DATABASE_URL, else DATABASE_PATH) with the service's own
environment, while the service runs. Never prints a token.

Commands:
  connections list [--user <iss> <sub>] [--provider <p>] [--status <s>] [--json]
                                    every linked account, or those matching
  connections revoke <iss> <sub> <provider> [--json]
                                    revoke upstream (as the user's disconnect does) and delete
  audit export [--since <when>] [--user <iss> <sub>]
                                    the audit trail as JSON lines, oldest first
  audit prune [--older-than-days <n>] [--json]
                                    delete audit rows older than the retention (AUDIT_RETENTION_DAYS) now
  audit verify [--heads <log>] [--json]
                                    check the audit trail's chain of MACs; exit 1 at the first broken link
  pending prune [--json]            remove settled and expired pending connections now
  policy test --as <iss> <sub> --tool <name> [--args <json>] [options]
                                    what PROVIDERS_FILE policy: decides for a call; calls nothing
  upstreams reset-registration <id> [--json]
                                    forget the broker's registration at an auth: mcp upstream's
                                    authorization server; the next connect registers anew
  stats [--json]                    connections by provider and status, open links, refresh failures

Run "${RUN} <command> --help" for one command.
Exit status: 0 done, 1 the connection named does not exist (or the database cannot be used), 2 bad usage.
`,
  connections: `Usage: ${RUN} connections <list|revoke> …

  connections list [--user <iss> <sub>] [--provider <p>] [--status active|reauth_required] [--json]
  connections revoke <iss> <sub> <provider> [--json]
`,
  'connections list': `Usage: ${RUN} connections list [--user <iss> <sub>] [--provider <p>] [--status <s>] [--json]

Lists linked accounts across every user, oldest first: issuer, subject, provider, upstream login,
granted scopes, status, when connected and when last used. Never a token.

  --user <iss> <sub>   only this user's (the identity provider's issuer and subject)
  --provider <p>       only this provider's (github, …, or an auth: mcp upstream's id)
  --status <s>         active or reauth_required
  --json               a JSON array of {issuer, subject, provider, login, scopes, status, createdAt, lastUsedAt}

Example: ${RUN} connections list --provider github --status reauth_required
`,
  'connections revoke': `Usage: ${RUN} connections revoke <iss> <sub> <provider> [--json]

Revokes the user's grant at the provider (as their own disconnect does), deletes the stored tokens,
and records it in the audit trail as an admin action by ADMIN_ACTOR (else the OS user).
Exits 1 when that user has no connection to that provider.

Example: ${RUN} connections revoke https://idp.example.com 248289761001 github
`,
  audit: `Usage: ${RUN} audit <export|prune|verify> …

  audit export [--since <when>] [--user <iss> <sub>]
  audit prune [--older-than-days <n>] [--json]
  audit verify [--heads <log>] [--json]
`,
  'audit export': `Usage: ${RUN} audit export [--since <when>] [--user <iss> <sub>]

Writes the audit trail to stdout as JSON lines, oldest first, one
{id, at, event, issuer, subject, provider, detail} per line. Details are codes and counts, never secrets.

  --since <when>       an ISO 8601 date or instant (2026-12-01, 2026-12-01T09:30:00Z)
                       or a duration back from now (90s, 30m, 24h, 7d, 2w)
  --user <iss> <sub>   only this user's events

Example: ${RUN} audit export --since 24h > audit.jsonl
`,
  'audit prune': `Usage: ${RUN} audit prune [--older-than-days <n>] [--json]

Deletes now what the service deletes every hour: audit rows recorded more than AUDIT_RETENTION_DAYS
days ago (default 90), oldest first, in batches of 10,000. Prints how many rows went.

  --older-than-days <n>  delete rows older than n days instead (1–3650); needed when
                         AUDIT_RETENTION_DAYS is 0 (keep forever)
  --json                 {"deleted": n}

Export first what you mean to keep: ${RUN} audit export > audit.jsonl
Each stream that loses rows keeps an anchor at the cut, so "audit verify" still checks what is left.
`,
  'audit verify': `Usage: ${RUN} audit verify [--heads <log>] [--json]

Recomputes the audit trail's chain (docs/audit.md): every row's MAC over its stream's previous MAC
and its own columns, under a key derived from BROKER_SECRET (rows MACed before BROKER_SECRET changed:
set the old one as BROKER_PREVIOUS_SECRET). Prints the rows and streams checked, or the first broken
link: the stream, the row and what is wrong (content changed, row missing, order changed...).
Rows written before the chain existed are counted as unchained history, not as broken.

  --heads <log>  a log of the broker's (JSON lines): every audit_chain_head line in it is a place
                 its stream must still reach; a stream that ends before it lost its newest rows
  --json         {ok, rows, streams, anchors, voids, unchainedHistory, belowAnchors, broken?}

Exit status: 0 the chain holds, 1 a link is broken (or the database cannot be used).
`,
  pending: `Usage: ${RUN} pending prune [--json]
`,
  'pending prune': `Usage: ${RUN} pending prune [--json]

Removes now what the service prunes every minute: pending connections settled or expired more than
five minutes ago, and expired OAuth flows, sign-ins, sessions and rate-limit windows. Prints how many rows went.
`,
  upstreams: `Usage: ${RUN} upstreams reset-registration <id> [--json]
`,
  'upstreams reset-registration': `Usage: ${RUN} upstreams reset-registration <id> [--json]

Forgets the client registration the broker made (RFC 7591) at the authorization server of the
auth: mcp upstream <id>, for when that server lost it and its page says invalid_client. Running
brokers notice on the next connect, which registers anew. Connections already made keep working
while the server still accepts their tokens. Exits 1 when <id> is not an auth: mcp upstream here.

  --json   {"upstream": id, "forgotten": n}

Example: ${RUN} upstreams reset-registration tracker
`,
  policy: `Usage: ${RUN} policy test --as <iss> <sub> --tool <name> [--args <json>] [options]
`,
  'policy test': `Usage: ${RUN} policy test --as <iss> <sub> --tool <name> [--args <json>] [options]

Prints what the policy in PROVIDERS_FILE (policy:) decides for one call, and the rule that decided,
without calling anything or reading the database (docs/policy.md). Omit --tool for the token exchange.

  --as <iss> <sub>       the caller (principal.iss, principal.sub)
  --tool <name>          the tool as the assistant calls it (prefixed, for an upstream's tool)
  --args <json>          its arguments (default {})
  --claims <json>        the access token's claims (principal.claims, default {})
  --client <id>          the MCP client's clientInfo.name (client.id)
  --service <id>         a service asking at POST /oauth/token (service.id)
  --provider <id>        the provider (default: the tool's own)
  --account <login>      the connected account's login (account.login)
  --annotations <json>   the tool's annotations (tool.annotations, default {})
  --json                 {"effect", "rule", "reason"?, "approval"?}

Example: ${RUN} policy test --as https://idp.example.com alice --tool github_mcp_delete_repository \
           --claims '{"groups":["eng"]}' --args '{"owner":"acme","repo":"site"}'
`,
  stats: `Usage: ${RUN} stats [--json]

Connections by provider and status, pending connections still open, and refresh failures
(audit event refresh_failed) in the last 24 hours.
`,
} as const;

export type HelpTopic = keyof typeof HELP;

export const USAGE = {
  seeHelp: `see "${RUN} --help"`,
  noCommand: 'no command given',
  unknownCommand: (name: string) => `unknown command "${name}"`,
  unknownOption: (raw: string, command: string) => `unknown option ${raw} for "${command}"`,
  needsValue: (raw: string) => `${raw} needs a value`,
  takesNoValue: (raw: string) => `${raw} takes no value`,
  twice: (raw: string) => `${raw} is given twice`,
  userNeedsTwo: '--user needs two values: <iss> <sub>',
  asNeedsTwo: '--as needs two values: <iss> <sub>',
  notJson: (name: string) => `${name} must be JSON`,
  notJsonObject: (name: string) => `${name} must be a JSON object`,
  extraArgument: (value: string, command: string) => `unexpected argument "${value}" for "${command}"`,
  missingArguments: (names: string, command: string) => `"${command}" needs ${names}`,
  empty: (name: string) => `${name} must not be empty`,
  status: (value: string) => `--status must be active or reauth_required (got "${value}")`,
  olderThanDays: (value: string) => `--older-than-days must be a whole number of days from 1 to 3650 (got "${value}")`,
  keepForever: 'AUDIT_RETENTION_DAYS is 0 (keep the audit trail forever): give --older-than-days <n> to prune anyway',
  since: (value: string) =>
    `--since must be an ISO 8601 date or instant (2026-12-01, 2026-12-01T09:30:00Z) or a duration such as 30m, 24h or 7d (got "${value}")`,
};

export const OUT = {
  noConnections: 'No connections match.',
  notFound: (iss: string, sub: string, provider: string) => `No ${provider} connection for ${iss} ${sub}: nothing was revoked.`,
  providerNotConfigured: (provider: string) =>
    `The provider "${provider}" is not configured in this environment, so its grant cannot be revoked upstream: nothing was changed.`,
  revoked: (who: string, provider: string, login: string) =>
    `Revoked ${provider} account @${login} of ${who} at the provider, and deleted it.`,
  deletedOnly: (who: string, provider: string, login: string, why: string) =>
    `Deleted ${provider} account @${login} of ${who}, but the provider did not confirm the revocation (${why}): revoke it there too.`,
  unreadableTokens: 'its tokens could not be opened with the keys in TOKEN_ENCRYPTION_KEYS, so nothing could be sent to the provider',
  pruned: (n: number) =>
    `Pruned ${n} row(s): settled or expired pending connections, expired flows, sign-ins, sessions and rate-limit windows.`,
  auditPruned: (n: number, days: number) => `Deleted ${n} audit row(s) recorded more than ${days} day(s) ago.`,
  chainOk: (rows: number, streams: number, anchors: number, voids: number) =>
    `Audit chain OK: ${rows} row(s) in ${streams} stream(s) verified (${anchors} anchor(s) at pruned cuts, ${voids} rolled-back place(s)).`,
  chainHeads: (n: number) => `Every stream reaches the ${n} head(s) logged for it.`,
  headsUnreadable: (path: string, why: string) => `cannot read --heads ${path} (${why}); nothing was checked`,
  chainHistory: (n: number) => `${n} row(s) from before the chain (no MAC): unchained history, not checked.`,
  chainBelowAnchors: (n: number) => `${n} row(s) older than their stream's anchor (a prune stopped halfway): not checked.`,
  chainStream: (stream: string, rows: number, lastSeq: number, lastAt: string, from: string) =>
    `  ${stream}: ${rows} row(s), head at place ${lastSeq}${lastAt ? ` (${lastAt})` : ''}, from its ${from}`,
  chainBroken: (problem: string, message: string) => `Audit chain BROKEN (${problem}): ${message}.`,
  statsConnections: 'Connections',
  statsNoConnections: '  none',
  statsPending: (open: number, authorizing: number) => `Pending connections: ${open} open, ${authorizing} authorizing`,
  statsRefreshFailures: (total: number, byProvider: string) =>
    `Refresh failures in the last 24 hours: ${total}${byProvider ? ` (${byProvider})` : ''}`,
  statsWebhooks: (endpoint: string, pending: number, delivered: number, failed: number) =>
    `Webhook ${endpoint}: ${pending} waiting, ${delivered} delivered, ${failed} failed (retries given up)`,
  notMcpUpstream: (id: string) => `"${id}" is not an auth: mcp upstream in this configuration: nothing was changed.`,
  registrationReset: (id: string, n: number) =>
    n === 0
      ? `${id} had no stored registration: the next connect registers as it would anyway.`
      : `Forgot ${n} registration(s) of ${id}: the next connect registers anew.`,
  failed: (message: string) => `admin: ${message}`,
  noDatabase: (path: string) =>
    `there is no database at DATABASE_PATH (${path}): run this with the service's environment, from its working directory`,
  storeUnavailable: 'the database cannot be reached; nothing was changed',
  noPolicy: 'PROVIDERS_FILE has no policy: section: every call is allowed.',
};
