// The help text of each of the broker's metrics, as Prometheus and a dashboard show it to an
// operator, keyed by the metric's name (the fixed names of issue 14, docs/operations.md's metrics table).
export const METRIC_HELP = {
  broker_http_requests_total: 'HTTP requests answered, by Express route pattern and status code.',
  broker_mcp_tool_calls_total: 'MCP tools/call requests, by tool and outcome (complete, input_required, error, declined).',
  broker_connect_flows_total: 'Connect flow steps, by provider and outcome (started, completed, cancelled, denied, failed, refused).',
  broker_token_refreshes_total: 'Provider token refreshes this instance asked for, by provider and outcome (refreshed, rejected, failed).',
  broker_held_repeats: 'Repeated tool calls (and token exchanges) held right now while their user is in the browser.',
  broker_hold_duration_seconds: 'How long a held repeat waited for its connect flow.',
  broker_token_exchanges_total: 'RFC 8693 token exchanges at /oauth/token, by service and outcome.',
  broker_upstream_calls_total: 'Calls the gateway made to upstream MCP servers, by upstream and outcome.',
  broker_upstream_call_duration_seconds: 'How long calls to upstream MCP servers took, by upstream.',
  broker_upstream_token_refusals_total:
    'Tokens an upstream MCP server still refused after a refresh, by upstream and what the provider said of the token (refused, accepted, unknown, not_checked).',
  broker_upstream_calls_refused_total:
    'Calls to an upstream MCP server refused at once because their user already had as many in flight to it as allowed, by upstream.',
  broker_store_errors_total: 'Store operations that failed because the database could not be reached or did not answer in time.',
  broker_unhandled_errors_total:
    'Errors no caller handled, by kind: rejection (a promise nobody awaited), exception (then the process exits), background (a task the broker did not wait for).',
  broker_pending_connections_open:
    'Pending connections (connect links) open or being authorized, unexpired, read from the store at scrape time.',
} as const;

export type MetricName = keyof typeof METRIC_HELP;

/** What /metrics says to a scraper it refuses. */
export const METRICS_REFUSAL = {
  unauthorized: 'Send the METRICS_TOKEN as "Authorization: Bearer <token>".',
  tooManyFailures: (retryAfterSeconds: number) =>
    `Too many requests with a wrong METRICS_TOKEN from this address in a minute. Retry after ${retryAfterSeconds} s.`,
} as const;
