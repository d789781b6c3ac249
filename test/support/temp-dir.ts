// A directory of a suite's own (a PROVIDERS_FILE, a SQLite file, a script), removed with everything
// in it when the suite or the test that made it is done.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useSuite } from './suite.js';

export interface TempDir {
  readonly path: string;
  /** The path of `name` inside it. */
  file(name: string): string;
  /** Removes it and everything in it. */
  close(): void;
}

/** A fresh directory under the OS temporary directory, its name starting with `prefix`. */
export function makeTempDir(prefix: string): TempDir {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, file: (name) => join(path, name), close: () => rmSync(path, { recursive: true, force: true }) };
}

/** `makeTempDir` for the enclosing `describe`: made before its first test, removed after its last. */
export function useTempDir(prefix: string): TempDir {
  return useSuite(`the temporary directory ${prefix}…`, async () => makeTempDir(prefix));
}
