import { parseArgs } from 'node:util';
import type { ConnectionStatus, Owner } from '../../store/index.js';
import { USAGE, type HelpTopic } from './messages.js';

export type AdminCommand =
  | { kind: 'help'; topic: HelpTopic }
  | { kind: 'connections list'; owner?: Owner; provider?: string; status?: ConnectionStatus; json: boolean }
  | { kind: 'connections revoke'; owner: Owner; provider: string; json: boolean }
  | { kind: 'audit export'; owner?: Owner; since?: number }
  | { kind: 'audit prune'; olderThanDays?: number; json: boolean }
  | { kind: 'audit verify'; heads?: string; json: boolean }
  | { kind: 'pending prune'; json: boolean }
  | { kind: 'upstreams reset-registration'; upstream: string; json: boolean }
  | { kind: 'stats'; json: boolean }
  | {
      kind: 'policy test';
      as: Owner;
      tool: string;
      args: unknown;
      claims: Record<string, unknown>;
      client: string;
      service: string;
      provider?: string;
      account: string;
      annotations: Record<string, unknown>;
      json: boolean;
    };

/** Bad usage: exit 2 with this one line. */
export class UsageError extends Error {
  override name = 'UsageError';
}

type OptionSpec = Record<string, { type: 'string' | 'boolean' }>;

const GROUPS: Record<string, readonly string[]> = {
  connections: ['list', 'revoke'],
  audit: ['export', 'prune', 'verify'],
  pending: ['prune'],
  upstreams: ['reset-registration'],
  policy: ['test'],
};
const JSON_FLAG: OptionSpec = { json: { type: 'boolean' } };
const USER: OptionSpec = { user: { type: 'string' } };
const DURATION = /^(\d{1,9})(s|m|h|d|w)$/;
const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };
// A calendar date (UTC midnight), or an instant with its offset: a time without a zone would be read in the machine's.
const ISO_DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/;

/** What the arguments ask for; `now` anchors `--since` durations. */
export function parseAdminArgs(argv: readonly string[], now = Date.now()): AdminCommand {
  const [group, ...afterGroup] = argv;
  if (group === undefined) throw new UsageError(USAGE.noCommand);
  if (group === '--help' || group === '-h' || group === 'help') return helpFor(afterGroup);
  if (group === 'stats') return stats(afterGroup);
  const subcommands = GROUPS[group];
  if (!subcommands) throw new UsageError(USAGE.unknownCommand(group));
  const [sub, ...rest] = afterGroup;
  if (sub === undefined || sub === '--help' || sub === '-h') {
    if (sub === undefined) throw new UsageError(USAGE.missingArguments(subcommands.map((s) => `"${s}"`).join(' or '), group));
    return { kind: 'help', topic: group as HelpTopic };
  }
  const name = `${group} ${sub}`;
  if (!subcommands.includes(sub)) throw new UsageError(USAGE.unknownCommand(name));
  switch (name) {
    case 'connections list': {
      const a = parse(name, rest, { ...USER, provider: { type: 'string' }, status: { type: 'string' }, ...JSON_FLAG }, []);
      if (a.help) return { kind: 'help', topic: name };
      const status = a.strings.status;
      if (status !== undefined && status !== 'active' && status !== 'reauth_required') throw new UsageError(USAGE.status(status));
      return {
        kind: name,
        ...(a.owner ? { owner: a.owner } : {}),
        ...(a.strings.provider !== undefined ? { provider: nonEmpty('--provider', a.strings.provider) } : {}),
        ...(status ? { status } : {}),
        json: a.json,
      };
    }
    case 'connections revoke': {
      const a = parse(name, rest, JSON_FLAG, ['<iss>', '<sub>', '<provider>']);
      if (a.help) return { kind: 'help', topic: name };
      const [issuer, subject, provider] = a.positionals as [string, string, string];
      return {
        kind: name,
        owner: { issuer: nonEmpty('<iss>', issuer), subject: nonEmpty('<sub>', subject) },
        provider: nonEmpty('<provider>', provider),
        json: a.json,
      };
    }
    case 'audit export': {
      const a = parse(name, rest, { ...USER, since: { type: 'string' } }, []);
      if (a.help) return { kind: 'help', topic: name };
      return {
        kind: name,
        ...(a.owner ? { owner: a.owner } : {}),
        ...(a.strings.since !== undefined ? { since: parseSince(a.strings.since, now) } : {}),
      };
    }
    case 'audit prune': {
      const a = parse(name, rest, { 'older-than-days': { type: 'string' }, ...JSON_FLAG }, []);
      if (a.help) return { kind: 'help', topic: name };
      const days = a.strings['older-than-days'];
      return { kind: name, ...(days !== undefined ? { olderThanDays: retentionDays(days) } : {}), json: a.json };
    }
    case 'audit verify': {
      const a = parse(name, rest, { heads: { type: 'string' }, ...JSON_FLAG }, []);
      if (a.help) return { kind: 'help', topic: name };
      const heads = a.strings.heads;
      return { kind: name, ...(heads !== undefined ? { heads: nonEmpty('--heads', heads) } : {}), json: a.json };
    }
    case 'upstreams reset-registration': {
      const a = parse(name, rest, JSON_FLAG, ['<id>']);
      if (a.help) return { kind: 'help', topic: name };
      return { kind: name, upstream: nonEmpty('<id>', a.positionals[0]!), json: a.json };
    }
    case 'policy test': {
      const text = (n: string) => ({ [n]: { type: 'string' as const } });
      const spec = {
        as: { type: 'string' as const },
        ...text('tool'),
        ...text('args'),
        ...text('claims'),
        ...text('client'),
        ...text('service'),
        ...text('provider'),
        ...text('account'),
        ...text('annotations'),
        ...JSON_FLAG,
      };
      const a = parse(name, rest, spec, []);
      if (a.help) return { kind: 'help', topic: name };
      if (!a.owner) throw new UsageError(USAGE.missingArguments('--as <iss> <sub>', name));
      const { strings: s } = a;
      return {
        kind: name,
        as: a.owner,
        tool: s.tool ?? '',
        args: jsonOption('--args', s.args, {}),
        claims: jsonObject('--claims', s.claims),
        client: s.client ?? '',
        service: s.service ?? '',
        ...(s.provider !== undefined ? { provider: s.provider } : {}),
        account: s.account ?? '',
        annotations: jsonObject('--annotations', s.annotations),
        json: a.json,
      };
    }
    default: {
      const a = parse(name, rest, JSON_FLAG, []);
      if (a.help) return { kind: 'help', topic: 'pending prune' };
      return { kind: 'pending prune', json: a.json };
    }
  }
}

function helpFor(rest: readonly string[]): AdminCommand {
  const topic = rest.filter((x) => !x.startsWith('-')).join(' ');
  if (!topic) return { kind: 'help', topic: 'top' };
  if (!isTopic(topic)) throw new UsageError(USAGE.unknownCommand(topic));
  return { kind: 'help', topic };
}

function isTopic(value: string): value is HelpTopic {
  return [
    'connections',
    'connections list',
    'connections revoke',
    'audit',
    'audit export',
    'audit prune',
    'audit verify',
    'pending',
    'pending prune',
    'upstreams',
    'upstreams reset-registration',
    'policy',
    'policy test',
    'stats',
  ].includes(value);
}

function stats(rest: readonly string[]): AdminCommand {
  const a = parse('stats', rest, JSON_FLAG, []);
  return a.help ? { kind: 'help', topic: 'stats' } : { kind: 'stats', json: a.json };
}

interface Parsed {
  help: boolean;
  json: boolean;
  strings: Record<string, string>;
  owner?: Owner;
  positionals: string[];
}

/**
 * parseArgs in its lenient mode, for its tokens: the checks are ours, so each refusal names the
 * option or argument at fault in one line. `--user` takes two values, the issuer and the next
 * positional (the subject).
 */
function parse(command: string, args: readonly string[], spec: OptionSpec, required: readonly string[]): Parsed {
  const options = { ...spec, help: { type: 'boolean' as const, short: 'h' } };
  const { tokens } = parseArgs({ args: [...args], options, allowPositionals: true, strict: false, tokens: true });
  const out: Parsed = { help: false, json: false, strings: {}, positionals: [] };
  const seen = new Set<string>();
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token.kind === 'option-terminator') continue;
    if (token.kind === 'positional') {
      out.positionals.push(token.value);
      continue;
    }
    const type = (options as OptionSpec)[token.name]?.type;
    if (!type) throw new UsageError(USAGE.unknownOption(token.rawName, command));
    if (seen.has(token.name)) throw new UsageError(USAGE.twice(token.rawName));
    seen.add(token.name);
    if (type === 'boolean') {
      if (token.value !== undefined) throw new UsageError(USAGE.takesNoValue(token.rawName));
      if (token.name === 'help') out.help = true;
      else if (token.name === 'json') out.json = true;
      continue;
    }
    // `--provider --json` is a forgotten value, not a provider named "--json".
    if (token.value === undefined || (!token.inlineValue && token.value.startsWith('--')))
      throw new UsageError(USAGE.needsValue(token.rawName));
    if (token.name !== 'user' && token.name !== 'as') {
      out.strings[token.name] = token.value;
      continue;
    }
    let next = tokens[i + 1];
    if (next?.kind === 'option-terminator') next = tokens[++i + 1];
    if (next?.kind !== 'positional') throw new UsageError(token.name === 'as' ? USAGE.asNeedsTwo : USAGE.userNeedsTwo);
    i++;
    out.owner = { issuer: nonEmpty(`--${token.name} <iss>`, token.value), subject: nonEmpty(`--${token.name} <sub>`, next.value) };
  }
  if (out.help) return out;
  if (out.positionals.length > required.length) throw new UsageError(USAGE.extraArgument(out.positionals[required.length]!, command));
  if (out.positionals.length < required.length)
    throw new UsageError(USAGE.missingArguments(required.slice(out.positionals.length).join(' '), command));
  return out;
}

/** A JSON option's value (`fallback` when absent). */
function jsonOption(name: string, value: string | undefined, fallback: unknown): unknown {
  if (value === undefined) return fallback;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    throw new UsageError(USAGE.notJson(name));
  }
}

function jsonObject(name: string, value: string | undefined): Record<string, unknown> {
  const parsed = jsonOption(name, value, {});
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new UsageError(USAGE.notJsonObject(name));
  return parsed as Record<string, unknown>;
}

function nonEmpty(name: string, value: string): string {
  if (value.trim() === '') throw new UsageError(USAGE.empty(name));
  return value;
}

/** `--older-than-days`: whole days, as AUDIT_RETENTION_DAYS takes them but never 0 (that keeps everything: nothing to prune). */
function retentionDays(value: string): number {
  const days = /^\d{1,4}$/.test(value) ? Number(value) : NaN;
  if (!(days >= 1 && days <= 3650)) throw new UsageError(USAGE.olderThanDays(value));
  return days;
}

/** `--since`: an ISO 8601 date or instant, or a duration back from `now`; epoch ms. */
export function parseSince(value: string, now: number): number {
  const duration = DURATION.exec(value);
  if (duration) return now - Number(duration[1]) * UNIT_MS[duration[2]!]!;
  const at = ISO_DATE.test(value) ? Date.parse(value) : NaN;
  if (!Number.isFinite(at)) throw new UsageError(USAGE.since(value));
  return at;
}
