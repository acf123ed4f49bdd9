import { Code, ServingError } from '@visionserve/protocol';

/** Per-call options accepted by every client method. */
export interface CallOptions {
  /**
   * Deadline for the whole call (connect, send, server work, receive), in ms from the
   * call's start. On expiry the call rejects with DEADLINE_EXCEEDED; gRPC calls also send
   * it to the server as `grpc-timeout`. Default: the client's `defaultTimeoutMs` (none if unset).
   */
  readonly timeoutMs?: number;
  /** Cancels the call; it rejects with CANCELLED (or with the reason, when that is a ServingError). */
  readonly signal?: AbortSignal;
}

/** A signal that fires on the caller's signal or the deadline, with a ServingError as its reason. */
export interface CallScope {
  readonly signal: AbortSignal;
  /** The effective timeout in ms, when one applies. */
  readonly timeoutMs: number | undefined;
  /** Time left before the deadline in ms (at least 1), when one applies. */
  remainingMs(): number | undefined;
  /** Stops the deadline timer and detaches from the caller's signal. Call once the call settled. */
  dispose(): void;
}

/** The ServingError a call rejects with once its scope's signal fired. */
export function abortReason(signal: AbortSignal): ServingError {
  const reason: unknown = signal.reason;
  return reason instanceof ServingError ? reason : new ServingError(Code.CANCELLED, 'Call cancelled');
}

/**
 * Merges the caller's AbortSignal and timeout (falling back to `defaultTimeoutMs`) into
 * one signal whose reason is CANCELLED or DEADLINE_EXCEEDED.
 */
export function openCallScope(options: CallOptions | undefined, defaultTimeoutMs?: number): CallScope {
  const controller = new AbortController();
  const timeoutMs = options?.timeoutMs ?? defaultTimeoutMs;
  const outer = options?.signal;
  const onOuterAbort = (): void => {
    controller.abort(abortReason(outer!));
  };
  if (outer?.aborted) onOuterAbort();
  else outer?.addEventListener('abort', onOuterAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const deadline = timeoutMs === undefined ? undefined : performance.now() + timeoutMs;
  if (timeoutMs !== undefined && !controller.signal.aborted) {
    if (!(timeoutMs > 0))
      throw new ServingError(Code.INVALID_ARGUMENT, `timeoutMs must be > 0, got ${timeoutMs}`);
    timer = setTimeout(() => {
      controller.abort(new ServingError(Code.DEADLINE_EXCEEDED, `Deadline of ${timeoutMs} ms exceeded`));
    }, timeoutMs);
  }
  return {
    signal: controller.signal,
    timeoutMs,
    remainingMs: () => (deadline === undefined ? undefined : Math.max(1, deadline - performance.now())),
    dispose() {
      if (timer !== undefined) clearTimeout(timer);
      outer?.removeEventListener('abort', onOuterAbort);
    },
  };
}

/** Runs `fn` inside a call scope and disposes it when the call settles. */
export async function withCallScope<T>(
  options: CallOptions | undefined,
  defaultTimeoutMs: number | undefined,
  fn: (scope: CallScope) => Promise<T>,
): Promise<T> {
  const scope = openCallScope(options, defaultTimeoutMs);
  try {
    if (scope.signal.aborted) throw abortReason(scope.signal);
    return await fn(scope);
  } finally {
    scope.dispose();
  }
}
