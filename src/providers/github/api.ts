import { fetchWithTimeout, readJson } from '../http.js';
import { ProviderError, type ProviderAccount, type ProviderTokens } from '../provider.js';
import { githubApiError } from './errors.js';

export interface CreatedIssue {
  number: number;
  url: string;
  title: string;
}

/** The few GitHub REST calls our tools make, with the user's token. GitHub Enterprise: a base URL with `/api/v3`. */
export class GitHubApi {
  readonly #base: URL;

  constructor(
    apiUrl: URL,
    private readonly timeoutMs: number,
  ) {
    this.#base = apiUrl.href.endsWith('/') ? apiUrl : new URL(`${apiUrl.href}/`);
  }

  async #call(
    path: string,
    tokens: ProviderTokens,
    init: RequestInit,
    action: string,
    operation: string,
  ): Promise<Record<string, unknown>> {
    const response = await fetchWithTimeout(
      new URL(path, this.#base),
      {
        ...init,
        headers: {
          accept: 'application/vnd.github+json',
          'x-github-api-version': '2022-11-28',
          'user-agent': 'mcp-connect-broker',
          authorization: `Bearer ${tokens.accessToken}`,
          ...(init.body ? { 'content-type': 'application/json' } : {}),
        },
      },
      this.timeoutMs,
      'GitHub',
      operation,
    );
    const body = await readJson(response, 'GitHub');
    if (!response.ok) throw githubApiError(response, body, action);
    return body;
  }

  async user(tokens: ProviderTokens): Promise<ProviderAccount> {
    const body = await this.#call('user', tokens, { method: 'GET' }, 'read your GitHub profile', 'github user');
    if (typeof body.login !== 'string' || (typeof body.id !== 'number' && typeof body.id !== 'string')) {
      throw new ProviderError('unavailable', 'GitHub sent an unexpected profile. Please try again.', 'missing login/id');
    }
    return { id: String(body.id), login: body.login };
  }

  async createIssue(
    tokens: ProviderTokens,
    issue: { owner: string; repo: string; title: string; body?: string; labels?: string[] },
  ): Promise<CreatedIssue> {
    const { owner, repo, ...fields } = issue;
    const body = await this.#call(
      `repos/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}/issues`,
      tokens,
      { method: 'POST', body: JSON.stringify(fields) },
      `create an issue in ${owner}/${repo}`,
      'github create_issue',
    );
    if (typeof body.number !== 'number' || typeof body.html_url !== 'string') {
      throw new ProviderError('unavailable', 'GitHub sent an unexpected answer after creating the issue.', 'missing number/html_url');
    }
    return { number: body.number, url: body.html_url, title: typeof body.title === 'string' ? body.title : issue.title };
  }
}
