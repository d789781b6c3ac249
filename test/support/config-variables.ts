// The one rule for "which variables does the broker read", shared by every document that must list
// them: docs/configuration.md's table (test/readme-config.test.ts) and .env.example
// (test/env-example.test.ts). Each document is reduced to names and `<ID>_…` pattern suffixes, then
// compared with what the schema and the source read.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONFIG_VARIABLES } from '../../src/config/env.js';
import { envPrefix, PROVIDER_VARIABLE_SUFFIXES } from '../../src/config/providers.js';
import { SERVICE_SECRET_VARIABLE } from '../../src/config/services.js';
import { WEBHOOK_SECRET_VARIABLE } from '../../src/config/webhooks.js';
import { builtInDefinitions } from '../../src/providers/presets.js';

const ROOT = join(import.meta.dirname, '..', '..');

/** Read only by `npm run dev`, which refuses NODE_ENV=production; documented under "Quick start", not in the table. */
export const DEV_MODE_ONLY = ['NODE_ENV'];

export interface DocumentedNames {
  /** Concrete variable names, e.g. `PUBLIC_URL` (and `SERVICE_<ID>_SECRET`, compared as written). */
  names: string[];
  /** What follows `<ID>_` in pattern entries, e.g. `CLIENT_ID` for `<ID>_CLIENT_ID`. */
  patternSuffixes: string[];
}

/** Sorts one documented name into a concrete name or a provider pattern suffix. */
export function addDocumentedName(into: DocumentedNames, name: string): void {
  const pattern = /^<ID>_([A-Z0-9_]+)$/.exec(name);
  if (pattern) into.patternSuffixes.push(pattern[1]!);
  else into.names.push(name);
}

/** Every `env.NAME` / `process.env.NAME` / `env['NAME']` in src/, so a variable read outside the schema is seen too. */
export function variablesReadInSource(dir: string = join(ROOT, 'src')): Set<string> {
  const found = new Set<string>();
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name.endsWith('.d.ts')) continue;
    const text = readFileSync(join(entry.parentPath, entry.name), 'utf8');
    for (const [, a, b] of text.matchAll(/\benv(?:\.([A-Z][A-Z0-9_]*)\b|\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\])/g)) found.add((a ?? b)!);
  }
  return found;
}

export interface ReadVariables {
  variables: Iterable<string>;
  suffixes: readonly string[];
  /** Ids of the built-in providers: `GITHUB_SCOPES` documented concretely counts as the `<ID>_SCOPES` pattern read. */
  providerIds: string[];
}

/** What the broker reads: the schema, every other `env.NAME` in src/ (less the dev-only ones), the service and webhook secrets and the provider pattern. */
export function variablesTheBrokerReads(): ReadVariables {
  const inSource = [...variablesReadInSource()].filter((name) => !DEV_MODE_ONLY.includes(name));
  return {
    variables: [...new Set([...CONFIG_VARIABLES, ...inSource, SERVICE_SECRET_VARIABLE, WEBHOOK_SECRET_VARIABLE])],
    suffixes: PROVIDER_VARIABLE_SUFFIXES,
    providerIds: builtInDefinitions({
      githubWebUrl: new URL('https://github.com'),
      githubApiUrl: new URL('https://api.github.com'),
      githubAppType: 'oauth-app',
    }).map((d) => d.id),
  };
}

export interface Drift {
  /** Read by the code, missing from the document. */
  undocumented: string[];
  /** In the document, read by no code. */
  unread: string[];
}

export function compare(documented: DocumentedNames, read: ReadVariables): Drift {
  const names = new Set(documented.names);
  const providerVariables = new Set(read.providerIds.flatMap((id) => read.suffixes.map((suffix) => `${envPrefix(id)}_${suffix}`)));
  const undocumented = [...new Set(read.variables)].filter((name) => !names.has(name));
  undocumented.push(...read.suffixes.filter((s) => !documented.patternSuffixes.includes(s)).map((s) => `<ID>_${s}`));
  const readSet = new Set(read.variables);
  const unread = documented.names.filter((name) => !readSet.has(name) && !providerVariables.has(name));
  unread.push(...documented.patternSuffixes.filter((s) => !read.suffixes.includes(s)).map((s) => `<ID>_${s}`));
  return { undocumented: undocumented.sort(), unread: unread.sort() };
}

/** Fails naming each variable on either side; `where` names the document, e.g. "docs/configuration.md's table". */
export function assertNoDrift(drift: Drift, where: string): void {
  const problems = [
    ...(drift.undocumented.length ? [`read by the code but missing from ${where}: ${drift.undocumented.join(', ')}`] : []),
    ...(drift.unread.length ? [`in ${where} but read by no code: ${drift.unread.join(', ')}`] : []),
  ];
  assert.deepEqual(problems, [], problems.join('; '));
}
