import { UrlElicitationRequiredError, type McpServer } from '@modelcontextprotocol/server';
import { metrics, type ToolOutcome } from './metrics.js';
import { activeSpan, recordFailure, SpanStatusCode } from './tracing.js';

/**
 * What a tool's answer was, in the four words of `broker_mcp_tool_calls_total`: asked the user for
 * something (a URL elicitation, either era, or the connect link in the result), an error, "nothing was done" after a decline or cancel
 * (`structuredContent.status` `not_connected` / `not_done`, see src/mcp/results.ts), or done.
 */
export function toolOutcome(result: unknown): ToolOutcome {
  const r = (result ?? {}) as { resultType?: unknown; isError?: unknown; structuredContent?: { status?: unknown; connect_url?: unknown } };
  if (r.resultType === 'input_required' || typeof r.structuredContent?.connect_url === 'string') return 'input_required';
  if (r.isError === true) return 'error';
  const status = r.structuredContent?.status;
  if (status === 'not_connected' || status === 'not_done') return 'declined';
  return 'complete';
}

/**
 * Counts every call of every tool `server` registers from here on, by the registered name (our own
 * code's, never the client's) and outcome: what the tool itself answered or threw (a store outage,
 * thrown, is an error). With tracing on, the same name and outcome go on the request's span.
 */
export function countToolCalls(server: McpServer): void {
  const register = server.registerTool.bind(server);
  server.registerTool = ((...args: unknown[]) => {
    const name = String(args[0]);
    const callback = args.at(-1) as (...a: unknown[]) => unknown;
    args[args.length - 1] = async (...a: unknown[]) => {
      const span = activeSpan();
      span?.setAttribute('gen_ai.tool.name', name);
      let outcome: ToolOutcome;
      try {
        const result = await callback(...a);
        outcome = toolOutcome(result);
        if (outcome === 'error') span?.setStatus({ code: SpanStatusCode.ERROR });
        return result;
      } catch (err) {
        outcome = err instanceof UrlElicitationRequiredError ? 'input_required' : 'error';
        if (span && outcome === 'error') recordFailure(span, err);
        throw err;
      } finally {
        metrics.toolCall(name, outcome!);
        span?.setAttribute('broker.tool.outcome', outcome!);
      }
    };
    return (register as (...a: unknown[]) => ReturnType<typeof register>)(...args);
  }) as typeof server.registerTool;
}
