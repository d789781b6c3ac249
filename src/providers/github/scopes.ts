// Every classic OAuth scope GitHub documents for OAuth apps, in words a person can judge before
// approving. `destructive` marks the scopes that can delete things or take away access for good:
// the consent page flags them with a marker and words, never by colour alone.
import type { ProviderScope } from '../provider.js';

export const GITHUB_OAUTH_SCOPES: ProviderScope[] = [
  {
    name: 'repo',
    description:
      'Read and write your public and private repositories: code, issues, pull requests, commit statuses, collaborators, webhooks and deployments.',
  },
  { name: 'public_repo', description: 'Read and write your public repositories, including creating issues, and star repositories.' },
  { name: 'repo:status', description: 'Read and set commit statuses in your public and private repositories (no access to their code).' },
  {
    name: 'repo_deployment',
    description: 'Read and set deployment statuses in your public and private repositories (no access to their code).',
  },
  { name: 'repo:invite', description: 'Accept or decline your invitations to collaborate on repositories.' },
  { name: 'security_events', description: 'Read and change security alerts (code scanning and related) of your repositories.' },
  { name: 'read:org', description: "Read your organizations' members, teams and projects." },
  { name: 'write:org', description: 'Read your organizations and change your own membership and its visibility.' },
  {
    name: 'admin:org',
    description: 'Fully manage your organizations: their settings, teams and members, including removing members and deleting teams.',
    destructive: true,
  },
  { name: 'read:repo_hook', description: 'Read the webhooks of your repositories.' },
  { name: 'write:repo_hook', description: 'Read, create, change and test the webhooks of your repositories.' },
  { name: 'admin:repo_hook', description: 'Fully manage the webhooks of your repositories, including deleting them.', destructive: true },
  { name: 'admin:org_hook', description: 'Fully manage the webhooks of your organizations, including deleting them.', destructive: true },
  { name: 'gist', description: 'Create and change your gists.' },
  { name: 'notifications', description: 'Read your notifications, mark them read, and watch or unwatch repositories.' },
  { name: 'user', description: 'Read and change your GitHub profile, including your email addresses and whom you follow.' },
  { name: 'read:user', description: 'Read your GitHub profile.' },
  { name: 'user:email', description: 'Read your email addresses.' },
  { name: 'user:follow', description: 'Follow and unfollow people as you.' },
  { name: 'project', description: 'Read and change your projects and those of your organizations.' },
  { name: 'read:project', description: 'Read your projects and those of your organizations.' },
  { name: 'delete_repo', description: 'Delete repositories you administer, with all their code, issues and history.', destructive: true },
  { name: 'read:packages', description: 'Download packages from GitHub Packages and read their metadata.' },
  { name: 'write:packages', description: 'Publish packages to GitHub Packages (and read them).' },
  { name: 'delete:packages', description: 'Delete packages from GitHub Packages.', destructive: true },
  { name: 'read:public_key', description: 'Read your SSH keys.' },
  { name: 'write:public_key', description: 'Add SSH keys to your account and read them.' },
  { name: 'admin:public_key', description: 'Fully manage your SSH keys, including deleting them.', destructive: true },
  { name: 'read:gpg_key', description: 'Read your GPG keys.' },
  { name: 'write:gpg_key', description: 'Add GPG keys to your account and read them.' },
  { name: 'admin:gpg_key', description: 'Fully manage your GPG keys, including deleting them.', destructive: true },
  { name: 'read:ssh_signing_key', description: 'Read your SSH signing keys.' },
  { name: 'write:ssh_signing_key', description: 'Add SSH signing keys to your account and read them.' },
  { name: 'admin:ssh_signing_key', description: 'Fully manage your SSH signing keys, including deleting them.', destructive: true },
  {
    name: 'workflow',
    description: 'Add and change GitHub Actions workflow files, which run code in your repositories with their secrets.',
  },
  { name: 'codespace', description: 'Create, change, start, stop and delete your codespaces.' },
];
