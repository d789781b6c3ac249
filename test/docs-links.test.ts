// Every relative link in the README and docs/ leads somewhere: the file exists and, when the link
// names an anchor, a heading of that file makes it (as GitHub renders headings into anchors).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, it } from 'node:test';

const ROOT = join(import.meta.dirname, '..');

function markdownFiles(): string[] {
  const docs = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? docs(join(dir, entry.name)) : entry.name.endsWith('.md') ? [join(dir, entry.name)] : [],
    );
  return [join(ROOT, 'README.md'), join(ROOT, 'SECURITY.md'), join(ROOT, 'CONTRIBUTING.md'), ...docs(join(ROOT, 'docs'))];
}

/** GitHub's anchor of a heading: lower-cased, punctuation dropped, spaces as hyphens. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchorOf(m[1]!)));
}

function linksOf(file: string): string[] {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((href) => !/^[a-z]+:/i.test(href));
}

describe('links in the README and docs/', () => {
  for (const file of markdownFiles()) {
    it(`every relative link of ${relative(ROOT, file)} resolves`, () => {
      for (const href of linksOf(file)) {
        const [path, anchor] = href.split('#') as [string, string | undefined];
        const target = path === '' ? file : join(dirname(file), path);
        assert.ok(existsSync(target), `${relative(ROOT, file)} links to ${href}: no such file`);
        if (anchor && target.endsWith('.md'))
          assert.ok(anchorsOf(target).has(anchor), `${relative(ROOT, file)} links to ${href}: no such heading`);
      }
    });
  }
});
