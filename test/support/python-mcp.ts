// The Python `mcp` 2.3.0 client for the suites that drive the broker from Python: a venv in the
// test's own temp folder with mcp==2.3.0 installed by pip, or a clean skip where this machine has
// no venv module or no package index.
import { spawnSync } from 'node:child_process';
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
