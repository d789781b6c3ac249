import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CONFIG_VARIABLES } from '../src/config/env.js';
import { envPrefix, PROVIDER_VARIABLE_SUFFIXES } from '../src/config/providers.js';
import { SERVICE_SECRET_VARIABLE } from '../src/config/services.js';
import { builtInDefinitions } from '../src/providers/presets.js';

const ROOT = join(import.meta.dirname, '..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** Read only by `npm run dev`, which refuses NODE_ENV=production; documented under "Quick start", not in the table. */
const DEV_MODE_ONLY = ['NODE_ENV'];

interface TableNames {
  /** Concrete variable names, e.g. `PUBLIC_URL`. */
  names: string[];
  /** What follows `<ID>_` in pattern rows, e.g. `CLIENT_ID` for `<ID>_CLIENT_ID`. */
  patternSuffixes: string[];
}

/** The backticked names in the first column of the table under `## Configuration`. */
function configurationTable(markdown: string): TableNames {
  const lines = markdown.split('\n');
  const start = lines.indexOf('## Configuration');
  assert.ok(start >= 0, 'README.md has no "## Configuration" section');
  const end = lines.findIndex((line, i) => i > start && line.startsWith('#'));
  const rows = lines.slice(start + 1, end < 0 ? undefined : end).filter((line) => line.startsWith('|'));
  const names: string[] = [];
  const patternSuffixes: string[] = [];
  // The first two rows are the header and the |---| separator.
  for (const row of rows.slice(2)) {
    const firstCell = row.split('|')[1] ?? '';
    for (const [, name] of firstCell.matchAll(/`([^`]+)`/g)) {
      const pattern = /^<ID>_([A-Z0-9_]+)$/.exec(name!);
      if (pattern) patternSuffixes.push(pattern[1]!);
      else names.push(name!);
    }
  }
  assert.ok(names.length > 0, 'the table under "## Configuration" lists no variables');
  return { names, patternSuffixes };
}

/** Every `env.NAME` / `process.env.NAME` / `env['NAME']` in src/, so a variable read outside the schema is seen too. */
function variablesReadInSource(dir: string): Set<string> {
  const found = new Set<string>();
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name.endsWith('.d.ts')) continue;
    const text = readFileSync(join(entry.parentPath, entry.name), 'utf8');
    for (const [, a, b] of text.matchAll(/\benv(?:\.([A-Z][A-Z0-9_]*)\b|\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\])/g)) found.add((a ?? b)!);
  }
  return found;
}

interface Drift {
  /** Read by the code, missing from the table. */
  undocumented: string[];
  /** In the table, read by no code. */
  unread: string[];
}

function compare(table: TableNames, read: { variables: Iterable<string>; suffixes: readonly string[]; providerIds: string[] }): Drift {
  const documented = new Set(table.names);
  const providerVariables = new Set(read.providerIds.flatMap((id) => read.suffixes.map((suffix) => `${envPrefix(id)}_${suffix}`)));
  const undocumented = [...new Set(read.variables)].filter((name) => !documented.has(name));
  undocumented.push(...read.suffixes.filter((s) => !table.patternSuffixes.includes(s)).map((s) => `<ID>_${s}`));
  const readSet = new Set(read.variables);
  const unread = table.names.filter((name) => !readSet.has(name) && !providerVariables.has(name));
  unread.push(...table.patternSuffixes.filter((s) => !read.suffixes.includes(s)).map((s) => `<ID>_${s}`));
  return { undocumented: undocumented.sort(), unread: unread.sort() };
}

function assertNoDrift(drift: Drift): void {
  const problems = [
    ...(drift.undocumented.length
      ? [`read by the code but missing from README.md's configuration table: ${drift.undocumented.join(', ')}`]
      : []),
    ...(drift.unread.length ? [`in README.md's configuration table but read by no code: ${drift.unread.join(', ')}`] : []),
  ];
  assert.deepEqual(problems, [], problems.join('; '));
}

const providerIds = builtInDefinitions({
  githubWebUrl: new URL('https://github.com'),
  githubApiUrl: new URL('https://api.github.com'),
  githubAppType: 'oauth-app',
}).map((d) => d.id);

describe('README.md configuration table', () => {
  it('lists every variable the configuration reads, and no variable that nothing reads', () => {
    const inSource = [...variablesReadInSource(join(ROOT, 'src'))].filter((name) => !DEV_MODE_ONLY.includes(name));
    const drift = compare(configurationTable(README), {
      variables: [...CONFIG_VARIABLES, ...inSource, SERVICE_SECRET_VARIABLE],
      suffixes: PROVIDER_VARIABLE_SUFFIXES,
      providerIds,
    });
    assertNoDrift(drift);
  });

  it('mentions the development-only variables elsewhere in the README', () => {
    for (const name of DEV_MODE_ONLY)
      assert.ok(README.includes(`\`${name}=`) || README.includes(`\`${name}\``), `README.md never mentions ${name}`);
  });

  it('sees the variables outside the schema: LOG_LEVEL in src/log.ts and the provider pattern', () => {
    assert.ok(variablesReadInSource(join(ROOT, 'src')).has('LOG_LEVEL'));
    assert.deepEqual([...PROVIDER_VARIABLE_SUFFIXES], ['CLIENT_ID', 'CLIENT_SECRET', 'SCOPES']);
  });

  it('names the variable on either kind of drift', () => {
    const table = (rows: string[]) =>
      configurationTable(['## Configuration', '', '| variable | required | meaning |', '|---|---|---|', ...rows, '', '## Next'].join('\n'));
    const read = { variables: ['PUBLIC_URL', 'PORT'], suffixes: ['CLIENT_ID'], providerIds: ['github'] };

    assert.deepEqual(compare(table(['| `PUBLIC_URL`, `PORT` | yes | |', '| `<ID>_CLIENT_ID` | no | |']), read), {
      undocumented: [],
      unread: [],
    });
    assert.deepEqual(compare(table(['| `PUBLIC_URL`, `GITHUB_CLIENT_ID` | yes | |', '| `<ID>_CLIENT_ID` | no | |']), read), {
      undocumented: ['PORT'],
      unread: [],
    });
    assert.deepEqual(
      compare(table(['| `PUBLIC_URL`, `PORT` | yes | |', '| `STALE_VARIABLE` | no | |', '| `<ID>_SCOPES` | no | |']), read),
      {
        undocumented: ['<ID>_CLIENT_ID'],
        unread: ['<ID>_SCOPES', 'STALE_VARIABLE'],
      },
    );
    assert.throws(() => assertNoDrift({ undocumented: ['PORT'], unread: [] }), /missing from README\.md's configuration table: PORT/);
    assert.throws(() => assertNoDrift({ undocumented: [], unread: ['STALE_VARIABLE'] }), /read by no code: STALE_VARIABLE/);
  });
});
