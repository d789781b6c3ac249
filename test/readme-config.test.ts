import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { PROVIDER_VARIABLE_SUFFIXES } from '../src/config/providers.js';
import { UPSTREAM_KEYS } from '../src/config/upstreams.js';
import { WEBHOOK_EVENT_TYPES } from '../src/config/webhooks.js';
import {
  addDocumentedName,
  assertNoDrift,
  compare,
  DEV_MODE_ONLY,
  variablesReadInSource,
  variablesTheBrokerReads,
  type DocumentedNames,
} from './support/config-variables.js';

const ROOT = join(import.meta.dirname, '..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const CONFIGURATION = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8');
const OPERATIONS = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
const TABLE = "docs/configuration.md's table";

/** The backticked names in the first column of the table under `## Environment variables`. */
function configurationTable(markdown: string): DocumentedNames {
  const lines = markdown.split('\n');
  const start = lines.indexOf('## Environment variables');
  assert.ok(start >= 0, 'docs/configuration.md has no "## Environment variables" section');
  const end = lines.findIndex((line, i) => i > start && line.startsWith('#'));
  const rows = lines.slice(start + 1, end < 0 ? undefined : end).filter((line) => line.startsWith('|'));
  const table: DocumentedNames = { names: [], patternSuffixes: [] };
  // The first two rows are the header and the |---| separator.
  for (const row of rows.slice(2)) {
    const firstCell = row.split('|')[1] ?? '';
    for (const [, name] of firstCell.matchAll(/`([^`]+)`/g)) addDocumentedName(table, name!);
  }
  assert.ok(table.names.length > 0, 'the table under "## Environment variables" lists no variables');
  return table;
}

/** The backticked names in the first column of the `| event | when |` table under `## Webhooks`, in order. */
function webhookEventTable(markdown: string): string[] {
  const section = markdown.slice(markdown.indexOf('## Webhooks'));
  const lines = section.split('\n');
  const header = lines.indexOf('| event | when |');
  assert.ok(header >= 0, 'docs/operations.md has no "| event | when |" table under "## Webhooks"');
  const rows: string[] = [];
  // The row after the header is the |---| separator; the table ends at the first line that is not a row.
  for (const row of lines.slice(header + 2)) {
    if (!row.startsWith('|')) break;
    rows.push(/^\| `([^`]+)` \|/.exec(row)?.[1] ?? row);
  }
  return rows;
}

describe("docs/operations.md's webhook events", () => {
  it('lists every event an endpoint can receive (the default of every endpoint), in the order the configuration keeps them, and no other', () => {
    assert.deepEqual(webhookEventTable(OPERATIONS), [...WEBHOOK_EVENT_TYPES]);
  });
});

describe('docs/configuration.md, the configuration reference', () => {
  it('lists every variable the configuration reads, and no variable that nothing reads', () => {
    assertNoDrift(compare(configurationTable(CONFIGURATION), variablesTheBrokerReads()), TABLE);
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
      configurationTable(
        ['## Environment variables', '', '| variable | required | meaning |', '|---|---|---|', ...rows, '', '## Next'].join('\n'),
      );
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
    assert.throws(() => assertNoDrift({ undocumented: ['PORT'], unread: [] }, TABLE), /missing from docs\/configuration\.md's table: PORT/);
    assert.throws(() => assertNoDrift({ undocumented: [], unread: ['STALE_VARIABLE'] }, TABLE), /read by no code: STALE_VARIABLE/);
  });
});

describe("docs/configuration.md's upstream settings", () => {
  it('lists every key an upstreams: entry may have, in the order the schema reads them, and no other', () => {
    const section = CONFIGURATION.slice(CONFIGURATION.indexOf('## Upstream settings'));
    const lines = section.split('\n');
    const header = lines.findIndex((line) => line.startsWith('| key |'));
    assert.ok(header >= 0, 'docs/configuration.md has no "| key |" table under "## Upstream settings"');
    const keys: string[] = [];
    for (const row of lines.slice(header + 2)) {
      if (!row.startsWith('|')) break;
      keys.push(/^\| `([^`]+)` \|/.exec(row)?.[1] ?? row);
    }
    assert.deepEqual(keys, [...UPSTREAM_KEYS]);
  });
});
