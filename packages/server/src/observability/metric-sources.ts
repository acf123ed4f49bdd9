/**
 * What the metrics read from other parts when scraped: the options of createServingMetrics
 * (serving-metrics.ts) that scrape-collectors.ts registers collectors for.
 */
import type { ModelState } from '../core/model-state.js';

/** One loaded version's state, for the model_state gauge. */
export interface VersionStateSample {
  readonly model: string;
  readonly version: number;
  readonly state: ModelState;
}

/** Counters of one batched version (the batching layer's snapshot has this shape). */
export interface BatchingSample {
  readonly model: string;
  readonly version: number;
  readonly batches: number;
  readonly paddingRows: number;
  readonly rejectedFull: number;
  readonly queuedTasks: number;
}

/** The response cache's counters (core's ResponseCache stats have this shape). */
export interface ResponseCacheSample {
  /** Bytes and entries held now, and the byte bound. */
  readonly bytes: number;
  readonly entries: number;
  readonly maxBytes: number;
  /** Monotonic counters per model that opted in. */
  readonly models: ReadonlyMap<
    string,
    { readonly hits: number; readonly misses: number; readonly evictions: number }
  >;
}

/** The frame streams' counts (the stream frontend's FrameStreamCounts have this shape). */
export interface FrameStreamSample {
  readonly open: ReadonlyMap<string, number>;
  readonly frames: ReadonlyMap<string, Readonly<Record<string, number>>>;
}

export interface ServingMetricsOptions {
  /** States of every known version, read at scrape time. Default: none. */
  readonly versionStates?: (() => readonly VersionStateSample[]) | undefined;
  /** Runs queued per available version, read at scrape time. Default: none. */
  readonly queueDepths?: (() => readonly { model: string; version: number; queued: number }[]) | undefined;
  /** Batching counters, read at scrape time; undefined when batching is off. */
  readonly batching?: (() => readonly BatchingSample[]) | undefined;
  /** The response cache, read at scrape time; undefined when it is off (--response_cache_bytes=0). */
  readonly responseCache?: (() => ResponseCacheSample | undefined) | undefined;
  /** The in-flight budget, read at scrape time. Default: none. */
  readonly inflight?: (() => { bytes: number; requests: number }) | undefined;
  /** Requests refused by admission since start, per reason, read at scrape time. Default: none. */
  readonly shed?: (() => ReadonlyMap<string, number>) | undefined;
  /**
   * The gRPC listener's connections, read at scrape time: open now, and ended by each
   * connection limit since start. Default: none.
   */
  readonly grpcConnections?:
    | (() => { readonly open: number; readonly limitCloses: ReadonlyMap<string, number> } | undefined)
    | undefined;
  /**
   * Each listener's connections, read at scrape time: open now, and closed or refused by each
   * connection guard limit since start (first-bytes deadline, eviction at the cap, refusals).
   * Default: none.
   */
  readonly listenerConnections?:
    | (() => readonly {
        readonly listener: string;
        readonly open: number;
        readonly guardCloses: ReadonlyMap<string, number>;
      }[])
    | undefined;
  /**
   * The frame streams, read at scrape time: streams open now per transport (websocket, grpc),
   * and frames since start per model by outcome (answered, dropped, failed). Default: none.
   */
  readonly frameStreams?: (() => FrameStreamSample | undefined) | undefined;
  /** Export process metrics (CPU, memory, event-loop lag, GC) with the `visionserve_` prefix. Default true. */
  readonly processMetrics?: boolean | undefined;
}
