import type { IncomingMessage } from 'node:http';
import { Code, ServingError } from '@visionserve/protocol';

/** How slowly a request body may arrive (`--min_request_body_bytes_per_s`). */
export interface UploadRate {
  /** Least bytes per second a body must bring, averaged over each window; 0 disables the check. */
  readonly minBytesPerSecond: number;
  /** Length of one window, in ms (the first one starts when the route asks for the body). */
  readonly windowMs: number;
}

/**
 * Watches a request body while it is read: when a window of `rate.windowMs` brings fewer
 * than `minBytesPerSecond × window` bytes (counted on the connection's socket, which serves
 * this one request while its body is read), `onTooSlow` gets a DEADLINE_EXCEEDED error
 * (reason `body-too-slow`, HTTP 408). Bytes still arriving are not model work: the byte
 * budget holds their memory, and this bounds the time a trickling client holds it (with
 * `--request_body_timeout_ms` as the upper bound for any client). Returns the stop.
 */
export function watchUploadRate(
  req: IncomingMessage,
  rate: UploadRate,
  onTooSlow: (error: ServingError) => void,
): () => void {
  if (!(rate.minBytesPerSecond > 0) || !(rate.windowMs > 0) || req.complete) return () => undefined;
  const socket = req.socket;
  const least = (rate.minBytesPerSecond * rate.windowMs) / 1000;
  let mark = socket.bytesRead;
  const timer = setInterval(() => {
    if (req.complete) {
      clearInterval(timer);
      return;
    }
    const read = socket.bytesRead - mark;
    mark = socket.bytesRead;
    if (read >= least) return;
    clearInterval(timer);
    onTooSlow(
      new ServingError(
        Code.DEADLINE_EXCEEDED,
        `Request body arrived too slowly: ${read} bytes in ${rate.windowMs} ms (at least ${rate.minBytesPerSecond} bytes/s)`,
        { reason: 'body-too-slow' },
      ),
    );
  }, rate.windowMs);
  timer.unref();
  return () => {
    clearInterval(timer);
  };
}
