import type { Response } from 'express';

/** The body of a JSON-RPC error that answers no particular request (`id: null`). */
export function jsonRpcErrorBody(code: number, message: string): { jsonrpc: '2.0'; id: null; error: { code: number; message: string } } {
  return { jsonrpc: '2.0', id: null, error: { code, message } };
}

/** The one way an HTTP layer answers /mcp with a JSON-RPC error: status, optional headers, {@link jsonRpcErrorBody}. */
export function jsonRpcError(res: Response, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  res.status(status).set(headers).json(jsonRpcErrorBody(code, message));
}
