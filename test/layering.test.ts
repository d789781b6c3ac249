// Layering invariants, checked on the TypeScript syntax tree of every file under src/ (so that
// comments and strings never count, and aliases or namespace imports cannot hide a use).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SRC = join(ROOT, 'src');
const CIPHER_APIS = new Set(['createCipheriv', 'createDecipheriv', 'createHmac', 'timingSafeEqual']);
/** What gives statements on the SQLite file past the Store interface (src/store/index.ts). */
const RAW_SQLITE_HANDLE = new Set(['sqliteHandle', 'extendSqliteSchema', 'SqliteDb', 'SqliteStore']);
const UNTRUSTED_REQUEST_PARTS = new Set(['query', 'body', 'headers', 'get', 'header', 'cookies']);

interface Source {
  /** Path relative to the repository root, with forward slashes: `src/store/sqlite/database.ts`. */
  path: string;
  file: ts.SourceFile;
}

function sourcesUnder(dir: string): Source[] {
  const out: Source[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourcesUnder(full));
    else if (/\.(c|m)?[tj]s$/.test(entry.name)) out.push(parse(relative(ROOT, full).split(sep).join('/'), readFileSync(full, 'utf8')));
  }
  return out;
}

function parse(path: string, text: string): Source {
  return { path, file: ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS) };
}

/** A made-up source tree written `path: line`, one line each (a path given again adds a line to its file). */
function sourceTree(listing: string): Source[] {
  const files = new Map<string, string[]>();
  for (const entry of listing.split('\n').map((l) => l.trim())) {
    if (!entry) continue;
    const colon = entry.indexOf(': ');
    const path = entry.slice(0, colon);
    files.set(path, [...(files.get(path) ?? []), entry.slice(colon + 2)]);
  }
  return [...files].map(([path, lines]) => parse(path, lines.join('\n')));
}

function walk(node: ts.Node, visit: (n: ts.Node) => boolean | void): void {
  if (visit(node) === false) return;
  ts.forEachChild(node, (child) => walk(child, visit));
}

function where(source: Source, node: ts.Node): string {
  const { line } = source.file.getLineAndCharacterOfPosition(node.getStart(source.file));
  return `${source.path}:${line + 1}`;
}

/** Where (`path:line`) in `sources` each node `match` picks stands. */
function placesOf(sources: Source[], match: (n: ts.Node) => boolean): string[] {
  const at: string[] = [];
  for (const s of sources)
    walk(s.file, (n) => {
      if (match(n)) at.push(where(s, n));
    });
  return at;
}

/** Every place of `places` is in `file`, and one at least is: a scan that found nothing would pass without checking. */
function assertOnlyIn(places: string[], file: string, what: string): void {
  assert.ok(
    places.some((p) => p.startsWith(`${file}:`)),
    `${what} is found (the check is live)`,
  );
  assert.deepEqual(
    places.filter((p) => !p.startsWith(`${file}:`)),
    [],
  );
}

/** Every module a file imports, re-exports, requires or `import()`s, with where. */
function importedModules(source: Source): Array<{ module: string; at: string }> {
  const found: Array<{ module: string; at: string }> = [];
  const add = (spec: ts.Node | undefined, at: ts.Node) => {
    if (spec && ts.isStringLiteralLike(spec)) found.push({ module: spec.text, at: where(source, at) });
  };
  walk(source.file, (n) => {
    if (ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) add(n.moduleSpecifier, n);
    else if (ts.isImportEqualsDeclaration(n) && ts.isExternalModuleReference(n.moduleReference)) add(n.moduleReference.expression, n);
    else if (
      ts.isCallExpression(n) &&
      (n.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(n.expression) && n.expression.text === 'require'))
    )
      add(n.arguments[0], n);
    else if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument)) add(n.argument.literal, n);
  });
  return found;
}

/** Every identifier naming a cipher/HMAC/timing-safe API (imports, aliases' sources, `crypto.x` accesses). */
function cipherApiUses(source: Source): string[] {
  const found: string[] = [];
  walk(source.file, (n) => {
    if (ts.isIdentifier(n) && CIPHER_APIS.has(n.text)) found.push(`${where(source, n)} ${n.text}`);
  });
  return found;
}

function consoleUses(source: Source): string[] {
  const found: string[] = [];
  walk(source.file, (n) => {
    if (
      (ts.isPropertyAccessExpression(n) || ts.isElementAccessExpression(n)) &&
      ts.isIdentifier(n.expression) &&
      n.expression.text === 'console'
    ) {
      found.push(`${where(source, n)} ${n.getText(source.file)}`);
    }
  });
  return found;
}

/** True if `node` reads `req.query`, `req.body`, `req.headers`, `req.get(…)`… outside a safeReturnPath(…) call. */
function readsUntrustedRequest(node: ts.Node): boolean {
  let reads = false;
  walk(node, (n) => {
    if (ts.isCallExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === 'safeReturnPath') return false;
    if (
      ts.isPropertyAccessExpression(n) &&
      ts.isIdentifier(n.expression) &&
      /^req(uest)?$/.test(n.expression.text) &&
      UNTRUSTED_REQUEST_PARTS.has(n.name.text)
    )
      reads = true;
    if (ts.isElementAccessExpression(n) && ts.isIdentifier(n.expression) && /^req(uest)?$/.test(n.expression.text)) {
      const key = n.argumentExpression;
      if (ts.isStringLiteralLike(key) && UNTRUSTED_REQUEST_PARTS.has(key.text)) reads = true;
    }
    return undefined;
  });
  return reads;
}

function redirectCalls(source: Source): Array<{ at: string; text: string; openRedirectShape: boolean }> {
  const found: Array<{ at: string; text: string; openRedirectShape: boolean }> = [];
  walk(source.file, (n) => {
    if (ts.isCallExpression(n) && ts.isPropertyAccessExpression(n.expression) && n.expression.name.text === 'redirect') {
      found.push({
        at: where(source, n),
        text: n.getText(source.file),
        openRedirectShape: n.arguments.some((arg) => readsUntrustedRequest(arg)),
      });
    }
  });
  return found;
}

/** Where a relative import lands, as a repository path (`src/http/render.ts`); undefined for a package. */
function resolveImport(from: string, module: string): string | undefined {
  if (!module.startsWith('.')) return undefined;
  return posix.join(posix.dirname(from), module).replace(/\.(c|m)?js$/, (ext) => ext.replace('js', 'ts'));
}

/** The top-level part of src/ a file belongs to: its folder (`http/`) or, at the root, the file (`app.ts`). */
function topLevel(path: string): string | undefined {
  const match = /^src\/([^/]+)(\/)?/.exec(path);
  return match ? `${match[1]}${match[2] ?? ''}` : undefined;
}

/** Every import (type-only ones too) from one top-level part of src/ into another, with where. */
function folderEdges(all: Source[]): Map<string, Map<string, string>> {
  const edges = new Map<string, Map<string, string>>();
  for (const source of all) {
    const from = topLevel(source.path);
    for (const m of importedModules(source)) {
      const target = resolveImport(source.path, m.module);
      const to = target && topLevel(target);
      if (!from || !to || from === to) continue;
      const out = edges.get(from) ?? new Map<string, string>();
      if (!out.has(to)) out.set(to, m.at);
      edges.set(from, out);
    }
  }
  return edges;
}

/** Each cycle between top-level parts of src/, once, as `a/ → b/ → a/` with one import per step. */
function folderCycles(all: Source[]): string[] {
  const edges = folderEdges(all);
  const found = new Map<string, string>();
  const visit = (path: string[]) => {
    for (const next of edges.get(path[path.length - 1]!)?.keys() ?? []) {
      const start = path.indexOf(next);
      if (start < 0) {
        visit([...path, next]);
        continue;
      }
      // Name each cycle from its alphabetically first folder, so one cycle is reported once.
      const cycle = path.slice(start);
      const first = cycle.indexOf([...cycle].sort()[0]!);
      const ordered = [...cycle.slice(first), ...cycle.slice(0, first)];
      const key = ordered.join(' → ');
      const steps = ordered.map((from, i) => edges.get(from)!.get(ordered[(i + 1) % ordered.length]!)!);
      if (!found.has(key)) found.set(key, `${key} → ${ordered[0]} (${steps.join(', ')})`);
    }
  };
  for (const from of edges.keys()) visit([from]);
  return [...found.values()];
}

/** Every file of `all` each file imports (relative imports landing on a file of `all`), with where it first does. */
function fileEdges(all: Source[]): Map<string, Map<string, string>> {
  const paths = new Set(all.map((s) => s.path));
  const edges = new Map<string, Map<string, string>>();
  for (const source of all) {
    const out = new Map<string, string>();
    for (const m of importedModules(source)) {
      const target = resolveImport(source.path, m.module);
      if (target !== undefined && paths.has(target) && !out.has(target)) out.set(target, m.at);
    }
    edges.set(source.path, out);
  }
  return edges;
}

/**
 * Each circle of files of `all` that import each other (type-only imports count), one per group of
 * files that all reach one another, as `a → b → a` from the group's alphabetically first file along
 * a shortest way back, with one import per step; sorted.
 */
function fileCycles(all: Source[]): string[] {
  const edges = fileEdges(all);
  // Tarjan's strongly connected components.
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const connect = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      group.push(w);
    } while (w !== v);
    if (group.length > 1 || edges.get(v)?.has(v)) groups.push(group);
  };
  for (const v of edges.keys()) if (!index.has(v)) connect(v);
  return groups
    .map((group) => {
      const members = new Set(group);
      const start = [...group].sort()[0]!;
      // Breadth-first inside the group, from the start's imports back to the start.
      const parent = new Map<string, string>();
      const queue = [start];
      while (queue.length && !parent.has(start)) {
        const v = queue.shift()!;
        for (const w of edges.get(v)!.keys())
          if (members.has(w) && !parent.has(w)) {
            parent.set(w, v);
            queue.push(w);
          }
      }
      const way = [start];
      for (let v = parent.get(start)!; v !== start; v = parent.get(v)!) way.unshift(v);
      const cycle = [start, ...way];
      const steps = cycle.slice(0, -1).map((from, i) => edges.get(from)!.get(cycle[i + 1]!)!);
      return `${cycle.join(' → ')} (${steps.join(', ')})`;
    })
    .sort();
}

/** Who may import openid-client: the provider adapter (src/providers/) and the browser sign-in at the operator's IdP. */
const OPENID_CLIENT_IMPORTERS = [/^src\/providers\//, /^src\/auth\/oidc-client\.ts$/, /^src\/auth\/routes\.ts$/];

function openidClientImportViolations(all: Source[]): string[] {
  return all
    .filter((s) => !OPENID_CLIENT_IMPORTERS.some((allowed) => allowed.test(s.path)))
    .flatMap((s) =>
      importedModules(s)
        .filter((m) => m.module === 'openid-client' || m.module.startsWith('openid-client/'))
        .map((m) => `${m.at} ${m.module}`),
    );
}

/**
 * src/http/ holds HTTP helpers: it may import only src/http/, src/crypto/, src/log.ts, src/lru.ts
 * (the bounded cache, which imports nothing) and packages.
 */
const HTTP_MAY_IMPORT = [/^src\/http\//, /^src\/crypto\//, /^src\/log\.ts$/, /^src\/lru\.ts$/];

function httpImportViolations(all: Source[]): string[] {
  return all
    .filter((s) => s.path.startsWith('src/http/'))
    .flatMap((s) =>
      importedModules(s)
        .filter((m) => {
          const target = resolveImport(s.path, m.module);
          return target !== undefined && !HTTP_MAY_IMPORT.some((allowed) => allowed.test(target));
        })
        .map((m) => `${m.at} ${m.module}`),
    );
}

/** Only the entry points start the application: src/broker.ts, src/server.ts, src/main.ts and src/dev/. */
const APP_IMPORTERS = [/^src\/broker\.ts$/, /^src\/server\.ts$/, /^src\/main\.ts$/, /^src\/dev\//];

function appImportViolations(all: Source[]): string[] {
  return all
    .filter((s) => !APP_IMPORTERS.some((allowed) => allowed.test(s.path)))
    .flatMap((s) =>
      importedModules(s)
        .filter((m) => resolveImport(s.path, m.module) === 'src/app.ts')
        .map((m) => `${m.at} ${m.module}`),
    );
}

/** Every relative import from a file under `from` into a file under `into` (both folders of the repository), as `path:line → target`. */
function importsInto(all: Source[], from: string, into: string): string[] {
  return all.flatMap((source) =>
    source.path.startsWith(from)
      ? importedModules(source).flatMap((m) => {
          const target = resolveImport(source.path, m.module);
          return target?.startsWith(into) ? [`${m.at} → ${target}`] : [];
        })
      : [],
  );
}

/** Where a method named one of `names` is called (`x.name(…)`), as `path:line name`. */
function callsOf(all: Source[], names: ReadonlySet<string>): string[] {
  const found: string[] = [];
  for (const source of all)
    walk(source.file, (n) => {
      if (ts.isCallExpression(n) && ts.isPropertyAccessExpression(n.expression) && names.has(n.expression.name.text))
        found.push(`${where(source, n)} ${n.expression.name.text}`);
    });
  return found;
}

/** What turns a refused token into "reconnect": called only by the connection core's one policy (src/connections/). */
const TOKEN_REFUSAL_POLICY = new Set(['markReauthRequired', 'refreshRejected']);

const sources = sourcesUnder(SRC);

/** What each single-file check finds in `source`: the modules it imports, the cipher APIs it uses, its console calls, and whether each redirect has the open-redirect shape. */
function findings(source: Source) {
  return {
    imports: importedModules(source).map((m) => m.module),
    cipherApis: cipherApiUses(source).map((u) => u.split(' ')[1]),
    consoleUses: consoleUses(source).length,
    openRedirects: redirectCalls(source).map((r) => r.openRedirectShape),
  };
}

describe('the checks themselves', () => {
  it('find every kind of violation they are meant to find', () => {
    const bad = parse(
      'src/http/bad.ts',
      [
        "import Database from 'better-sqlite3';",
        "import * as nodeCrypto from 'node:crypto';",
        "import { createHmac as hmac } from 'node:crypto';",
        'const t = nodeCrypto.timingSafeEqual;',
        "console.log('x');",
        "console['error']('y');",
        "app.get('/a', (req, res) => res.redirect(req.query.next as string));",
        "app.get('/b', (req, res) => res.redirect(302, req.get('referer') || '/'));",
        "app.post('/c', (req, res) => res.redirect(303, `${req.body.returnTo}`));",
        "app.get('/d', (req, res) => res.redirect(req.headers.referer ?? '/'));",
      ].join('\n'),
    );
    assert.deepEqual(findings(bad), {
      imports: ['better-sqlite3', 'node:crypto', 'node:crypto'],
      cipherApis: ['createHmac', 'timingSafeEqual'],
      consoleUses: 2,
      openRedirects: [true, true, true, true],
    });
  });

  it('ignore comments, strings and safe redirects', () => {
    const good = parse(
      'src/http/good.ts',
      [
        '// console.log and createHmac in a comment, better-sqlite3 too',
        "const s = 'console.log(createHmac)';",
        "import type { X } from './better-sqlite3-notes.js';",
        "app.get('/a', (req, res) => res.redirect(303, safeReturnPath(req.query.returnTo, base)));",
        "app.get('/b', (req, res) => res.redirect(303, `/auth/login?returnTo=${encodeURIComponent(req.originalUrl)}`));",
        "app.get('/c', (_req, res) => res.redirect(303, '/connections'));",
      ].join('\n'),
    );
    assert.deepEqual(findings(good), {
      imports: ['./better-sqlite3-notes.js'],
      cipherApis: [],
      consoleUses: 0,
      openRedirects: [false, false, false],
    });
  });

  it('find imports from one folder into another, and calls of the token-refusal policy, type-only imports counted', () => {
    const tree = sourceTree(`
      src/mcp/context.ts: import type { Gateway } from '../gateway/index.js';
      src/gateway/forward.ts: import { requireConnection } from '../mcp/require-connection.js';
      src/gateway/forward.ts: import { toolError } from '../mcp/index.js';
      src/gateway/forward.ts: await deps.connections.markReauthRequired(p, 'github', 'upstream_401');
      src/connections/use.ts: await deps.connections.refreshRejected(p, provider, tokens);
    `);
    assert.deepEqual(importsInto(tree, 'src/mcp/', 'src/gateway/'), ['src/mcp/context.ts:1 → src/gateway/index.ts']);
    assert.deepEqual(
      importsInto(tree, 'src/gateway/', 'src/mcp/').filter((edge) => !edge.endsWith('→ src/mcp/index.ts')),
      ['src/gateway/forward.ts:1 → src/mcp/require-connection.ts'],
    );
    assert.deepEqual(callsOf(tree, TOKEN_REFUSAL_POLICY), [
      'src/gateway/forward.ts:3 markReauthRequired',
      'src/connections/use.ts:1 refreshRejected',
    ]);
  });

  it('find every folder cycle, counting type-only imports, re-exports and import() types', () => {
    const tree = sourceTree(`
      src/config/env.ts: import type { Preset } from '../providers/presets.js';
      src/providers/oauth.ts: export { isLoopback } from '../config/env.js';
      src/auth/a.ts: type S = import('../store/types.js').Store;
      src/store/b.ts: const m = await import('../mcp/c.js');
      src/mcp/c.ts: import { type X } from '../auth/a.js';
      src/crypto/d.ts: import { z } from 'zod';
      src/crypto/d.ts: import { e } from './e.js';
      src/log.ts: import { f } from './crypto/d.js';
    `);
    assert.deepEqual(
      folderCycles(tree).map((c) => c.split(' (')[0]),
      ['config/ → providers/ → config/', 'auth/ → store/ → mcp/ → auth/'],
    );
    assert.deepEqual(folderCycles(tree.slice(5)), []);
  });

  it('find every import out of src/http/ but into http/, crypto/, log.ts and lru.ts', () => {
    const tree = sourceTree(`
      src/http/render.ts: import type { Sessions } from '../auth/sessions.js';
      src/http/render.ts: import { StoreUnavailableError } from '../store/index.js';
      src/http/render.ts: export type { Store } from '../store/types.js';
      src/http/render.ts: type C = import('../config/env.js').Config;
      src/http/render.ts: import { mac } from '../crypto/index.js';
      src/http/render.ts: import type { Logger } from '../log.js';
      src/http/render.ts: import { Lru } from '../lru.js';
      src/http/render.ts: import { BrokerError } from './errors.js';
      src/http/render.ts: import express from 'express';
      src/auth/sessions.ts: import { readCookie } from '../http/cookies.js';
    `);
    assert.deepEqual(
      httpImportViolations(tree).map((v) => v.split(' ')[1]),
      ['../auth/sessions.js', '../store/index.js', '../store/types.js', '../config/env.js'],
    );
  });

  it('find every import of src/app.ts outside the entry points', () => {
    const tree = sourceTree(`
      src/connect/routes.ts: import type { AppDeps } from '../app.js';
      src/mcp/tools/x.ts: type A = import('../../app.js').AppDeps;
      src/http/y.ts: export { createApp } from '../app.js';
      src/broker.ts: import { createApp } from './app.js';
      src/dev/dev-broker.ts: import type { AppDeps } from '../app.js';
      src/server.ts: import type { AppDeps } from './app.js';
    `);
    assert.deepEqual(
      appImportViolations(tree).map((v) => v.split(':')[0]),
      ['src/connect/routes.ts', 'src/mcp/tools/x.ts', 'src/http/y.ts'],
    );
  });

  it('find every circle of files, counting type-only imports, re-exports and import() types', () => {
    const tree = sourceTree(`
      src/cli/a.ts: import type { R } from './b.js';
      src/cli/b.ts: import { f } from './a.js';
      src/x/one.ts: export { t } from './two.js';
      src/x/two.ts: type T = import('./three.js').T;
      src/x/three.ts: const m = await import('./one.js');
      src/x/four.ts: import { o } from './one.js';
      src/x/four.ts: import { z } from 'zod';
      src/y/self.ts: import { s } from './self.js';
      src/z/p.ts: import { q } from './q.js';
      src/z/q.ts: // import { p } from './p.js';
      src/z/q.ts: const text = "import { p } from './p.js'";
    `);
    assert.deepEqual(
      fileCycles(tree).map((c) => c.split(' (')[0]),
      [
        'src/cli/a.ts → src/cli/b.ts → src/cli/a.ts',
        'src/x/one.ts → src/x/two.ts → src/x/three.ts → src/x/one.ts',
        'src/y/self.ts → src/y/self.ts',
      ],
    );
    assert.equal(fileCycles(tree)[0], 'src/cli/a.ts → src/cli/b.ts → src/cli/a.ts (src/cli/a.ts:1, src/cli/b.ts:1)');
    assert.deepEqual(fileCycles(tree.filter((s) => !['src/cli/b.ts', 'src/x/three.ts', 'src/y/self.ts'].includes(s.path))), []);
  });

  it('find every import of openid-client outside src/providers/ and the sign-in client', () => {
    const tree = sourceTree(`
      src/gateway/mcp-auth/a.ts: import * as oidc from 'openid-client';
      src/connect/routes.ts: import type { Configuration } from 'openid-client';
      src/net/egress-fetch.ts: // openid-client wraps what its fetch throws
      src/net/egress-fetch.ts: const s = 'openid-client';
      src/mcp/b.ts: type C = import('openid-client').Configuration;
      src/exchange/c.ts: export { discovery } from 'openid-client';
      src/dev/d.ts: const o = await import('openid-client/passport');
      src/providers/oauth-client.ts: import * as oidc from 'openid-client';
      src/providers/mcp-auth/discovery.ts: import * as oidc from 'openid-client';
      src/auth/oidc-client.ts: import * as oidc from 'openid-client';
      src/auth/routes.ts: import * as oidc from 'openid-client';
      src/auth/bearer.ts: import { jwtVerify } from 'jose';
    `);
    assert.deepEqual(
      openidClientImportViolations(tree).map((v) => v.split(':')[0]),
      ['src/gateway/mcp-auth/a.ts', 'src/connect/routes.ts', 'src/mcp/b.ts', 'src/exchange/c.ts', 'src/dev/d.ts'],
    );
  });

  it('see the real source tree', () => {
    assert.ok(sources.length >= 40, `scanned only ${sources.length} files`);
    assert.ok(sources.some((s) => s.path === 'src/store/sqlite/database.ts'));
    assert.ok(sources.some((s) => s.path === 'src/crypto/seal.ts'));
  });
});

/**
 * Known violations, each with the bug it is: the main checks skip exactly these files for exactly
 * that rule (so every other file stays guarded), and a `todo` test per entry keeps them visible.
 */
const KNOWN: { cipher: Record<string, string>; console: Record<string, string> } = {
  cipher: {},
  console: {},
};

describe('layering invariants of src/', () => {
  it('imports better-sqlite3 only under src/store/sqlite/ and pg only under src/store/postgres/', () => {
    const usersOf = (module: string) =>
      sources.flatMap((s) =>
        importedModules(s)
          .filter((m) => m.module === module)
          .map((m) => ({ ...m, path: s.path })),
      );
    const sqlite = usersOf('better-sqlite3');
    const pg = usersOf('pg');
    assert.ok(
      sqlite.some((u) => u.path === 'src/store/sqlite/database.ts'),
      'the store does use better-sqlite3 (the check is live)',
    );
    assert.ok(
      pg.some((u) => u.path.startsWith('src/store/postgres/')),
      'the store does use pg (the check is live)',
    );
    assert.deepEqual(
      sqlite.filter((u) => !u.path.startsWith('src/store/sqlite/')).map((u) => u.at),
      [],
    );
    assert.deepEqual(
      pg.filter((u) => !u.path.startsWith('src/store/postgres/')).map((u) => u.at),
      [],
    );
  });

  it('lets nothing outside src/store/ reach into one store implementation (the rest cannot tell them apart)', () => {
    const reaching = sources
      .filter((s) => !s.path.startsWith('src/store/'))
      .flatMap((s) =>
        importedModules(s)
          .filter((m) => /\/store\/(sqlite|postgres)\//.test(m.module))
          .map((m) => m.at),
      );
    assert.deepEqual(reaching, []);
  });

  it("hands the raw SQLite handle outside src/store/ only to src/dev/store/, for development mode's own tables", () => {
    const uses = sources
      .filter((s) => !s.path.startsWith('src/store/'))
      .flatMap((source) => {
        const found: Array<{ path: string; at: string }> = [];
        walk(source.file, (n) => {
          if (ts.isIdentifier(n) && RAW_SQLITE_HANDLE.has(n.text)) found.push({ path: source.path, at: `${where(source, n)} ${n.text}` });
        });
        return found;
      });
    assert.ok(
      uses.some((u) => u.path.startsWith('src/dev/store/')),
      'src/dev/store/ does take the handle (the check is live)',
    );
    assert.deepEqual(
      uses.filter((u) => !u.path.startsWith('src/dev/store/')).map((u) => u.at),
      [],
    );
  });

  it('uses createCipheriv / createDecipheriv / createHmac / timingSafeEqual only under src/crypto/', () => {
    const inCrypto = sources.filter((s) => s.path.startsWith('src/crypto/')).flatMap(cipherApiUses);
    assert.ok(
      inCrypto.some((u) => u.endsWith(' createCipheriv')) && inCrypto.some((u) => u.endsWith(' timingSafeEqual')),
      'src/crypto/ does use them (the check is live)',
    );
    const elsewhere = sources.filter((s) => !s.path.startsWith('src/crypto/') && !(s.path in KNOWN.cipher));
    assert.deepEqual(elsewhere.flatMap(cipherApiUses), []);
  });

  it("uses no console.* under src/ except src/main.ts and src/dev/oidc-provider.ts, which filters a library's notes (logging goes through src/log.ts)", () => {
    const allowed = new Set(['src/main.ts', 'src/dev/oidc-provider.ts']);
    const offenders = sources.filter((s) => !allowed.has(s.path) && !(s.path in KNOWN.console)).flatMap(consoleUses);
    assert.deepEqual(offenders, []);
  });

  for (const [path, reason] of Object.entries(KNOWN.cipher)) {
    it(`keeps cipher/HMAC/timing-safe APIs out of ${path} too`, { todo: reason }, () => {
      const source = sources.find((s) => s.path === path);
      assert.deepEqual(source ? cipherApiUses(source) : [], []);
    });
  }

  for (const [path, reason] of Object.entries(KNOWN.console)) {
    it(`uses no console.* in ${path} either`, { todo: reason }, () => {
      const source = sources.find((s) => s.path === path);
      assert.deepEqual(source ? consoleUses(source) : [], []);
    });
  }

  it('keeps src/mcp/ ignorant of the gateway: no file under src/mcp/ imports src/gateway/', () => {
    assert.ok(importsInto(sources, 'src/gateway/', 'src/mcp/').length > 0, 'the gateway uses the MCP edge (the check is live)');
    assert.deepEqual(importsInto(sources, 'src/mcp/', 'src/gateway/'), []);
  });

  it('lets src/gateway/ use src/mcp/ only through src/mcp/index.ts', () => {
    assert.deepEqual(
      importsInto(sources, 'src/gateway/', 'src/mcp/').filter((edge) => !edge.endsWith('→ src/mcp/index.ts')),
      [],
    );
  });

  it('has one policy for a refused token: only src/connections/ refreshes a rejected token or marks a connection for reconnecting', () => {
    const calls = callsOf(sources, TOKEN_REFUSAL_POLICY);
    assert.ok(
      calls.some((c) => c.startsWith('src/connections/use.ts:')),
      'the policy is found (the check is live)',
    );
    assert.deepEqual(
      calls.filter((c) => !c.startsWith('src/connections/')),
      [],
    );
  });

  it('has no import cycles between the top-level folders of src/ (type-only imports count)', () => {
    assert.ok(folderEdges(sources).get('http/')?.has('crypto/'), 'the folder graph is built (the check is live)');
    assert.deepEqual(folderCycles(sources), []);
  });

  it('has no circle of files under src/ importing each other (type-only imports count)', () => {
    assert.ok((fileEdges(sources).get('src/broker.ts')?.size ?? 0) > 0, 'the file graph is built (the check is live)');
    assert.deepEqual(fileCycles(sources), []);
  });

  it('imports openid-client only under src/providers/ (the one OAuth client adapter) and in the sign-in client (src/auth/oidc-client.ts, src/auth/routes.ts)', () => {
    assert.ok(
      sources.some((s) => s.path === 'src/providers/oauth-client.ts' && importedModules(s).some((m) => m.module === 'openid-client')),
      'src/providers/oauth-client.ts does import openid-client (the check is live)',
    );
    assert.deepEqual(openidClientImportViolations(sources), []);
  });

  it('keeps src/http/ to HTTP helpers: it imports only src/http/, src/crypto/, src/log.ts, src/lru.ts and packages', () => {
    assert.ok(
      sources.some((s) => s.path.startsWith('src/http/') && importedModules(s).some((m) => m.module.startsWith('../crypto/'))),
      'src/http/ does import src/crypto/ (the check is live)',
    );
    assert.deepEqual(httpImportViolations(sources), []);
  });

  it('lets only the entry points (src/broker.ts, src/server.ts, src/main.ts, src/dev/) import src/app.ts', () => {
    assert.ok(
      sources.some((s) => s.path === 'src/broker.ts' && importedModules(s).some((m) => resolveImport(s.path, m.module) === 'src/app.ts')),
      'src/broker.ts does import src/app.ts (the check is live)',
    );
    assert.deepEqual(appImportViolations(sources), []);
  });

  it("reads or writes a library's private member (a property named _x, MCP's _meta aside) only in src/gateway/sdk-result-passthrough.ts", () => {
    const privateMembers = placesOf(sources, (n) => ts.isPropertyAccessExpression(n) && /^_(?!meta$)[A-Za-z]/.test(n.name.text));
    assertOnlyIn(privateMembers, 'src/gateway/sdk-result-passthrough.ts', 'the one workaround');
  });

  it('builds a JSON-RPC error body (an object literal with jsonrpc and error) only in src/http/json-rpc-error.ts', () => {
    const builders = placesOf(sources, (n) => {
      if (!ts.isObjectLiteralExpression(n)) return false;
      const names = n.properties.map((p) => (p.name && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name)) ? p.name.text : ''));
      return names.includes('jsonrpc') && names.includes('error');
    });
    assertOnlyIn(builders, 'src/http/json-rpc-error.ts', 'the one builder');
  });

  it('reads an MCP request body (readBody, the depth check) only in src/mcp/endpoint.ts: the sandbox GitHub reuses readJsonRpcBody', () => {
    const BODY_READERS = new Set(['readBody', 'nestsDeeperThan']);
    const calls = (names: Set<string>) => (n: ts.Node) =>
      ts.isCallExpression(n) && ts.isIdentifier(n.expression) && names.has(n.expression.text);
    // Upstream answers are no request bodies: the gateway holds them to the same depth, in one place.
    const answerDepth = placesOf(
      sources.filter((s) => s.path === 'src/gateway/bounds.ts'),
      calls(new Set(['nestsDeeperThan'])),
    );
    assert.equal(answerDepth.length, 1, 'the depth check of upstream answers');
    const uses = placesOf(
      sources.filter((s) => s.path !== 'src/http/web-adapter.ts'),
      calls(BODY_READERS),
    );
    assertOnlyIn(
      uses.filter((at) => !answerDepth.includes(at)),
      'src/mcp/endpoint.ts',
      'the one reader',
    );
  });

  it('renders pages with an error status only through the error handler: every other renderMessage() passes the literal 200', () => {
    const calls = sources.flatMap((s) => {
      const found: Array<{ at: string; status: string }> = [];
      walk(s.file, (n) => {
        if (ts.isCallExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === 'renderMessage' && n.arguments[2]) {
          const at = `${s.path}:${s.file.getLineAndCharacterOfPosition(n.getStart()).line + 1}`;
          found.push({ at, status: n.arguments[2].getText(s.file) });
        }
      });
      return found;
    });
    assert.ok(
      calls.some((c) => c.status === '200'),
      'the renderMessage calls are found (the check is live)',
    );
    assert.deepEqual(
      calls.filter((c) => c.status !== '200' && !c.at.startsWith('src/http/error-handler.ts:')).map((c) => `${c.at} ${c.status}`),
      [],
    );
  });

  it('keeps the sentences people read (string literals over 100 characters) of src/connect/, src/auth/ and src/mcp/ (its tools/ included) in their messages.ts', () => {
    const FEATURES = ['src/connect/', 'src/auth/', 'src/mcp/'];
    const long = sources
      .filter((s) => FEATURES.some((f) => s.path.startsWith(f)))
      .flatMap((s) => {
        const at: string[] = [];
        walk(s.file, (n) => {
          const text =
            ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)
              ? n.text
              : ts.isTemplateExpression(n)
                ? n.getText(s.file)
                : undefined;
          if (text !== undefined && text.length > 100) at.push(`${s.path}:${s.file.getLineAndCharacterOfPosition(n.getStart()).line + 1}`);
          return !ts.isTemplateExpression(n);
        });
        return at;
      });
    assert.ok(
      long.some((l) => l.startsWith('src/connect/messages.ts:')),
      'the messages modules are scanned (the check is live)',
    );
    assert.deepEqual(
      long.filter((l) => !l.endsWith('messages.ts') && !/\/messages\.ts:/.test(l)),
      [],
    );
  });

  it('never redirects to a value read from req.query / req.body / request headers (open-redirect shape)', () => {
    const calls = sources.flatMap(redirectCalls);
    assert.ok(calls.length >= 5, `found only ${calls.length} redirect calls: the scan is not seeing the routes`);
    assert.deepEqual(
      calls.filter((c) => c.openRedirectShape).map((c) => `${c.at} ${c.text}`),
      [],
    );
  });
});
