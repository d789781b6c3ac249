import type { Server } from '@modelcontextprotocol/server';

// The one place the broker reaches into the SDK's private members (test/layering.test.ts holds
// that). @modelcontextprotocol/server 2.4 validates every tools/call result against its content
// types, with no public switch; an upstream's result must pass through unchanged (a newer content
// block, or an extra field on a known one, would otherwise be refused or dropped).

type Handler = (request: unknown, ctx: unknown) => Promise<unknown>;
interface ServerInternals {
  _wrapHandler(method: string, handler: Handler): Handler;
  _invokeInputRequiredCapableHandler(method: string, handler: Handler, request: unknown, ctx: unknown): Promise<unknown>;
}

/**
 * Makes `server` answer tools/call with its handler's result as it is: the input-required path
 * (requestState verification, capability checks) still runs, only the result validation is
 * skipped. Throws, naming the SDK, when its internals are not the ones this was written against,
 * so an upgrade fails at the first request (and in test/sdk-result-passthrough.test.ts), never silently.
 */
export function passToolResultsThrough(server: Server): void {
  const internals = server as unknown as ServerInternals;
  if (typeof internals._wrapHandler !== 'function' || typeof internals._invokeInputRequiredCapableHandler !== 'function')
    throw new Error('@modelcontextprotocol/server changed its internals: the gateway cannot pass upstream results through');
  const wrap = internals._wrapHandler.bind(server);
  internals._wrapHandler = (method, handler) =>
    method === 'tools/call'
      ? (request, ctx) => internals._invokeInputRequiredCapableHandler.call(server, 'tools/call', handler, request, ctx)
      : wrap(method, handler);
}
