import type { TraceExporterName, TracingSettings } from '../observability/tracing.js';
import { ConfigError } from './errors.js';

/**
 * The standard OpenTelemetry variables, read the way the OTel specification defines them, with one
 * difference it leaves to the application: traces are off until an exporter is configured. The SDK
 * reads the rest of its variables itself (OTLP headers, timeout, sampler, resource attributes).
 */
export const DEFAULT_SERVICE_NAME = 'mcp-connect-broker';

/** OTEL_SDK_DISABLED: a boolean in the spec's sense (`true`/`false`, any case, or empty). */
export function sdkDisabled(value: string | undefined): boolean {
  const v = (value ?? '').trim().toLowerCase();
  if (v === '' || v === 'false') return false;
  if (v === 'true') return true;
  throw new ConfigError(`OTEL_SDK_DISABLED must be true or false (got "${value}")`);
}

const EXPORTERS = ['otlp', 'console', 'none'] as const;

/** OTEL_TRACES_EXPORTER: a comma-separated list of `otlp`, `console`, or `none` alone; undefined when unset. */
export function traceExporters(value: string | undefined): Array<TraceExporterName | 'none'> | undefined {
  const names = (value ?? '')
    .split(',')
    .map((n) => n.trim().toLowerCase())
    .filter(Boolean);
  if (names.length === 0) return undefined;
  for (const name of names)
    if (!(EXPORTERS as readonly string[]).includes(name))
      throw new ConfigError(`OTEL_TRACES_EXPORTER must be otlp, console or none (got "${name}"; no other exporter is installed)`);
  if (names.includes('none') && names.length > 1) throw new ConfigError('OTEL_TRACES_EXPORTER lists none beside another exporter');
  return [...new Set(names)] as Array<TraceExporterName | 'none'>;
}

/** An OTLP/HTTP endpoint: an absolute http(s) URL without credentials (those go in OTEL_EXPORTER_OTLP_HEADERS). */
export function otlpEndpoint(name: string, value: string | undefined): string | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const url = URL.parse(value.trim());
  // The value is not echoed: an operator may have put a credential in it.
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    throw new ConfigError(`${name} must be an http:// or https:// URL, such as http://otel-collector:4318`);
  if (url.username || url.password) throw new ConfigError(`${name} must not carry credentials (put them in OTEL_EXPORTER_OTLP_HEADERS)`);
  return url.href;
}

/**
 * On when OTEL_TRACES_EXPORTER names an exporter, or (unset) when an OTLP endpoint is configured;
 * off with OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true, whatever else is set.
 */
export function tracingSettings(o: {
  disabled: boolean;
  exporters: Array<TraceExporterName | 'none'> | undefined;
  endpoint: string | undefined;
  tracesEndpoint: string | undefined;
  serviceName: string | undefined;
}): TracingSettings {
  const exporters = o.exporters
    ? o.exporters.filter((e): e is TraceExporterName => e !== 'none')
    : o.endpoint || o.tracesEndpoint
      ? (['otlp'] as TraceExporterName[])
      : [];
  return {
    enabled: !o.disabled && exporters.length > 0,
    exporters,
    serviceName: o.serviceName?.trim() || DEFAULT_SERVICE_NAME,
  };
}
