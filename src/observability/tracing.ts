/**
 * OpenTelemetry traces, off unless the operator configures an exporter with the standard `OTEL_*`
 * variables (src/config/tracing.ts decides). The code paths use only `@opentelemetry/api`; the SDK
 * and the OTLP exporter are imported here, dynamically, when tracing is on, so a deployment without
 * tracing loads none of them and every helper below returns straight to its caller.
 *
 * What goes into a span: operation names from our own code (bounded), provider ids and host names
 * from the configuration, status codes, outcomes. Never a token, code, state, argument, URL path,
 * principal or error message.
 */
import {
  context,
  diag,
  DiagLogLevel,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';

export type TraceExporterName = 'otlp' | 'console';

/** What the configuration says about traces (see src/config/tracing.ts). */
export interface TracingSettings {
  /** Whether the SDK is loaded at all. */
  enabled: boolean;
  /** Where spans go; the OTLP exporter reads its endpoint, headers and timeout from `OTEL_EXPORTER_OTLP_*` itself. */
  exporters: TraceExporterName[];
  /** `service.name` unless `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` say otherwise. */
  serviceName: string;
}

export interface TracingOptions {
  /** Test only: these processors instead of the configured exporters' (an `InMemorySpanExporter` behind a `SimpleSpanProcessor`). */
  spanProcessors?: SpanProcessor[];
  /** Where the SDK's own warnings (an exporter that cannot reach its collector) go. */
  warn?: (event: string, fields: Record<string, unknown>) => void;
}

export interface Tracing {
  readonly enabled: boolean;
  /** Flushes the spans still buffered and unregisters the SDK. */
  shutdown(): Promise<void>;
}

const TRACER_NAME = 'mcp-connect-broker';
const SERVICE_VERSION = '0.1.0';

let tracer: Tracer | undefined;

/** Whether spans are being recorded in this process: the zero-cost switch every helper checks first. */
export function tracingEnabled(): boolean {
  return tracer !== undefined;
}

/**
 * Loads the SDK and registers it globally (tracer provider, AsyncLocalStorage context manager, W3C
 * trace-context propagator) when `settings.enabled`; otherwise does nothing and loads nothing.
 * @throws {Error} when tracing is already started in this process.
 */
export async function startTracing(settings: TracingSettings, options: TracingOptions = {}): Promise<Tracing> {
  if (!settings.enabled) return { enabled: false, shutdown: async () => undefined };
  if (tracer) throw new Error('tracing is already started in this process');
  const [{ NodeTracerProvider }, base, resources] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/resources'),
  ]);
  const processors: SpanProcessor[] = options.spanProcessors ?? [];
  if (!options.spanProcessors) {
    for (const name of settings.exporters) {
      if (name === 'otlp') {
        const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
        processors.push(new base.BatchSpanProcessor(new OTLPTraceExporter()));
      } else processors.push(new base.SimpleSpanProcessor(new base.ConsoleSpanExporter()));
    }
  }
  const warn = options.warn;
  if (warn) {
    const say = (message: string) => warn('otel_warning', { message });
    diag.setLogger({ error: say, warn: say, info: () => undefined, debug: () => undefined, verbose: () => undefined }, DiagLogLevel.WARN);
  }
  // Ours first, then what OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES say (a later merge wins).
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.name': settings.serviceName, 'service.version': SERVICE_VERSION }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: processors });
  // The default propagator also carries W3C baggage; baggage is dropped where contexts are
  // extracted (see parentFrom), so nothing a client sends is forwarded to providers but the trace ids.
  provider.register();
  tracer = provider.getTracer(TRACER_NAME, SERVICE_VERSION);
  return {
    enabled: true,
    async shutdown() {
      tracer = undefined;
      try {
        await provider.shutdown();
      } catch (err) {
        // A collector that cannot be reached costs the last spans, never the shutdown.
        warn?.('otel_shutdown_failed', { message: err instanceof Error ? err.message : String(err) });
      } finally {
        trace.disable();
        context.disable();
        propagation.disable();
        diag.disable();
      }
    },
  };
}

/** The class of an error (`ProviderError`, `StoreUnavailableError`), never its message. */
function errorType(err: unknown): string {
  return err instanceof Error ? err.name || 'Error' : typeof err;
}

/** Marks `span` failed with the class of `err`. */
export function recordFailure(span: Span, err: unknown): void {
  span.setAttribute('error.type', errorType(err));
  span.setStatus({ code: SpanStatusCode.ERROR });
}

/**
 * Runs `fn` in a new active span (a child of the active one, or of `parent`), ended when `fn`
 * settles; a throw marks it failed. When tracing is off, `fn` runs as is with no span.
 */
export function withSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span | undefined) => Promise<T>,
  options: { kind?: SpanKind; parent?: Context; onlyAsChild?: boolean } = {},
): Promise<T> {
  const t = tracer;
  if (!t) return fn(undefined);
  const parent = options.parent ?? context.active();
  // Background work (the prune timer, a watcher's polling) would otherwise open a trace per call.
  if (options.onlyAsChild && !trace.getSpan(parent)) return fn(undefined);
  return t.startActiveSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      recordFailure(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/**
 * Starts a span that the caller ends (an HTTP request's, ended when the response is), and runs
 * `fn` with it active; when tracing is off, runs `fn` alone.
 */
export function runInSpan<T>(name: string, attributes: Attributes, parent: Context, kind: SpanKind, fn: (span: Span | undefined) => T): T {
  const t = tracer;
  if (!t) return fn(undefined);
  const span = t.startSpan(name, { kind, attributes }, parent);
  return context.with(trace.setSpan(parent, span), () => fn(span));
}

/** The span of the current request, if tracing is on. */
export function activeSpan(): Span | undefined {
  return tracer ? trace.getActiveSpan() : undefined;
}

/**
 * Adds `traceparent` (and `tracestate`) of the active span to outgoing `headers`; nothing when tracing
 * is off. Only for calls to declared upstreams (src/gateway/upstream-http.ts): providers never get
 * our trace ids.
 */
export function injectTraceContext(headers: Headers | Record<string, string>): void {
  if (!tracer) return;
  propagation.inject(context.active(), headers, {
    set: (carrier, key, value) => {
      if (carrier instanceof Headers) carrier.set(key, value);
      else carrier[key] = value;
    },
  });
}

/**
 * A fetch to a provider in a CLIENT span named `name`. It never carries the trace on: a provider
 * (GitHub's API, an OAuth token or revocation endpoint) is a third party, and `traceparent` would
 * tell it our trace ids (declared upstreams get it, src/gateway/upstream-http.ts). Attributes: the
 * method, the host and port (never the path or query: paths hold arguments such as a repository
 * name, queries can hold codes) and the response status.
 */
export function tracedFetch(name: string, attributes: Attributes, input: URL | string, init: RequestInit): Promise<Response> {
  if (!tracer) return fetch(input, init);
  const url = new URL(input);
  return withSpan(
    name,
    {
      ...attributes,
      'http.request.method': (init.method ?? 'GET').toUpperCase(),
      'server.address': url.hostname,
      'server.port': Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
    },
    async (span) => {
      const response = await fetch(input, init);
      span?.setAttribute('http.response.status_code', response.status);
      if (response.status >= 500) span?.setStatus({ code: SpanStatusCode.ERROR });
      return response;
    },
    { kind: SpanKind.CLIENT },
  );
}

/**
 * The active span's trace context as `_meta` entries (`traceparent`, `tracestate`), for a request
 * to a 2026-07-28 MCP server (SEP-414): what the gateway puts in an upstream call's `_meta` in place
 * of the client's own. Empty when tracing is off.
 */
export function traceContextMeta(): Record<string, string> {
  const meta: Record<string, string> = {};
  injectTraceContext(meta);
  return meta;
}

type Carrier = Record<string, string | string[] | undefined>;

/**
 * The context to continue: the trace a client named in `_meta` (`traceparent` / `tracestate`, a
 * 2026-07-28 client's way, SEP-414) when it is valid, else the HTTP `traceparent` header, else a
 * new trace. W3C baggage is dropped: it is the client's, not ours to forward.
 */
export function parentFrom(meta: Carrier | undefined, headers: Carrier): Context {
  const getter = {
    keys: (c: Carrier) => Object.keys(c),
    get: (c: Carrier, key: string) => c[key],
  };
  for (const carrier of [meta, headers]) {
    if (!carrier || typeof carrier.traceparent !== 'string') continue;
    const only: Carrier = {
      traceparent: carrier.traceparent,
      ...(typeof carrier.tracestate === 'string' ? { tracestate: carrier.tracestate } : {}),
    };
    const ctx = propagation.extract(ROOT_CONTEXT, only, getter);
    if (trace.getSpanContext(ctx)) return propagation.deleteBaggage(ctx);
  }
  return ROOT_CONTEXT;
}

export { SpanKind, SpanStatusCode };
