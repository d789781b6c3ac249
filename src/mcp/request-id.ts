import type { AuthInfo } from '@modelcontextprotocol/server';
import { withFields, type Logger } from '../log.js';

const KEY = 'reqId';

/**
 * The verified `authInfo` with the HTTP request's id attached: /mcp is served outside the log
 * context (src/http/request-log.ts), so the id travels to the tools the way the call scope does.
 */
export function withRequestId(authInfo: AuthInfo, reqId: string | undefined): AuthInfo {
  return reqId === undefined ? authInfo : { ...authInfo, extra: { ...authInfo.extra, [KEY]: reqId } };
}

/** `log`, adding the request id `withRequestId` attached (if any) to each line. */
export function requestLogger(log: Logger, authInfo: AuthInfo | undefined): Logger {
  const reqId = authInfo?.extra?.[KEY];
  return typeof reqId === 'string' ? withFields(log, { reqId }) : log;
}
