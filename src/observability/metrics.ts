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
import { METRIC_HELP, type MetricName } from './messages.js';

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

/** A metric's name and its help text (messages.ts). */
const named = (name: MetricName) => ({ name, help: METRIC_HELP[name] });

/**
 * A counter in the broker's registry of outcomes per `subject` (labels `subject` and `outcome`), as
 * the increment its helper in {@link metrics} calls. The subject value is always passed through
 * {@link bounded}; the outcome too when `outcomeKind` is given (a word the caller makes up, not a
 * fixed union of ours).
 */
function outcomesBy<O extends string>(subject: string, name: MetricName, outcomeKind?: string) {
  const counter = new Counter({ ...named(name), labelNames: [subject, 'outcome'], registers });
  return (value: string, outcome: O): void =>
    counter.inc({ [subject]: bounded(subject, value), outcome: outcomeKind ? bounded(outcomeKind, outcome) : outcome });
}

const httpRequests = new Counter({
  ...named('broker_http_requests_total'),
  labelNames: ['route', 'status'] as const,
  registers,
});
const toolCalls = outcomesBy<ToolOutcome>('tool', 'broker_mcp_tool_calls_total');
const connectFlows = outcomesBy<ConnectFlowOutcome>('provider', 'broker_connect_flows_total');
const tokenRefreshes = outcomesBy<RefreshOutcome>('provider', 'broker_token_refreshes_total');
const tokenExchanges = outcomesBy<ExchangeOutcome>('service', 'broker_token_exchanges_total', 'exchange_outcome');
const upstreamCalls = outcomesBy<UpstreamOutcome>('upstream', 'broker_upstream_calls_total', 'upstream_outcome');
const upstreamTokenRefusals = new Counter({
  ...named('broker_upstream_token_refusals_total'),
  labelNames: ['upstream', 'provider_verdict'] as const,
  registers,
});
const upstreamCallsRefused = new Counter({ ...named('broker_upstream_calls_refused_total'), labelNames: ['upstream'] as const, registers });
const heldRepeats = new Gauge({ ...named('broker_held_repeats'), registers });
const holdDuration = new Histogram({
  ...named('broker_hold_duration_seconds'),
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 50],
  registers,
});
const upstreamDuration = new Histogram({
  ...named('broker_upstream_call_duration_seconds'),
  labelNames: ['upstream'] as const,
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers,
});
const storeErrors = new Counter({ ...named('broker_store_errors_total'), registers });
const unhandledErrors = new Counter({ ...named('broker_unhandled_errors_total'), labelNames: ['kind'] as const, registers });

/** Sources of the open pending connection count, one per broker in this process (a test may run several). */
const pendingSources = new Set<() => Promise<number>>();
new Gauge({
  ...named('broker_pending_connections_open'),
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
  toolCall: toolCalls,
  connectFlow: connectFlows,
  tokenRefresh: tokenRefreshes,
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
  tokenExchange: tokenExchanges,
  /** For the gateway: one call to an upstream MCP server, its outcome word and how long it took. */
  upstreamCall(upstream: string, outcome: UpstreamOutcome, seconds: number): void {
    upstreamCalls(upstream, outcome);
    upstreamDuration.observe({ upstream: bounded('upstream', upstream) }, seconds);
  },
  /** An upstream refused a user's token after the refresh; `verdict` is what the provider said of it. */
  upstreamTokenRefusal(upstream: string, verdict: 'refused' | 'accepted' | 'unknown' | 'not_checked'): void {
    upstreamTokenRefusals.inc({ upstream: bounded('upstream', upstream), provider_verdict: verdict });
  },
  /** A call not sent to `upstream`: its user already had the most calls in flight to it. */
  upstreamCallRefused(upstream: string): void {
    upstreamCallsRefused.inc({ upstream: bounded('upstream', upstream) });
  },
  storeError(): void {
    storeErrors.inc();
  },
  /** An error no caller handled: a rejection nobody awaited, an exception no handler caught, a background task that failed. */
  unhandledError(kind: 'rejection' | 'exception' | 'background'): void {
    unhandledErrors.inc({ kind });
  },
  /** Counts `source` (a store's open pending connections) at each scrape until the returned function is called. */
  countPendingFrom(source: () => Promise<number>): () => void {
    pendingSources.add(source);
    return () => void pendingSources.delete(source);
  },
};
