import type { IncomingHttpHeaders } from 'node:http';
import type { Code } from '@visionserve/protocol';

/** What a transport knows of a request when it starts. */
export interface RequestStart {
  /** The API serving it, e.g. "tfs-rest", "tfs-grpc", "sagemaker", "kserve" (the HttpApi's or GrpcService's name). */
  readonly api: string;
  readonly transport: 'http' | 'grpc';
  /** A bounded name of the operation: the route's name or the gRPC method ("Predict"). */
  readonly method: string;
  /** Request headers (gRPC: metadata), e.g. for `traceparent`. */
  readonly headers: IncomingHttpHeaders;
  /**
   * The request's AbortSignal, the one the API passes to core: core's InferenceObserver
   * sees the same object, so predicts can be tied to their request.
   */
  readonly signal: AbortSignal | undefined;
  /** `performance.now()` when the request arrived. */
  readonly startedAt: number;
}

/** How a request ended (its response was written, or the client went away). */
export interface RequestEnd {
  /** The protocol's own status: the HTTP status ("200") or the gRPC code name ("OK"). */
  readonly status: string;
  /** The canonical code of the outcome (HTTP statuses map to the closest code). */
  readonly code: Code;
  /** Request body bytes (HTTP: Content-Length or bytes read; gRPC: the message). */
  readonly bytesIn: number;
  /** Response body bytes. */
  readonly bytesOut: number;
}

/**
 * Told of every request a transport serves (metrics, access logs, tracing). `begin` runs
 * synchronously when a request arrives; the function it returns, when the request ends.
 * Keep both cheap; they must not throw.
 */
export interface RequestObserver {
  begin(start: RequestStart): ((end: RequestEnd) => void) | undefined;
}
