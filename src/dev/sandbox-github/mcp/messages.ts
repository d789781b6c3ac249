// The words the sandbox GitHub's MCP endpoint says: tool descriptions the model reads, the
// confirmation a person reads, and the errors both read. Modelled on what GitHub's remote MCP
// server says (github/github-mcp-server), in our own words.

export const MCP_SERVER_NAME = 'Sandbox GitHub MCP Server';

export const D = {
  instructions:
    'A simulated GitHub for development (not github.com). Call get_me first to learn who the token belongs to; repositories and issues live in the sandbox only.',
  getMe:
    "Get details of the authenticated GitHub user (the sandbox user whose token came in). Use it for the user's own profile, or when a call needs their login.",
  listIssues:
    "List issues in a GitHub repository of the sandbox. For the next page, pass the previous answer's pageInfo.endCursor as 'after'.",
  createIssue: 'Create a new issue in a GitHub repository of the sandbox, with a title and an optional body and labels.',
  deleteRepository:
    'Delete a GitHub repository of the sandbox, with its issues, after the user confirms the exact owner/repository name. It cannot be undone.',
  owner: 'Repository owner (username or organization)',
  repo: 'Repository name',
  state: 'Filter by state; both open and closed issues are returned when absent',
  labels: 'Filter by labels (issues carrying every one of them)',
  orderBy: "Order issues by this field; 'direction' says which way",
  direction: 'Order direction',
  since: 'Only issues updated at or after this instant (ISO 8601)',
  perPage: 'Results per page (1 to 100, default 30)',
  after: "Cursor for the next page: the previous answer's pageInfo.endCursor",
  title: 'Issue title',
  body: 'Issue body content (optional)',
  issueLabels: 'Labels to apply to the new issue (optional)',
} as const;

export const M = {
  confirmDelete: (fullName: string) => `Delete ${fullName}? This cannot be undone. Type ${fullName} to confirm.`,
  confirmField: (fullName: string) => `Enter ${fullName} exactly to confirm the deletion`,
  deleted: (fullName: string) => `Repository ${fullName} was deleted.`,
  notConfirmed: 'Repository deletion was not confirmed. The repository was not deleted.',
  nameMismatch: (fullName: string) => `The confirmation did not match "${fullName}". The repository was not deleted.`,
  stateMissing: 'The confirmation came without its request state. The repository was not deleted.',
  targetChanged: 'The repository to delete changed after the confirmation was asked for. The repository was not deleted.',
  identityChanged:
    'The repository was deleted or created again under this name after the confirmation was asked for. The repository was not deleted.',
  invalidConfirmation: 'The confirmation answer was not a form answer. The repository was not deleted.',
  repositoryNotFound: (action: string, fullName: string) => `failed to ${action}: ${fullName}: 404 Not Found`,
  notAdmin: (fullName: string) => `failed to delete repository: ${fullName}: 403 Must have admin rights to Repository.`,
  unresolvedRepository: (fullName: string) => `failed to list issues: Could not resolve to a Repository with the name '${fullName}'.`,
  badCursor: (cursor: string) => `failed to list issues: \`${cursor}\` does not appear to be a valid cursor.`,
  badSince: 'failed to list issues: since must be an ISO 8601 timestamp, e.g. 2026-01-31T12:00:00Z',
  createRefused: (status: number, message: string) => `failed to create issue: ${status} ${message}`,
  unauthorized: 'Unauthorized: send a sandbox GitHub token as Authorization: Bearer <token>.',
  badCredentials: 'Unauthorized: the token is not a working sandbox GitHub token (unknown, expired or revoked).',
  insufficientScope: (missing: string[]) => `Forbidden: insufficient scopes. Additional scopes required: ${missing.join(', ')}`,
  serverError: 'Server Error (a fault switched on in the sandbox)',
  internalError: 'Internal error: the sandbox could not answer this request',
  // The body's refusals (415, 413, 400) are the broker's own /mcp words: src/mcp/messages.ts.
} as const;
