import type { Code, Tensor } from '@visionserve/protocol';
import type { RunTimings } from './session.js';

/** A `servable.predict` about to run on a pinned version (before validation and admission). */
export interface PredictStart {
  readonly model: string;
  readonly version: number;
  /** Resolved signature name ("serving_default" for "" and undefined). */
  readonly signatureName: string;
  /**
   * Inputs by alias, as the caller passed them. They still belong to the caller and may be
   * moved to a worker (detached) as soon as this call returns: copy what you keep, synchronously.
   */
  readonly inputs: Readonly<Record<string, Tensor>>;
  /** Output aliases asked for; empty means all. */
  readonly outputFilter: readonly string[];
  /**
   * The call's AbortSignal. Transports create one per request and pass it to core, so it
   * identifies the request a predict belongs to (undefined for calls without one).
   */
  readonly signal: AbortSignal | undefined;
}

/** How a predict ended. */
export interface PredictEnd {
  /** Code.OK on success, else the code the caller was answered with. */
  readonly code: Code;
  /** Outputs by alias on success; they belong to the caller (copy synchronously). */
  readonly outputs: Readonly<Record<string, Tensor>> | undefined;
  /** Where the run's time went; undefined when no run started (refused, invalid input). */
  readonly timings: RunTimings | undefined;
  /** Time from `PredictStart` to the end, in ms. */
  readonly durationMs: number;
}

/**
 * Told of every predict core runs (metrics, request logs, tracing). Called synchronously
 * on the request path: keep it cheap, and never throw (a throwing observer is ignored).
 */
export interface InferenceObserver {
  /** Returns a function to be told how the predict ended, or undefined when not interested. */
  predictStarting(start: PredictStart): ((end: PredictEnd) => void) | undefined;
}
