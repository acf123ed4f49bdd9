import type { IncomingMessage, ServerResponse } from 'node:http';

/** Most unread body bytes an error answer leaves Node to drain (see unreadBodyHeaders). */
export const DRAIN_UNREAD_BODY_BYTES = 16 * 1024 * 1024;

/**
 * Headers of an answer sent before the request's body was read (a refusal, a 404 or 405): a
 * body of declared length up to DRAIN_UNREAD_BODY_BYTES is read and discarded after the
 * answer (Node does that) and the connection stays open for the next request; closing instead
 * while the client still sends would reset the connection, and the client could lose the
 * answer. Bigger or undeclared (chunked) bodies close the connection (`Connection: close`)
 * rather than being drained.
 */
export function unreadBodyHeaders(req: IncomingMessage): Record<string, string> {
  const length = req.headers['content-length'];
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if (req.complete || (!chunked && (length === undefined || Number(length) <= DRAIN_UNREAD_BODY_BYTES))) {
    return {};
  }
  return { Connection: 'close' };
}

/**
 * Writes a complete JSON response (`Content-Type: application/json`). Does nothing when
 * the client is gone or a response was already started.
 */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: string | Uint8Array,
  headers: Readonly<Record<string, string>> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  res.writeHead(status, {
    ...headers,
    'Content-Type': 'application/json',
    'Content-Length': String(bytes.byteLength),
  });
  res.end(bytes);
}

/** Writes a complete response with any content type. Does nothing when the client is gone or a response was started. */
export function sendBody(
  res: ServerResponse,
  status: number,
  body: Uint8Array,
  contentType: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, {
    ...headers,
    'Content-Type': contentType,
    'Content-Length': String(body.byteLength),
  });
  res.end(body);
}

/**
 * Writes `{"error": message}` with the given HTTP status; `Connection: close` when the
 * request's body is unread and too big to drain (unreadBodyHeaders).
 */
export function sendJsonError(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  const req = (res as { req?: IncomingMessage }).req;
  sendJson(res, status, JSON.stringify({ error: message }), {
    ...headers,
    ...(req === undefined ? {} : unreadBodyHeaders(req)),
  });
}
