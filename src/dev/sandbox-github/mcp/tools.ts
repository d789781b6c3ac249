// The tools of the sandbox GitHub's MCP endpoint, named, shaped and answering like those of GitHub's
// remote MCP server (github/github-mcp-server: get_me, list_issues, create_issue, delete_repository):
// results are JSON text blocks of the same "minimal" shapes, failures are tool errors that read like
// its ones ("failed to …: 404 Not Found"), and delete_repository confirms through its own
// input_required before it deletes anything.
import {
  inputRequired,
  inputResponse,
  type CallToolResult,
  type InputRequiredResult,
  type McpServer,
  type RequestStateCodec,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { SandboxGitHubStore, SandboxIssue } from '../../store/index.js';
import { D, M } from './messages.js';

/** The sandbox user behind a request, from the verified sandbox token (see ./index.ts). */
export interface SandboxCaller {
  login: string;
  userId: number;
  /** The app the token was issued to. */
  clientId: string;
}

/** What delete_repository carries from its question to the answer. Signed, not encrypted. */
export interface DeleteRepositoryState {
  owner: string;
  repo: string;
  repositoryId: number;
}

export interface SandboxMcpTools {
  store: SandboxGitHubStore;
  webUrl: string;
  now: () => number;
  codec: RequestStateCodec<DeleteRepositoryState>;
  /** Why the REST API would refuse an issue in owner/repo (its simulated 404 and 410), if it would. */
  issueRefusal: (owner: string, repo: string) => { status: number; message: string } | undefined;
  callerOf: (ctx: ServerContext) => SandboxCaller;
}

/** The input_required key, GitHub's own. */
export const CONFIRM_KEY = 'delete_repository_confirmation';
export const CONFIRM_FIELD = 'repository_name';
const DEFAULT_PAGE = 30;

// GitHub's name rules: logins are alphanumerics and single hyphens (39 at most), repository names
// letters, digits, '.', '-' and '_' (100 at most), never '.' or '..'.
const owner = z
  .string()
  .regex(/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/, 'not a GitHub owner name')
  .describe(D.owner);
const repo = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,100}$/, 'not a GitHub repository name')
  .refine((r) => r !== '.' && r !== '..', 'not a GitHub repository name')
  .describe(D.repo);

const text = (value: unknown): CallToolResult => ({ content: [{ type: 'text', text: JSON.stringify(value) }] });
const failure = (message: string): CallToolResult => ({ content: [{ type: 'text', text: message }], isError: true });
const iso = (ms: number): string => new Date(ms).toISOString();
const sameName = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

/** Admin rights on a repository: its owner's, and its creator's (whoever filed its first issue), as GitHub gives a creator. */
export function administers(repository: { owner: string; createdBy?: string | null }, login: string): boolean {
  return sameName(repository.owner, login) || (!!repository.createdBy && sameName(repository.createdBy, login));
}

/** Page cursors: opaque to the caller, like GitHub's GraphQL ones. */
const cursorAt = (offset: number): string => Buffer.from(`sandbox-cursor:${offset}`).toString('base64url');
function offsetOf(cursor: string): number | undefined {
  const m = /^sandbox-cursor:(0|[1-9][0-9]{0,8})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  return m ? Number(m[1]) : undefined;
}

export function registerSandboxTools(server: McpServer, deps: SandboxMcpTools, era: 'modern' | 'legacy'): void {
  const { store, webUrl } = deps;
  const profileUrl = (login: string) => `${webUrl}/${login}`;
  const minimalIssue = (i: SandboxIssue) => ({
    number: i.number,
    title: i.title,
    ...(i.body ? { body: i.body } : {}),
    state: 'OPEN',
    html_url: `${webUrl}/${i.owner}/${i.repo}/issues/${i.number}`,
    user: { login: i.author, profile_url: profileUrl(i.author) },
    ...(i.labels.length ? { labels: i.labels } : {}),
    assignees: [] as string[],
    created_at: iso(i.createdAt),
    updated_at: iso(i.createdAt),
  });

  server.registerTool(
    'get_me',
    {
      title: 'Get my user profile',
      description: D.getMe,
      inputSchema: z.object({}),
      annotations: { readOnlyHint: true },
    },
    (_args, ctx) => {
      const caller = deps.callerOf(ctx);
      const user = store.findUser(caller.login);
      if (!user) return failure('failed to get user: 401 Bad credentials');
      return text({
        login: user.login,
        id: user.id,
        profile_url: profileUrl(user.login),
        details: {
          name: user.name,
          public_repos: store.listRepositories(user.login).length,
          public_gists: 0,
          followers: 0,
          following: 0,
        },
      });
    },
  );

  server.registerTool(
    'list_issues',
    {
      title: 'List issues',
      description: D.listIssues,
      inputSchema: z.object({
        owner,
        repo,
        state: z.enum(['OPEN', 'CLOSED']).optional().describe(D.state),
        labels: z.array(z.string().max(100)).max(100).optional().describe(D.labels),
        orderBy: z.enum(['CREATED_AT', 'UPDATED_AT', 'COMMENTS']).optional().describe(D.orderBy),
        direction: z.enum(['ASC', 'DESC']).optional().describe(D.direction),
        since: z.string().max(64).optional().describe(D.since),
        perPage: z.number().int().min(1).max(100).optional().describe(D.perPage),
        after: z.string().max(200).optional().describe(D.after),
      }),
      annotations: { readOnlyHint: true },
    },
    (args) => {
      const fullName = `${args.owner}/${args.repo}`;
      if (!store.findRepository(args.owner, args.repo)) return failure(M.unresolvedRepository(fullName));
      let since: number | undefined;
      if (args.since !== undefined) {
        since = Date.parse(args.since);
        if (!/^\d{4}-\d{2}-\d{2}/.test(args.since) || Number.isNaN(since)) return failure(M.badSince);
      }
      const start = args.after === undefined ? 0 : offsetOf(args.after);
      if (start === undefined) return failure(M.badCursor(args.after!));
      // Every sandbox issue is open (nothing closes one), and none has comments.
      let issues = args.state === 'CLOSED' ? [] : store.listRepositoryIssues(args.owner, args.repo);
      if (args.labels?.length) issues = issues.filter((i) => args.labels!.every((l) => i.labels.some((il) => sameName(il, l))));
      if (since !== undefined) issues = issues.filter((i) => i.createdAt >= since);
      if ((args.direction ?? 'DESC') === 'DESC') issues = issues.reverse();
      const size = args.perPage ?? DEFAULT_PAGE;
      const page = issues.slice(start, start + size);
      return text({
        issues: page.map(minimalIssue),
        totalCount: issues.length,
        pageInfo: {
          hasNextPage: start + size < issues.length,
          hasPreviousPage: start > 0,
          ...(page.length ? { startCursor: cursorAt(start), endCursor: cursorAt(start + page.length) } : {}),
        },
      });
    },
  );

  server.registerTool(
    'create_issue',
    {
      title: 'Create Issue',
      description: D.createIssue,
      inputSchema: z.object({
        owner,
        repo,
        title: z.string().min(1).max(256).describe(D.title),
        body: z.string().max(65_536).optional().describe(D.body),
        labels: z.array(z.string().min(1).max(50)).max(100).optional().describe(D.issueLabels),
      }),
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    },
    (args, ctx) => {
      const caller = deps.callerOf(ctx);
      const refused = deps.issueRefusal(args.owner, args.repo);
      if (refused) return failure(M.createRefused(refused.status, refused.message));
      const issue = store.createIssue({
        owner: args.owner,
        repo: args.repo,
        title: args.title,
        body: args.body || null,
        labels: args.labels ?? [],
        author: caller.login,
        createdAt: deps.now(),
      });
      return text({ id: String(issue.id), url: `${webUrl}/${issue.owner}/${issue.repo}/issues/${issue.number}` });
    },
  );

  // Like GitHub's, only for clients that speak multi round-trip requests: a stateless 2025-11-25
  // leg has no way to ask, and a deletion never happens without asking.
  if (era !== 'modern') return;
  server.registerTool(
    'delete_repository',
    {
      title: 'Delete repository',
      description: D.deleteRepository,
      inputSchema: z.object({ owner, repo }),
      annotations: { readOnlyHint: false, destructiveHint: true },
    },
    async (args, ctx): Promise<CallToolResult | InputRequiredResult> => {
      const caller = deps.callerOf(ctx);
      const fullName = `${args.owner}/${args.repo}`;
      const current = store.findRepository(args.owner, args.repo);
      if (!current) return failure(M.repositoryNotFound('get repository', fullName));
      // The scope (delete_repo) was checked before the tool ran, for a caller who administers the repository.
      if (!administers(current, caller.login)) return failure(M.notAdmin(fullName));

      const answer = inputResponse(ctx.mcpReq.inputResponses, CONFIRM_KEY);
      if (answer.kind === 'missing') {
        return inputRequired({
          inputRequests: {
            [CONFIRM_KEY]: inputRequired.elicit({
              message: M.confirmDelete(fullName),
              requestedSchema: {
                type: 'object',
                properties: { [CONFIRM_FIELD]: { type: 'string', title: 'Repository name', description: M.confirmField(fullName) } },
                required: [CONFIRM_FIELD],
              },
            }),
          },
          requestState: await deps.codec.mint({ owner: args.owner, repo: args.repo, repositoryId: current.id }, ctx),
        });
      }
      // The SDK verified the state (signature, expiry, binding to this user, tool and arguments)
      // before this runs, and answered -32602 to a tampered or foreign one.
      const state = ctx.mcpReq.requestState<DeleteRepositoryState>();
      if (!state) return failure(M.stateMissing);
      if (state.owner !== args.owner || state.repo !== args.repo) return failure(M.targetChanged);
      if (answer.kind !== 'elicit') return failure(M.invalidConfirmation);
      if (answer.action !== 'accept') return failure(M.notConfirmed);
      if (answer.content?.[CONFIRM_FIELD] !== fullName) return failure(M.nameMismatch(fullName));
      if (current.id !== state.repositoryId || !store.deleteRepository(args.owner, args.repo, state.repositoryId))
        return failure(M.identityChanged);
      return { content: [{ type: 'text', text: M.deleted(fullName) }] };
    },
  );
}
