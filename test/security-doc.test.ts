// SECURITY.md promises that every guarantee names the test that holds it: each named test file
// exists and holds a test whose name starts with each quoted name (up to its "…").
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const text = readFileSync(`${ROOT}SECURITY.md`, 'utf8');
const guarantees = text.slice(text.indexOf('## Guarantees'), text.indexOf('## Out of scope'));

/** Each `(\`test/x.test.ts\`: "name…", "name")` citation (or test/system/x.test.ts), whatever the line breaks. */
function citations(section: string): Array<{ file: string; name: string }> {
  const flat = section.replace(/\s*\n\s*/g, ' ');
  const out: Array<{ file: string; name: string }> = [];
  for (const group of flat.matchAll(
    /`(test\/(?:system\/)?[\w-]+\.test\.ts)`:\s*((?:"[^"]+"(?:\s*(?:,|and|and the other tests there)?\s*)?)+)/g,
  )) {
    for (const name of group[2]!.matchAll(/"([^"]+)"/g)) out.push({ file: group[1]!, name: name[1]!.replace(/…$/, '').trim() });
  }
  return out;
}

/** Test names as written in the file (by it, test, describe or a suite's own `…Test` helper), with template-literal parts and escapes left as they are. */
function testNames(file: string): string[] {
  const source = readFileSync(`${ROOT}${file}`, 'utf8');
  return [...source.matchAll(/\b(?:it|test|describe|\w+Test)\(\s*(['"`])((?:\\.|(?!\1).)*)\1/gs)].map((m) =>
    m[2]!.replace(/\\(['"`])/g, '$1'),
  );
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('SECURITY.md', () => {
  const cited = citations(guarantees);

  it('cites tests for its guarantees', () => {
    assert.ok(cited.length >= 30, `only ${cited.length} citations found`);
    const numbered = [...guarantees.matchAll(/^\d+\. /gm)].length;
    assert.ok(numbered >= 19, `${numbered} guarantees`);
  });

  it('names only test files that exist, and test names that are in them', () => {
    const missing: string[] = [];
    for (const { file, name } of cited) {
      if (!existsSync(`${ROOT}${file}`)) {
        missing.push(`${file} (no such file)`);
        continue;
      }
      // A test named by a template literal matches any value of its interpolations.
      const matches = (t: string) =>
        new RegExp(
          `^${t
            .split(/\$\{[^}]*\}/)
            .map(escape)
            .join('.+')}`,
        ).test(name) || t.startsWith(name);
      if (!testNames(file).some(matches)) missing.push(`${file}: "${name}"`);
    }
    assert.deepEqual(missing, []);
  });
});
