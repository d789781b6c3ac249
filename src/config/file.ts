import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { ConfigError } from './errors.js';

/** The sections PROVIDERS_FILE may hold, each optional. */
export const CONFIG_FILE_SECTIONS = ['providers', 'services', 'upstreams', 'builtinTools', 'webhooks', 'policy'] as const;
export type ConfigFileSection = (typeof CONFIG_FILE_SECTIONS)[number];

/** PROVIDERS_FILE parsed (YAML or JSON), with one-line errors. */
export function readConfigFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new ConfigError(`PROVIDERS_FILE cannot be read (${path})`);
  }
  let data: unknown;
  try {
    data = /\.ya?ml$/i.test(path) ? parseYaml(text) : JSON.parse(text);
  } catch (err) {
    throw new ConfigError(
      `PROVIDERS_FILE is not valid ${/\.ya?ml$/i.test(path) ? 'YAML' : 'JSON'}: ${err instanceof Error ? err.message.split('\n')[0] : ''}`,
    );
  }
  return data;
}

/**
 * The one place that decides which sections PROVIDERS_FILE holds: a bare list is the providers
 * (the file's first format); an object holds any subset of {@link CONFIG_FILE_SECTIONS}, each left
 * undefined when absent. An object with none of them is refused, since it configures nothing.
 */
export function readConfigSections(path: string): Partial<Record<ConfigFileSection, unknown>> {
  const data = readConfigFile(path);
  if (Array.isArray(data)) return { providers: data };
  const object = typeof data === 'object' && data !== null ? (data as Record<string, unknown>) : {};
  // A misspelt section would be ignored, and what it configures silently missing: name it.
  const unknown = Object.keys(object).filter((key) => !(CONFIG_FILE_SECTIONS as readonly string[]).includes(key));
  if (unknown.length > 0) {
    const named = unknown.map((key) => {
      const close = CONFIG_FILE_SECTIONS.find((name) => editDistance(key.toLowerCase(), name) <= 2);
      return `"${key}"${close ? ` (did you mean "${close}"?)` : ''}`;
    });
    throw new ConfigError(
      `PROVIDERS_FILE has unknown top-level ${unknown.length === 1 ? 'key' : 'keys'} ${named.join(', ')}; it may hold ${CONFIG_FILE_SECTIONS.map((s) => `"${s}"`).join(', ')}`,
    );
  }
  const sections: Partial<Record<ConfigFileSection, unknown>> = {};
  for (const name of CONFIG_FILE_SECTIONS) if (object[name] !== undefined) sections[name] = object[name];
  if (Object.keys(sections).length === 0)
    throw new ConfigError(
      `PROVIDERS_FILE must hold a list of providers, or an object with any of ${CONFIG_FILE_SECTIONS.map((s) => `"${s}"`).join(', ')}`,
    );
  return sections;
}

/** One line naming the entry and the field: `PROVIDERS_FILE services.issue-bot.allow: …`. */
export function entryProblem(named: string, issue: { path: readonly PropertyKey[]; message: string }): never {
  throw new ConfigError(`PROVIDERS_FILE ${named}${issue.path.length ? `.${issue.path.map(String).join('.')}` : ''}: ${issue.message}`);
}

/**
 * Each entry of a list section (`services`, `webhooks`, `upstreams`), parsed by `schema` and handed
 * in order to `each` with its name for messages: `<section>.<id>`, or `<section>[<i>]` while it has
 * no id. A section that is no list, an entry's first schema problem and an id declared twice are
 * each one {@link entryProblem} line. Nothing is done for an absent section.
 */
export function forEachEntry<S extends z.ZodType<{ id: string }>>(
  section: ConfigFileSection,
  list: unknown,
  schema: S,
  each: (entry: z.output<S>, named: string) => void,
): void {
  if (list === undefined) return;
  if (!Array.isArray(list)) throw new ConfigError(`PROVIDERS_FILE ${section} must be a list`);
  const ids = new Set<string>();
  list.forEach((input: unknown, i) => {
    const id = (input as { id?: unknown } | null)?.id;
    const named = typeof id === 'string' ? `${section}.${id}` : `${section}[${i}]`;
    const parsed = schema.safeParse(input);
    if (!parsed.success) entryProblem(named, parsed.error.issues[0]!);
    if (ids.has(parsed.data.id)) entryProblem(named, { path: [], message: 'the id is declared twice' });
    ids.add(parsed.data.id);
    each(parsed.data, named);
  });
}

/** Levenshtein distance, for "did you mean" (short keys only). */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next.push(Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    row = next;
  }
  return row[b.length]!;
}
