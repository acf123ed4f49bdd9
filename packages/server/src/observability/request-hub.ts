import type { InferenceObserver, PredictEnd, PredictStart } from '../core/inference-observer.js';
import type { RunTimings } from '../core/session.js';
import type { RequestEnd, RequestObserver, RequestStart } from '../frontends/shared/request-observer.js';

/**
 * One request as the observers see it: what the transport said at its start, plus what
 * core said about its predict (model, version, phase times), joined through the request's
 * AbortSignal. Times are `performance.now()` milliseconds.
 */
export interface RequestRecord extends RequestStart {
  /** The served model and version, once a predict of this request started (configured models only). */
  model: string | undefined;
  version: number | undefined;
  signatureName: string | undefined;
  /** When core's predict started (decoding is done) and ended (encoding starts). */
  predictStartedAt: number | undefined;
  predictEndedAt: number | undefined;
  timings: RunTimings | undefined;
  /** Per-sink state (e.g. a tracer's span context); sinks own their keys. */
  readonly state: Map<symbol, unknown>;
}

/** A consumer of finished requests (metrics, access log, tracer). */
export interface RequestSink {
  /** Called when a request starts; cheap. */
  requestStarted?(record: RequestRecord): void;
  requestEnded(record: RequestRecord, end: RequestEnd, endedAt: number): void;
}

export interface RequestHubOptions {
  /** Told of every request's start and end. */
  readonly requestSinks: readonly RequestSink[];
  /** Told of every predict (with or without a transport request around it). */
  readonly predictObservers: readonly InferenceObserver[];
}

export interface RequestHub {
  /** Mount on every HTTP edge and gRPC server. */
  readonly requestObserver: RequestObserver;
  /** Pass to createInferenceService. */
  readonly inferenceObserver: InferenceObserver;
}

/**
 * Joins transport requests and core predicts into one record per request and fans both out
 * to the sinks. The join key is the request's AbortSignal, which every API passes to core
 * for cancellation anyway, so an API mounted on an edge is observed with no code of its own.
 */
export function createRequestHub(options: RequestHubOptions): RequestHub {
  const { requestSinks, predictObservers } = options;
  const bySignal = new WeakMap<AbortSignal, RequestRecord>();

  const requestObserver: RequestObserver = {
    begin(start: RequestStart) {
      const record: RequestRecord = {
        ...start,
        model: undefined,
        version: undefined,
        signatureName: undefined,
        predictStartedAt: undefined,
        predictEndedAt: undefined,
        timings: undefined,
        state: new Map(),
      };
      if (start.signal !== undefined) bySignal.set(start.signal, record);
      for (const sink of requestSinks) sink.requestStarted?.(record);
      return (end: RequestEnd) => {
        const endedAt = performance.now();
        for (const sink of requestSinks) sink.requestEnded(record, end, endedAt);
      };
    },
  };

  const inferenceObserver: InferenceObserver = {
    predictStarting(start: PredictStart) {
      const record = start.signal === undefined ? undefined : bySignal.get(start.signal);
      if (record !== undefined) {
        record.model = start.model;
        record.version = start.version;
        record.signatureName = start.signatureName;
        record.predictStartedAt = performance.now();
      }
      const ends: ((end: PredictEnd) => void)[] = [];
      for (const observer of predictObservers) {
        const end = observer.predictStarting(start);
        if (end !== undefined) ends.push(end);
      }
      return (end: PredictEnd) => {
        if (record !== undefined) {
          record.predictEndedAt = performance.now();
          record.timings = end.timings;
        }
        for (const e of ends) e(end);
      };
    },
  };

  return { requestObserver, inferenceObserver };
}
