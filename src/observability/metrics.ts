/**
 * The broker's Prometheus metrics (prom-client), under the names issue 14 fixed so dashboards can be
 * shared. One registry per process: every part of the broker counts into it through the one-line
 * helpers of {@link metrics}; `/metrics` (src/observability/endpoint.ts) serves it.
 *
 * Labels never carry a user, a token or an argument: only route patterns, status codes, our own
 * tool names, configured provider/service/upstream ids and fixed outcome words. Each label keeps at
 * most {@link MAX_DISTINCT} distinct values; past that a value is counted as `other`.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export type ToolOutcome = 'complete' | 'input_required' | 'error' | 'declined';
export type ConnectFlowOutcome = 'started' | 'completed' | 'cancelled' | 'denied' | 'failed' | 'refused';
export type RefreshOutcome = 'refreshed' | 'rejected' | 'failed';
/** `granted`, `interaction_required`, `denied`, an RFC 6749 error code (`invalid_client`, …) or `error`. */
export type ExchangeOutcome = string;
/** What the gateway reports: `ok`, `error`, `timeout`, `unauthorized`, … (a fixed word of its own). */
export type UpstreamOutcome = string;

export const MAX_DISTINCT = 100;
const SAFE_LABEL = /^[A-Za-z0-9/][A-Za-z0-9_.:/-]{0,199}$/;

export const registry = new Registry();

let processMetrics = false;
/**
 * prom-client's default Node process metrics (CPU, memory, event-loop lag, GC), started once the
 * process serves `/metrics`: the event-loop monitor and the GC observer cost something on every
 * request, so a broker whose metrics are off does not run them.
 */
export function collectProcessMetrics(): void {
  if (processMetrics) return;
  processMetrics = true;
  collectDefaultMetrics({ register: registry });
}

const registers = [registry];

/** A counter in the broker's registry with these labels (each value passed through {@link bounded} by its helper). */
const labelledCounter = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
  new Counter<L>({ name, help, labelNames, registers });

const httpRequests = labelledCounter('broker_http_requests_total', 'HTTP requests answered, by Express route pattern and status code.', [
  'route',
  'status',
]);
const toolCalls = labelledCounter(
  'broker_mcp_tool_calls_total',
  'MCP tools/call requests, by tool and outcome (complete, input_required, error, declined).',
  ['tool', 'outcome'],
);
const connectFlows = labelledCounter(
  'broker_connect_flows_total',
  'Connect flow steps, by provider and outcome (started, completed, cancelled, denied, failed, refused).',
  ['provider', 'outcome'],
);
const tokenRefreshes = labelledCounter(
  'broker_token_refreshes_total',
  'Provider token refreshes this instance asked for, by provider and outcome (refreshed, rejected, failed).',
  ['provider', 'outcome'],
);
const heldRepeats = new Gauge({
  name: 'broker_held_repeats',
  help: 'Repeated tool calls (and token exchanges) held right now while their user is in the browser.',
  registers,
});
const holdDuration = new Histogram({
  name: 'broker_hold_duration_seconds',
  help: 'How long a held repeat waited for its connect flow.',
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 50],
  registers,
});
const tokenExchanges = labelledCounter(
  'broker_token_exchanges_total',
  'RFC 8693 token exchanges at /oauth/token, by service and outcome.',
  ['service', 'outcome'],
);
const upstreamCalls = labelledCounter(
  'broker_upstream_calls_total',
  'Calls the gateway made to upstream MCP servers, by upstream and outcome.',
  ['upstream', 'outcome'],
);
const upstreamDuration = new Histogram({
  name: 'broker_upstream_call_duration_seconds',
  help: 'How long calls to upstream MCP servers took, by upstream.',
  labelNames: ['upstream'] as const,
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers,
});
const storeErrors = new Counter({
  name: 'broker_store_errors_total',
  help: 'Store operations that failed because the database could not be reached or did not answer in time.',
  registers,
});

/** Sources of the open pending connection count, one per broker in this process (a test may run several). */
const pendingSources = new Set<() => Promise<number>>();
new Gauge({
  name: 'broker_pending_connections_open',
  help: 'Pending connections (connect links) open or being authorized, unexpired, read from the store at scrape time.',
  registers,
  async collect() {
    let total = 0;
    for (const count of pendingSources) total += await count().catch(() => 0);
    this.set(total);
  },
});

const seen = new Map<string, Set<string>>();

/** `value` as a label of kind `kind`: a safe token, one of at most MAX_DISTINCT per kind, else `other`. */
function bounded(kind: string, value: string): string {
  if (!SAFE_LABEL.test(value)) return 'other';
  let values = seen.get(kind);
  if (!values) seen.set(kind, (values = new Set()));
  if (values.has(value)) return value;
  if (values.size >= MAX_DISTINCT) return 'other';
  values.add(value);
  return value;
}

export const metrics = {
  /** One answered HTTP request; `route` is the Express route pattern (src/http/request-log.ts). */
  httpRequest(route: string, status: number): void {
    httpRequests.inc({ route: bounded('route', route), status: String(status) });
  },
  /** A tools/call; `tool` is a registered tool's name, or `unknown` for any other name. */
  toolCall(tool: string, outcome: ToolOutcome): void {
    toolCalls.inc({ tool: bounded('tool', tool), outcome });
  },
  connectFlow(provider: string, outcome: ConnectFlowOutcome): void {
    connectFlows.inc({ provider: bounded('provider', provider), outcome });
  },
  tokenRefresh(provider: string, outcome: RefreshOutcome): void {
    tokenRefreshes.inc({ provider: bounded('provider', provider), outcome });
  },
  /** A held repeat starts: returns the function to call when it ends (it observes the duration). */
  holdStarted(): () => void {
    heldRepeats.inc();
    const end = holdDuration.startTimer();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      heldRepeats.dec();
      end();
    };
  },
  /** A token exchange answered; `service` is a declared service's id, or `unknown` before one authenticated. */
  tokenExchange(service: string, outcome: ExchangeOutcome): void {
    tokenExchanges.inc({ service: bounded('service', service), outcome: bounded('exchange_outcome', outcome) });
  },
  /** For the gateway: one call to an upstream MCP server, its outcome word and how long it took. */
  upstreamCall(upstream: string, outcome: UpstreamOutcome, seconds: number): void {
    const u = bounded('upstream', upstream);
    upstreamCalls.inc({ upstream: u, outcome: bounded('upstream_outcome', outcome) });
    upstreamDuration.observe({ upstream: u }, seconds);
  },
  storeError(): void {
    storeErrors.inc();
  },
  /** Counts `source` (a store's open pending connections) at each scrape until the returned function is called. */
  countPendingFrom(source: () => Promise<number>): () => void {
    pendingSources.add(source);
    return () => void pendingSources.delete(source);
  },
};
