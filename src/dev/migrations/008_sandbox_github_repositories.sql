-- The sandbox GitHub's MCP endpoint (src/dev/sandbox-github/mcp/) lists issues per repository and
-- deletes repositories. A repository was only the issue counter of sandbox_github_repos (created by
-- the first issue filed in it); it now also has an id, like GitHub's repository ids: a deletion
-- confirmed for one repository never deletes another one created later under the same name.
-- The trigger numbers every new row, whoever inserts it (a previous release inserts no id).

ALTER TABLE sandbox_github_repos ADD COLUMN id INTEGER;
ALTER TABLE sandbox_github_repos ADD COLUMN created_at INTEGER;

INSERT INTO sandbox_github_counters (name, value) VALUES ('next_repo_id', 2000000);
UPDATE sandbox_github_repos SET id = 2000000 + rowid;
UPDATE sandbox_github_counters SET value = (SELECT COALESCE(MAX(id), 1999999) + 1 FROM sandbox_github_repos) WHERE name = 'next_repo_id';
UPDATE sandbox_github_repos SET created_at = COALESCE(
  (SELECT MIN(i.created_at) FROM sandbox_github_issues i
    WHERE i.owner = sandbox_github_repos.owner COLLATE NOCASE AND i.repo = sandbox_github_repos.repo COLLATE NOCASE),
  CAST(strftime('%s', 'now') AS INTEGER) * 1000);
CREATE UNIQUE INDEX sandbox_github_repos_id ON sandbox_github_repos (id);

CREATE TRIGGER sandbox_github_repos_number AFTER INSERT ON sandbox_github_repos WHEN NEW.id IS NULL
BEGIN
  UPDATE sandbox_github_repos
     SET id = (SELECT value FROM sandbox_github_counters WHERE name = 'next_repo_id'),
         created_at = COALESCE(NEW.created_at, CAST(strftime('%s', 'now') AS INTEGER) * 1000)
   WHERE rowid = NEW.rowid;
  UPDATE sandbox_github_counters SET value = value + 1 WHERE name = 'next_repo_id';
END;

-- GitHub's own first repository, so a fresh sandbox has one to look at.
INSERT OR IGNORE INTO sandbox_github_repos (owner, repo, last_number, id, created_at) VALUES ('octocat', 'Hello-World', 0, 1296269, 1295981256000);
