/**
 * Issue 22's first example as an operator writes it in PROVIDERS_FILE `policy:` (docs/policy.md):
 * only members of `maintainers` may call github_mcp_delete_repository, and another maintainer must
 * approve it. The suites that need it put these two rules first.
 */
export const MAINTAINERS_DELETE_RULES = [
  {
    id: 'only-maintainers-delete',
    when: 'tool.name == "github_mcp_delete_repository" && !("maintainers" in principal.claims.groups)',
    effect: 'deny',
    reason: 'Only maintainers may delete repositories.',
  },
  {
    id: 'delete-needs-a-second-maintainer',
    when: 'tool.name == "github_mcp_delete_repository"',
    effect: 'approve',
    approvers: '"maintainers" in approver.claims.groups',
  },
] as const;

/** The approve rule alone (the approval pages' suites). */
export const SECOND_MAINTAINER_RULE = MAINTAINERS_DELETE_RULES[1];
