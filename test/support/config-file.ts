import { writeFileSync } from 'node:fs';

/** Writes a PROVIDERS_FILE (YAML) at `path` from its lines; returns the path. */
export function writeYamlLines(path: string, lines: string[]): string {
  writeFileSync(path, lines.join('\n'));
  return path;
}

/** A `services:` entry (its YAML lines) for a service that authenticates with client_secret_basic (its secret from SERVICE_<ID>_SECRET). */
export function secretBasicServiceLines(service: { id: string; audience: string; allow: Record<string, string[]> }): string[] {
  const allow = Object.entries(service.allow).map(([provider, scopes]) => `${provider}: [${scopes.join(', ')}]`);
  return [
    `  - id: ${service.id}`,
    `    audiences: [${service.audience}]`,
    '    auth: client_secret_basic',
    `    allow: { ${allow.join(', ')} }`,
  ];
}
