import type { ServerResponse } from 'node:http';

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

/** Writes `{"error": message}` with the given HTTP status. */
export function sendJsonError(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  sendJson(res, status, JSON.stringify({ error: message }), headers);
}
