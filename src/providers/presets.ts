import type { ProviderDefinitionInput } from './definition.js';
import { GITHUB_OAUTH_SCOPES } from './github/scopes.js';

export interface PresetContext {
  githubWebUrl: URL;
  githubApiUrl: URL;
  /** `oauth-app` (classic scopes) or `github-app` (user-to-server tokens: 8 h, rotating refresh, no scopes). */
  githubAppType: 'oauth-app' | 'github-app';
}

const join = (base: URL, path: string) => new URL(path, base.href.endsWith('/') ? base : new URL(`${base.href}/`)).href;

/**
 * Built-in providers. GitHub is exercised by the test suite against a stand-in in both modes; the
 * others were checked against each provider's published OAuth documentation and metadata (see the
 * docs/configuration.md's presets table for what each was checked against) and are not exercised here (status
 * 'untested').
 */
export function builtInDefinitions(ctx: PresetContext): ProviderDefinitionInput[] {
  const githubApp = ctx.githubAppType === 'github-app';
  return [
    {
      id: 'github',
      displayName: 'GitHub',
      kind: 'oauth2',
      authorizationEndpoint: join(ctx.githubWebUrl, 'login/oauth/authorize'),
      tokenEndpoint: join(ctx.githubWebUrl, 'login/oauth/access_token'),
      scopes: githubApp ? [] : GITHUB_OAUTH_SCOPES,
      defaultScopes: githubApp ? [] : ['repo'],
      impliedBy: { public_repo: ['repo'], 'read:user': ['user'] },
      scopesApply: !githubApp,
      scopeSeparator: ' ',
      pkce: true,
      authorizeParams: { allow_signup: 'true' },
      clientAuth: 'client_secret_post',
      identity: {
        source: 'api',
        url: join(ctx.githubApiUrl, 'user'),
        headers: { accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28' },
        idField: 'id',
        loginField: 'login',
      },
      revocation: { kind: 'github-grant', apiUrl: ctx.githubApiUrl.href },
      refresh: { skewSeconds: 300, rotates: true },
      tokenErrorsAsHttp200: true,
      freshTokenRetryMs: 1_500,
      status: 'tested',
      docs: 'https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps',
    },
    {
      id: 'gitlab',
      displayName: 'GitLab',
      kind: 'oidc',
      issuer: 'https://gitlab.com',
      scopes: [
        { name: 'openid', description: 'Confirm who you are on GitLab.' },
        { name: 'read_user', description: 'Read your GitLab profile.' },
        { name: 'api', description: 'Read and write everything your GitLab account can, including issues and merge requests.' },
      ],
      defaultScopes: ['openid', 'read_user', 'api'],
      // The ID token carries sub (the user id) and nickname (the username); the revocation
      // endpoint (/oauth/revoke) comes from discovery. A refresh revokes the old token pair.
      identity: { source: 'id_token', idField: 'sub', loginField: 'nickname' },
      revocation: { kind: 'rfc7009' },
      refresh: { skewSeconds: 120, rotates: true },
      docs: 'https://docs.gitlab.com/api/oauth2/',
    },
    {
      id: 'google',
      displayName: 'Google',
      kind: 'oidc',
      issuer: 'https://accounts.google.com',
      scopes: [
        { name: 'openid', description: 'Confirm who you are on Google.' },
        { name: 'email', description: 'See your email address.' },
        { name: 'https://www.googleapis.com/auth/calendar.readonly', description: 'See your calendars and events.' },
      ],
      defaultScopes: ['openid', 'email'],
      // offline access for a refresh token; include_granted_scopes makes consent incremental.
      authorizeParams: { access_type: 'offline', prompt: 'consent', include_granted_scopes: 'true' },
      incrementalScopes: 'missing',
      // Userinfo, not the ID token: a request for only the missing scopes carries no openid/email,
      // so its ID token (if any) lacks email, while the combined access token still reads userinfo.
      identity: { source: 'userinfo', idField: 'sub', loginField: 'email' },
      revocation: { kind: 'rfc7009', endpoint: 'https://oauth2.googleapis.com/revoke' },
      docs: 'https://developers.google.com/identity/protocols/oauth2/web-server',
    },
    {
      id: 'slack',
      displayName: 'Slack',
      kind: 'oidc',
      issuer: 'https://slack.com',
      scopes: [
        { name: 'openid', description: 'Confirm who you are on Slack.' },
        { name: 'profile', description: 'See your Slack name and workspace.' },
        { name: 'email', description: 'See your email address.' },
      ],
      // PKCE at Slack is an app setting that turns the app into a public client for good; a
      // confidential client does not send it.
      pkce: false,
      identity: { source: 'id_token', idField: 'sub', loginField: 'name' },
      clientAuth: 'client_secret_post',
      // Slack's auth.revoke is not RFC 7009.
      revocation: { kind: 'none' },
      // openid.connect.token is a Web API method: errors come as HTTP 200 {"ok": false, "error": ...}.
      tokenErrorsAsHttp200: true,
      docs: "https://api.slack.com/authentication/sign-in-with-slack (identity only; API scopes need Slack's v2 user_scope flow)",
    },
    {
      id: 'microsoft',
      displayName: 'Microsoft',
      kind: 'oauth2',
      // The multi-tenant "common" endpoints: its discovery document's issuer is a template, so use explicit endpoints.
      authorizationEndpoint: 'https://login.microsoftonline.com/common/oauth2/v2.0/authorize',
      tokenEndpoint: 'https://login.microsoftonline.com/common/oauth2/v2.0/token',
      scopes: [
        { name: 'offline_access', description: 'Keep access while you are away (a refresh token).' },
        { name: 'User.Read', description: 'Read your Microsoft profile.' },
        { name: 'Mail.Read', description: 'Read your mail.' },
      ],
      defaultScopes: ['offline_access', 'User.Read'],
      identity: { source: 'api', url: 'https://graph.microsoft.com/v1.0/me', idField: 'id', loginField: 'userPrincipalName' },
      // No RFC 7009 endpoint. Each refresh returns a new refresh token, but the old one is not revoked.
      revocation: { kind: 'none' },
      refresh: { skewSeconds: 120, rotates: false },
      docs: 'https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-auth-code-flow',
    },
    {
      id: 'atlassian',
      displayName: 'Atlassian',
      kind: 'oauth2',
      authorizationEndpoint: 'https://auth.atlassian.com/authorize',
      tokenEndpoint: 'https://auth.atlassian.com/oauth/token',
      scopes: [
        { name: 'read:me', description: 'Read your Atlassian profile.' },
        { name: 'offline_access', description: 'Keep access while you are away (a refresh token).' },
        { name: 'read:jira-work', description: 'Read Jira issues and projects.' },
        { name: 'write:jira-work', description: 'Create and edit Jira issues.' },
      ],
      defaultScopes: ['read:me', 'offline_access', 'read:jira-work'],
      authorizeParams: { audience: 'api.atlassian.com', prompt: 'consent' },
      identity: { source: 'api', url: 'https://api.atlassian.com/me', idField: 'account_id', loginField: 'email' },
      // No public revocation endpoint: users remove the app from their Atlassian account.
      revocation: { kind: 'none' },
      refresh: { skewSeconds: 120, rotates: true },
      docs: 'https://developer.atlassian.com/cloud/jira/platform/oauth-2-3lo-apps/',
    },
    {
      id: 'linear',
      displayName: 'Linear',
      kind: 'oauth2',
      authorizationEndpoint: 'https://linear.app/oauth/authorize',
      tokenEndpoint: 'https://api.linear.app/oauth/token',
      scopes: [
        { name: 'read', description: 'Read your Linear workspace.' },
        { name: 'write', description: 'Create and change anything your Linear account can, including issues and comments.' },
      ],
      // Requested comma-separated; Linear answers with a space-separated scope string.
      scopeSeparator: ',',
      identity: {
        source: 'api',
        url: 'https://api.linear.app/graphql',
        method: 'POST',
        body: { query: '{ viewer { id email } }' },
        idField: 'data.viewer.id',
        loginField: 'data.viewer.email',
      },
      revocation: { kind: 'rfc7009', endpoint: 'https://api.linear.app/oauth/revoke' },
      // 24-hour access tokens with refresh tokens (all apps since April 2026). Whether a refresh kills
      // the old refresh token is not settled by the docs; a returned refresh token is stored either way.
      refresh: { skewSeconds: 120, rotates: false },
      docs: 'https://linear.app/developers/oauth-2-0-authentication',
    },
    {
      id: 'notion',
      displayName: 'Notion',
      kind: 'oauth2',
      authorizationEndpoint: 'https://api.notion.com/v1/oauth/authorize',
      tokenEndpoint: 'https://api.notion.com/v1/oauth/token',
      scopes: [],
      scopesApply: false,
      pkce: false,
      authorizeParams: { owner: 'user' },
      clientAuth: 'client_secret_basic',
      identity: { source: 'token_response', idField: 'owner.user.id', loginField: 'owner.user.name' },
      // POST /v1/oauth/revoke exists but takes a JSON body and a Notion-Version header, not RFC 7009.
      revocation: { kind: 'none' },
      docs: 'https://developers.notion.com/guides/get-started/authorization',
    },
  ];
}
