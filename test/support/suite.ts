// One way for a suite to own what it starts: `useStack(options)` inside a `describe` registers the
// `before` that starts the stack and the `after` that closes it, and returns a handle that stands
// for the stack from the first test on (CONTRIBUTING.md, "How to write a suite"). `useMultiStack`
// (brokers as processes) lives in multi.ts, so that only test/system/ suites reach it.
import type { Client } from '@modelcontextprotocol/client';
import { after, before } from 'node:test';
import { modernClient, type ModernClientOptions } from './mcp.js';
import { startStack, type Stack, type StackOptions } from './stack.js';

type Closable = { close(): Promise<void> | void };
/** Options now, or a function that computes them when the suite starts (e.g. from another fixture). */
export type Deferred<T> = T | (() => T | Promise<T>);

/**
 * Starts `start()` before the suite's first test and closes it after its last (only if it started).
 * The returned handle reads through to what `start` gave; reading it before then throws, naming the
 * fixture, instead of failing later on an `undefined`.
 */
export function useSuite<T extends Closable>(name: string, start: () => Promise<T>, hook: { timeout?: number } = {}): T {
  let started: T | undefined;
  before(async () => {
    started = await start();
  }, hook);
  after(async () => {
    await started?.close();
  });
  return new Proxy({} as T, {
    get(_, key) {
      if (started === undefined) {
        if (typeof key === 'symbol') return undefined;
        throw new Error(`${name} is read before the suite started it (use it inside a test or a hook)`);
      }
      const value: unknown = Reflect.get(started, key, started);
      return typeof value === 'function' ? value.bind(started) : value;
    },
    has: (_, key) => started !== undefined && key in started,
  });
}

/** Closes each part in turn, in the order given (what depends on another closes before it). */
export async function closeInOrder(...parts: Closable[]): Promise<void> {
  for (const part of parts) await part.close();
}

/** A stand-in for what `get()` returns at each read (fields, getters, methods bound to it): for one part of a `useSuite` fixture. */
export function readThrough<T extends object>(get: () => T): T {
  return new Proxy({} as T, {
    get(_, key) {
      const target = get();
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
    has: (_, key) => key in get(),
  });
}

export const resolveDeferred = async <T>(options: Deferred<T>): Promise<T> =>
  typeof options === 'function' ? (options as () => T | Promise<T>)() : options;

/** The IdP, the GitHub stand-in and an in-process broker (`startStack`) for the enclosing `describe`. */
export function useStack(options: Deferred<StackOptions> = {}, hook: { timeout?: number } = {}): Stack {
  return useSuite('the stack', async () => startStack(await resolveDeferred(options)), hook);
}

/** The 2026-07-28 SDK client (`modernClient`) on the stack's `/mcp`, signed in as `sub`. */
export async function clientAs(
  stack: Pick<Stack, 'mcpUrl' | 'token'>,
  sub: string,
  options: Omit<ModernClientOptions, 'url' | 'token'> = {},
): Promise<Client> {
  return modernClient({ url: stack.mcpUrl, token: await stack.token(sub), ...options });
}
