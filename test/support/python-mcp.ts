// The Python `mcp` 2.3.0 client for the suites that drive the broker from Python: a venv in the
// test's own temp folder with mcp==2.3.0 installed by pip, or a clean skip where this machine has
// no venv module or no package index.
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The fixture script (test/fixtures/python-mcp-client.py); see its docstring for the protocol. */
export const PYTHON_MCP_CLIENT = fileURLToPath(new URL('../fixtures/python-mcp-client.py', import.meta.url));

/**
 * Makes a venv under `dir` with mcp==2.3.0; returns its python, or the reason it could not (the
 * caller skips with it).
 */
export function pythonMcpClient(dir: string): { python: string } | { skip: string } {
  const venv = join(dir, 'py');
  const made = spawnSync('python3', ['-m', 'venv', venv], { timeout: 60_000, encoding: 'utf8' });
  if (made.status !== 0)
    return { skip: `no Python venv on this machine (${(made.stderr || made.error?.message || '').trim().slice(0, 120)})` };
  const pip = spawnSync(
    join(venv, 'bin', 'pip'),
    ['install', '--disable-pip-version-check', '--timeout', '10', '--retries', '0', 'mcp==2.3.0'],
    { timeout: 90_000, encoding: 'utf8' },
  );
  if (pip.status !== 0)
    return {
      skip: `pip could not install mcp==2.3.0 (no package index reachable from this machine): ${(pip.stderr || pip.error?.message || '').trim().split('\n').at(-1) ?? ''}`,
    };
  return { python: join(venv, 'bin', 'python') };
}

export interface PythonClientRun {
  /** The client's exit code (0: the call was made and its result printed). */
  code: number | null;
  /** What it printed on stdout and stderr. */
  out: string;
  err: string;
  /** The URL elicitations it was given, each once, in order. */
  links: string[];
  /** The tool result it printed (`RESULT <json>`); throws if there is none. */
  result(): unknown;
}

/**
 * Runs the fixture client with `python` (from {@link pythonMcpClient}) until it exits: it calls
 * `tool` (the fixture's default: create_issue) with `args` on `url` as `token`; each new URL
 * elicitation goes to `onLink`, and the client is told to accept once that has settled.
 */
export async function runPythonMcpClient(
  python: string,
  options: {
    url: string;
    token: string;
    tool?: string;
    args: unknown;
    onLink: (url: string) => Promise<unknown>;
    /** Declare no elicitation: the link comes in the tool result, and the client calls again. */
    noElicitation?: boolean;
  },
): Promise<PythonClientRun> {
  const child = spawn(python, [PYTHON_MCP_CLIENT], {
    env: {
      PATH: process.env.PATH ?? '',
      MCP_URL: options.url,
      MCP_TOKEN: options.token,
      ...(options.tool ? { MCP_TOOL: options.tool } : {}),
      MCP_ARGS: JSON.stringify(options.args),
      ...(options.noElicitation ? { MCP_NO_ELICITATION: '1' } : {}),
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const links: string[] = [];
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    for (const m of out.matchAll(/^URL (\S+)$/gm)) {
      if (links.includes(m[1]!)) continue;
      links.push(m[1]!);
      void options.onLink(m[1]!).then(() => child.stdin.write('accept\n'));
    }
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, out, err, links, result: () => JSON.parse(/^RESULT (.*)$/m.exec(out)![1]!) as unknown };
}
