import { writeFileSync } from 'node:fs';

/** Writes a PROVIDERS_FILE (YAML) at `path` from its lines; returns the path. */
export function writeYamlLines(path: string, lines: string[]): string {
  writeFileSync(path, lines.join('\n'));
  return path;
}
