-- The sandbox GitHub makes a person admin of the repositories they created (the first issue filed
-- in one creates it), as GitHub makes a repository's creator its admin: delete_repository on the
-- repository a person just used then works once the delete_repo scope is granted.
ALTER TABLE sandbox_github_repos ADD COLUMN created_by TEXT;
UPDATE sandbox_github_repos SET created_by = (
  SELECT i.author FROM sandbox_github_issues i
   WHERE i.owner = sandbox_github_repos.owner COLLATE NOCASE AND i.repo = sandbox_github_repos.repo COLLATE NOCASE
   ORDER BY i.number LIMIT 1);
