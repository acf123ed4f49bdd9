import type { ServerResponse } from 'node:http';
import { Code, ServingError } from '@visionserve/protocol';

export interface RequestSignal {
  /** Aborts with CANCELLED when the client disconnects, DEADLINE_EXCEEDED after the timeout. */
  readonly signal: AbortSignal;
  /** Aborts the request now with `reason` (e.g. a body that arrives too slowly). */
  abort(reason: ServingError): void;
  /** Stops watching (call once the response is settled). */
  dispose(): void;
}

/**
 * The one AbortSignal of an HTTP request, from the socket to the worker: client
 * disconnects and the per-request timeout (0 disables it, in ms) cancel queued work.
 */
export function watchRequest(res: ServerResponse, timeoutMs: number): RequestSignal {
  const controller = new AbortController();
  const onClose = (): void => {
    if (!res.writableFinished) controller.abort(new ServingError(Code.CANCELLED, 'Client disconnected'));
  };
  res.on('close', onClose);
  const timer =
    timeoutMs > 0
      ? setTimeout(() => {
          controller.abort(
            new ServingError(Code.DEADLINE_EXCEEDED, `Request timed out after ${timeoutMs} ms`),
          );
        }, timeoutMs)
      : undefined;
  return {
    signal: controller.signal,
    abort(reason) {
      controller.abort(reason);
    },
    dispose() {
      if (timer !== undefined) clearTimeout(timer);
      res.off('close', onClose);
    },
  };
}
