// @modelcontextprotocol/server-everything, a real third-party MCP server, in its Streamable HTTP
// mode (2025-11-25, sessionful: initialize, then Mcp-Session-Id) as a child process on a free
// loopback port, for the gateway's pass-through tests.
//
// It listens on every interface by itself (`app.listen(PORT)`), so a preload given to its node
// binds it to 127.0.0.1 instead. It prints a line per request on stdout and its own messages on
// stderr; the last of both are kept for failure messages. close() ends its process group (it and
// any child it started), SIGTERM first, SIGKILL if it lingers.
import { spawn } from 'node:child_process';
import { killGroupOnExit, stopGroup } from './node-process.js';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../src/dev/free-port.js';

const ENTRY = fileURLToPath(new URL('../../node_modules/@modelcontextprotocol/server-everything/dist/index.js', import.meta.url));
const KEEP_CHARS = 16_000;

/** Runs in the child before the server: a listen(port[, cb]) without a host binds 127.0.0.1. */
export const LOOPBACK_ONLY = `
import net from 'node:net';
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if ((typeof port === 'number' || (typeof port === 'string' && /^[0-9]+$/.test(port))) && typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  return listen.apply(this, args);
};
`;

export interface EverythingServer {
  /** http://127.0.0.1:<port>/mcp */
  url: string;
  port: number;
  pid: number;
  /** The last of what it wrote to stderr (its own messages: start-up, errors). */
  stderr(): string;
  /** The last of what it wrote to stdout (a line per request). */
  stdout(): string;
  /** Ends it and its children; resolves once it has exited. */
  close(): Promise<void>;
}

export interface EverythingOptions {
  /** How long to wait for it to answer HTTP (default 20 s: the machine is shared). */
  startTimeoutMs?: number;
  /** More environment for the child (PORT is set by the fixture). */
  env?: Record<string, string>;
}

function tail(buffer: { text: string }, chunk: Buffer): void {
  buffer.text = (buffer.text + chunk.toString('utf8')).slice(-KEEP_CHARS);
}

/** One attempt on one port: resolves when it answers HTTP, rejects (with its stderr) when it exits or times out. */
async function startOn(port: number, options: EverythingOptions): Promise<EverythingServer> {
  const child = spawn(process.execPath, [`--import=data:text/javascript,${encodeURIComponent(LOOPBACK_ONLY)}`, ENTRY, 'streamableHttp'], {
    env: { PATH: process.env.PATH ?? '', ...options.env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // its own process group, so close() reaches its children too
  });
  // A test that crashes or forgets close() still leaves nothing running: its group goes with this process.
  killGroupOnExit(child);
  const out = { text: '' };
  const err = { text: '' };
  child.stdout!.on('data', (c: Buffer) => tail(out, c));
  child.stderr!.on('data', (c: Buffer) => tail(err, c));
  const url = `http://127.0.0.1:${port}/mcp`;
  const server: EverythingServer = {
    url,
    port,
    pid: child.pid!,
    stderr: () => err.text,
    stdout: () => out.text,
    close: () => stopGroup(child),
  };

  const deadline = Date.now() + (options.startTimeoutMs ?? 20_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`server-everything exited (${child.exitCode ?? child.signalCode}) before answering on ${url}; stderr:\n${err.text}`);
    try {
      // Any HTTP answer means it serves (a GET without a session is its 400).
      await fetch(url, { signal: AbortSignal.timeout(1000) });
      return server;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stopGroup(child);
      throw new Error(`server-everything did not answer on ${url} within ${options.startTimeoutMs ?? 20_000} ms; stderr:\n${err.text}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Starts server-everything on a free 127.0.0.1 port and waits until it answers. A free port can be
 * taken between choosing and binding it: then it tries another one (three attempts).
 */
export async function startEverything(options: EverythingOptions = {}): Promise<EverythingServer> {
  let last: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOn(await freePort(), options);
    } catch (error) {
      last = error;
      if (!String((error as Error).message).includes('already in use')) throw error;
    }
  }
  throw last;
}
