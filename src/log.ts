/**
 * One JSON line per event on stdout, through pino. Callers pass codes and ids, never tokens, codes,
 * cookies or request bodies; the `redact` paths below are the second line of defence, censoring
 * every field name that could ever hold a secret should one be handed in by mistake.
 *
 * Lines logged while a request is served carry its `reqId` (see {@link runWithLogContext}), so the
 * `log.info(event, detail)` calls across the code need no logger passed down to them.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, stdTimeFunctions, type DestinationStream } from 'pino';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

const LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

export interface Logger {
  debug(event: string, fields?: Record<string, unknown>): void;
  info(event: string, fields?: Record<string, unknown>): void;
  warn(event: string, fields?: Record<string, unknown>): void;
  error(event: string, fields?: Record<string, unknown>): void;
}

/**
 * Field names censored wherever they appear at the top level of a line, where callers put their
 * fields (OAuth and OIDC parameters, our own link handle `req`, the MCP `requestState`, HTTP
 * credentials). `code` is among them: an authorization code is one, so error codes are logged as
 * `errorCode`.
 */
export const REDACTED_FIELDS: readonly string[] = [
  'token',
  'tokens',
  'accessToken',
  'access_token',
  'refreshToken',
  'refresh_token',
  'idToken',
  'id_token',
  'id_token_hint',
  'subjectToken',
  'subject_token',
  'actorToken',
  'actor_token',
  'assertion',
  'clientAssertion',
  'client_assertion',
  'secret',
  'clientSecret',
  'client_secret',
  'password',
  'code',
  'codeVerifier',
  'code_verifier',
  'state',
  'requestState',
  'nonce',
  'handle',
  'req',
  'link',
  'authorization',
  'Authorization',
  'cookie',
  'Cookie',
  'set-cookie',
  'Set-Cookie',
  'sealed_tokens',
  'key',
];

/** Header names censored inside a `headers` field (should request or response headers ever be logged). */
export const REDACTED_HEADERS: readonly string[] = ['authorization', 'cookie', 'set-cookie', 'proxy-authorization'];

/**
 * Explicit paths only: pino's wildcard paths (`*.token`) cost ~100 µs a line, more than the rest of
 * a request's logging together (bench: list_connections CPU per request).
 */
const redactPaths = [
  ...REDACTED_FIELDS.map((name) => (/^[A-Za-z_$][\w$]*$/.test(name) ? name : `["${name}"]`)),
  ...REDACTED_HEADERS.map((name) => `headers["${name}"]`),
];

export interface LogContext {
  reqId: string;
}

const context = new AsyncLocalStorage<LogContext>();

/** Runs `fn` (and everything it awaits or schedules) with `ctx` added to every line it logs. */
export function runWithLogContext<T>(ctx: LogContext, fn: () => T): T {
  return context.run(ctx, fn);
}

/**
 * `log` with `fields` added to each line: for code that serves a request outside the log context
 * (the MCP endpoint, see src/http/request-log.ts) and passes its logger along instead.
 */
export function withFields(log: Logger, fields: Record<string, unknown>): Logger {
  const at = (lvl: LogLevel) => (event: string, more?: Record<string, unknown>) => log[lvl](event, { ...fields, ...more });
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/**
 * Every line is written to stdout synchronously, in order, with one exception: the access line of
 * each request ({@link ACCESS_EVENT}) waits up to {@link FLUSH_MS} ms (or until 8 KiB wait) and goes
 * out with the next write. A write per access line woke the log collector on every request: ~70 µs
 * of CPU per MCP call at c=16 on two cores (bench: observability, logging alone against quiet).
 * Any other line (an event: `listening`, `connection_created`, …) first writes the waiting access
 * lines, then itself, before the code that logged it goes on, so what a process did is on stdout
 * before it answers for it. Process exit writes what waits, crashes included; only a SIGKILL can
 * lose access lines, those of its last 25 ms. (pino's asynchronous destination batched under load
 * but cost a thread-pool round trip per line when idle, and at exit wrote the waiting lines ahead
 * of the one in flight.) A collector that stops reading blocks the writes, as Node's own writes to
 * a pipe do.
 */
export const FLUSH_MS = 25;
/** The event of the one access line per request (src/http/request-log.ts). */
export const ACCESS_EVENT = 'http_request';
let accessLine = false;

interface StdoutDestination extends DestinationStream {
  write(line: string): void;
}
let stdout: StdoutDestination | undefined;
/** One stdout destination per process, however many loggers are made. */
function stdoutDestination(): StdoutDestination {
  if (stdout) return stdout;
  const out = pino.destination({ dest: 1, sync: true, minLength: 8192 });
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    out.flushSync();
  };
  process.once('exit', flush);
  stdout = {
    write(line: string) {
      out.write(line);
      if (!accessLine) flush();
      else timer ??= setTimeout(flush, FLUSH_MS).unref();
    },
  };
  return stdout;
}

function levelFromEnv(): LogLevel {
  const v = process.env.LOG_LEVEL;
  return LEVELS.includes(v as LogLevel) ? (v as LogLevel) : 'info';
}

/**
 * A logger at `level` (LOG_LEVEL by default; anything else is `info`) writing to stdout, or to
 * `write` (one line at a time, without its newline: tests and the benchmark).
 */
export function createLogger(level: LogLevel = levelFromEnv(), write?: (line: string) => void): Logger {
  const destination: DestinationStream = write ? { write: (line: string) => write(line.replace(/\n$/, '')) } : stdoutDestination();
  const p = pino(
    {
      level,
      timestamp: stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: redactPaths, censor: '[redacted]' },
      // A fresh object each time: pino merges the line's fields into what this returns.
      mixin: () => {
        const ctx = context.getStore();
        return ctx ? { reqId: ctx.reqId } : {};
      },
    },
    destination,
  );
  // `event` first among the fields (collectors and tests look for `"event":"listening","url":…`).
  const at = (lvl: LogLevel) => (event: string, fields?: Record<string, unknown>) => {
    if (!p.isLevelEnabled(lvl)) return;
    accessLine = event === ACCESS_EVENT;
    try {
      p[lvl]({ event, ...fields });
    } finally {
      accessLine = false;
    }
  };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}
