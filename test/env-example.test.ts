// .env.example names exactly the variables the broker reads (the rule test/readme-config.test.ts
// holds for docs/configuration.md's table: test/support/config-variables.ts), sets every required one, and
// ships no secret: each placeholder is one the broker (or compose) refuses until it is replaced.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../src/config/env.js';
import {
  addDocumentedName,
  assertNoDrift,
  compare,
  DEV_MODE_ONLY,
  variablesTheBrokerReads,
  type DocumentedNames,
} from './support/config-variables.js';
import { filledIn, interpolated, parseEnvFile, PLACEHOLDER, setVariables, type EnvEntry } from './support/env-file.js';

const ROOT = join(import.meta.dirname, '..');
const EXAMPLE = parseEnvFile(readFileSync(join(ROOT, '.env.example'), 'utf8'));
const COMPOSE_TEXT = readFileSync(join(ROOT, 'compose.yaml'), 'utf8');
const WHERE = '.env.example';
const COMPOSE_SECTION = 'compose.yaml only (the broker does not read these)';
const DEV_SECTION = 'Development only';

/** The broker's variables in the file: every entry outside the development and compose sections. */
function brokerEntries(entries: EnvEntry[]): DocumentedNames {
  const names: DocumentedNames = { names: [], patternSuffixes: [] };
  for (const e of entries.filter((x) => x.section !== COMPOSE_SECTION && x.section !== DEV_SECTION)) addDocumentedName(names, e.name);
  return names;
}

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
}

describe('.env.example', () => {
  it('names every variable the broker reads, and none that nothing reads', () => {
    assertNoDrift(compare(brokerEntries(EXAMPLE), variablesTheBrokerReads()), WHERE);
  });

  it('holds the development-only variables and the compose-only ones in their own sections, the latter exactly those compose.yaml interpolates', () => {
    assert.deepEqual(
      EXAMPLE.filter((e) => e.section === DEV_SECTION).map((e) => e.name),
      DEV_MODE_ONLY,
    );
    const brokerReads = new Set(variablesTheBrokerReads().variables);
    const composeOnly = [...new Set(interpolated(COMPOSE_TEXT))].filter((name) => !brokerReads.has(name)).sort();
    assert.deepEqual(
      EXAMPLE.filter((e) => e.section === COMPOSE_SECTION)
        .map((e) => e.name)
        .sort(),
      composeOnly,
    );
  });

  it('names each variable once', () => {
    const names = EXAMPLE.map((e) => e.name);
    assert.deepEqual(
      names.filter((n, i) => names.indexOf(n) !== i),
      [],
    );
  });

  it('sets every variable the broker requires, each with a comment saying what it is', () => {
    const required = problems({})
      .map((p) => /^([A-Z][A-Z0-9_]*) is required/.exec(p)?.[1])
      .filter((n): n is string => n !== undefined);
    assert.ok(required.includes('PUBLIC_URL') && required.includes('BROKER_SECRET'), `required: ${required.join(', ')}`);
    const set = setVariables(EXAMPLE);
    assert.deepEqual(
      required.filter((name) => !(name in set)),
      [],
      'required but not set in .env.example',
    );
    const lines = readFileSync(join(ROOT, '.env.example'), 'utf8').split('\n');
    for (const e of EXAMPLE) {
      // Above each entry, its comment or another entry of the same block: none stands alone.
      assert.notEqual(lines[e.line - 2] ?? '', '', `${e.name} (line ${e.line}) has a comment above it`);
    }
  });

  it('ships no secret: every secret is a placeholder the broker refuses, with a way to generate one', () => {
    const set = setVariables(EXAMPLE);
    for (const e of EXAMPLE.filter((x) => /(SECRET|KEY|KEYS|PASSWORD)$/.test(x.name)))
      assert.ok(
        e.value === PLACEHOLDER || e.value === '' || /<[^>]+>/.test(e.value),
        `${e.name} (line ${e.line}) holds "${e.value}", not a placeholder`,
      );
    const refused = problems(set);
    for (const name of ['BROKER_SECRET', 'TOKEN_ENCRYPTION_KEY'])
      assert.ok(
        refused.some((p) => p.startsWith(name)),
        `the unchanged ${name} is refused at start-up: ${refused.join('; ')}`,
      );
    const text = readFileSync(join(ROOT, '.env.example'), 'utf8');
    for (const name of ['BROKER_SECRET', 'TOKEN_ENCRYPTION_KEY', 'POSTGRES_PASSWORD'])
      assert.match(text, new RegExp(`Generate: openssl rand [^\\n]*\\n(#[^\\n]*\\n)*${name}=`), `${name} says how to generate it`);
  });

  it('gives a configuration the broker accepts once the placeholders are filled in', () => {
    assert.deepEqual(problems(filledIn(setVariables(EXAMPLE))), []);
  });

  it('accepts each example value shown for a variable that is off, once switched on', () => {
    const base = filledIn(setVariables(EXAMPLE));
    for (const e of EXAMPLE.filter((x) => !x.set && !x.name.includes('<ID>') && x.section !== DEV_SECTION)) {
      const value = e.value.includes('<') ? randomBytes(32).toString('base64') : e.value;
      const env = { ...base, [e.name]: e.name === 'TOKEN_ENCRYPTION_KEYS' ? `2026-12:${value}` : value };
      // PROVIDERS_FILE names a file that exists only in the deployment.
      if (e.name === 'PROVIDERS_FILE') continue;
      assert.deepEqual(problems(env), [], `${e.name}=${e.value} (line ${e.line})`);
    }
  });

  it('names the variable on either kind of drift', () => {
    const text = [
      '# --- Required ---',
      '# a',
      'PUBLIC_URL=https://x.example',
      '# b',
      '# STALE_ONE=1',
      `# --- ${COMPOSE_SECTION} ---`,
      'X=1',
    ].join('\n');
    const drift = compare(brokerEntries(parseEnvFile(text)), { variables: ['PUBLIC_URL', 'PORT'], suffixes: [], providerIds: [] });
    assert.deepEqual(drift, { undocumented: ['PORT'], unread: ['STALE_ONE'] });
    assert.throws(() => assertNoDrift(drift, WHERE), /missing from \.env\.example: PORT; in \.env\.example but read by no code: STALE_ONE/);
    assert.throws(() => parseEnvFile('PUBLIC_URL https://x.example'), /neither NAME=value nor a comment/);
  });
});
