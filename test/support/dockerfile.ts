// Reads the repository's Dockerfile into stages and instructions, so the tests can run its COPY and
// npm steps without a container engine (test/system/production-install.test.ts) and check the rest
// as text (base images, user, ownership, HEALTHCHECK, CMD).
import { cpSync, mkdirSync, readFileSync } from 'node:fs';
import { isAbsolute, join, posix } from 'node:path';

export interface Instruction {
  /** Upper-case keyword: FROM, RUN, COPY, … */
  keyword: string;
  /** The rest of the instruction, continuation lines joined with a space. */
  args: string;
  line: number;
}

export interface Stage {
  name: string;
  image: string;
  instructions: Instruction[];
}

export interface Copy {
  from: string | undefined;
  chown: string | undefined;
  sources: string[];
  destination: string;
}

export function readDockerfile(root: string): Stage[] {
  return parseDockerfile(readFileSync(join(root, 'Dockerfile'), 'utf8'));
}

export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const first = i;
    let logical = lines[i]!;
    if (/^\s*(#|$)/.test(logical)) continue;
    // A trailing backslash continues the instruction; comment lines inside it are dropped, as Docker does.
    while (/\\\s*$/.test(logical) && i + 1 < lines.length) {
      logical = logical.replace(/\\\s*$/, ' ');
      i++;
      if (!/^\s*#/.test(lines[i]!)) logical += lines[i]!.trim();
    }
    const match = /^\s*([A-Za-z]+)\s+(.*)$/.exec(logical);
    if (!match) throw new Error(`Dockerfile line ${first + 1}: not an instruction: ${logical}`);
    const instruction = { keyword: match[1]!.toUpperCase(), args: match[2]!.trim(), line: first + 1 };
    if (instruction.keyword === 'FROM') {
      const from = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(instruction.args);
      if (!from) throw new Error(`Dockerfile line ${first + 1}: FROM ${instruction.args}`);
      stages.push({ image: from[1]!, name: from[2] ?? String(stages.length), instructions: [] });
    } else {
      const stage = stages.at(-1);
      if (!stage) throw new Error(`Dockerfile line ${first + 1}: ${instruction.keyword} before any FROM`);
      stage.instructions.push(instruction);
    }
  }
  return stages;
}

export function stage(stages: Stage[], name: string): Stage {
  const found = stages.find((s) => s.name === name);
  if (!found) throw new Error(`the Dockerfile has no stage "${name}" (it has ${stages.map((s) => s.name).join(', ')})`);
  return found;
}

/** The last value of `keyword` in a stage (WORKDIR, USER, CMD, …). */
export function last(s: Stage, keyword: string): Instruction | undefined {
  return s.instructions.filter((i) => i.keyword === keyword).at(-1);
}

/** An exec-form argument list (`["node", "dist/main.js"]`), or undefined for the shell form. */
export function execForm(args: string): string[] | undefined {
  if (!args.startsWith('[')) return undefined;
  const parsed: unknown = JSON.parse(args);
  return Array.isArray(parsed) && parsed.every((a) => typeof a === 'string') ? (parsed as string[]) : undefined;
}

export function parseCopy(args: string): Copy {
  const words = args.split(/\s+/);
  const flags = new Map<string, string>();
  while (words[0]?.startsWith('--')) {
    const [flag, value] = words.shift()!.slice(2).split('=');
    flags.set(flag!, value ?? '');
  }
  const destination = words.pop();
  if (!destination || words.length === 0) throw new Error(`COPY ${args}: needs a source and a destination`);
  return { from: flags.get('from'), chown: flags.get('chown'), sources: words, destination };
}

/** ENV KEY=value pairs of a stage (the `KEY=value` form only; values without quotes or spaces). */
export function env(s: Stage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const i of s.instructions.filter((x) => x.keyword === 'ENV'))
    for (const pair of i.args.split(/\s+/)) {
      const eq = pair.indexOf('=');
      if (eq <= 0) throw new Error(`ENV on line ${i.line}: only KEY=value pairs are read here (got "${pair}")`);
      out[pair.slice(0, eq)] = pair.slice(eq + 1);
    }
  return out;
}

export interface Healthcheck {
  options: Record<string, string>;
  command: string[];
}

export function healthcheck(s: Stage): Healthcheck | undefined {
  const h = last(s, 'HEALTHCHECK');
  if (!h) return undefined;
  const at = h.args.indexOf('CMD ');
  if (at < 0) throw new Error(`HEALTHCHECK on line ${h.line} has no CMD`);
  const options = Object.fromEntries(
    h.args
      .slice(0, at)
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map((o) => o.replace(/^--/, '').split('=') as [string, string]),
  );
  const command = execForm(h.args.slice(at + 4).trim());
  if (!command) throw new Error(`HEALTHCHECK on line ${h.line}: CMD must be in exec form (["node", "-e", …])`);
  return { options, command };
}

export interface StageRun {
  /** The folder that stands for the stage's WORKDIR. */
  dir: string;
  /** The stage's ENV, as its last instruction left it. */
  env: Record<string, string>;
}

export interface BuildResult {
  stages: Map<string, StageRun>;
  /** RUN steps that were not run here (anything but npm: they touch the image's own file system), with their stage. */
  notRun: Array<{ stage: string; command: string }>;
}

/**
 * Runs each stage's COPY and `RUN npm …` steps in `<workRoot>/<stage>/`, which stands for the
 * stage's WORKDIR: COPY from the build context (`context`) or from an earlier stage's folder, `RUN`
 * through `sh -c` there with `env`. Nothing else is run; what was not is returned.
 */
export async function runStages(
  stages: Stage[],
  options: {
    context: string;
    workRoot: string;
    env: NodeJS.ProcessEnv;
    run: (command: string, cwd: string, env: NodeJS.ProcessEnv) => Promise<void>;
  },
): Promise<BuildResult> {
  const result: BuildResult = { stages: new Map(), notRun: [] };
  const workdirs = new Map<string, string>();
  for (const s of stages) {
    const dir = join(options.workRoot, s.name);
    mkdirSync(dir, { recursive: true });
    let workdir: string | undefined;
    const stageEnv: Record<string, string> = {};
    for (const i of s.instructions) {
      if (i.keyword === 'WORKDIR') {
        if (workdir !== undefined) throw new Error(`stage ${s.name}: one WORKDIR per stage is all this runner maps (line ${i.line})`);
        workdir = posix.normalize(i.args);
        workdirs.set(s.name, workdir);
      } else if (i.keyword === 'ENV') {
        Object.assign(stageEnv, env({ ...s, instructions: [i] }));
      } else if (i.keyword === 'COPY') {
        if (workdir === undefined) throw new Error(`stage ${s.name}: COPY before WORKDIR (line ${i.line})`);
        const copy = parseCopy(i.args);
        const target = join(dir, copy.destination);
        for (const source of copy.sources) {
          let from: string;
          if (copy.from === undefined) {
            if (isAbsolute(source) || source.includes('..')) throw new Error(`COPY on line ${i.line}: ${source} is outside the context`);
            from = join(options.context, source);
          } else {
            const other = result.stages.get(copy.from);
            const otherWorkdir = workdirs.get(copy.from);
            if (!other || !otherWorkdir) throw new Error(`COPY --from=${copy.from} on line ${i.line}: no earlier stage of that name`);
            const inside = posix.relative(otherWorkdir, posix.normalize(source));
            if (inside.startsWith('..')) throw new Error(`COPY --from=${copy.from} on line ${i.line}: ${source} is outside its WORKDIR`);
            from = join(other.dir, inside);
          }
          // `COPY a b ./` puts a and b into ./; `COPY src ./src` makes ./src the folder's copy.
          const into = copy.destination.endsWith('/') ? join(target, posix.basename(source)) : target;
          cpSync(from, into, { recursive: true });
        }
      } else if (i.keyword === 'RUN') {
        if (/^npm\s/.test(i.args)) await options.run(i.args, dir, { ...options.env, ...stageEnv });
        else result.notRun.push({ stage: s.name, command: i.args });
      }
    }
    result.stages.set(s.name, { dir, env: stageEnv });
  }
  return result;
}
