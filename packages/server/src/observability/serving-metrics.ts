import { Code } from '@visionserve/protocol';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, exponentialBuckets } from 'prom-client';
import type { InferenceObserver, PredictEnd, PredictStart } from '../core/inference-observer.js';
import type { ModelState } from '../core/model-state.js';
import type { VersionEvent } from '../core/version-entry.js';
import type { RequestEnd } from '../frontends/shared/request-observer.js';
import type { RequestRecord, RequestSink } from './request-hub.js';

/** One metric's values as prom-client reports them (histograms: `_bucket` with `le`, `_sum`, `_count`). */
export interface MetricValues {
  readonly name: string;
  readonly type: string;
  readonly values: readonly {
    readonly value: number;
    readonly labels: Readonly<Record<string, string | number>>;
    readonly metricName?: string;
  }[];
}

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

/** A warmup that finished (the warmup layer's report has this shape). */
export interface WarmupSample {
  readonly modelName: string;
  readonly version: number;
  readonly kind: string;
  readonly runs: number;
  readonly elapsedMs: number;
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
  /** Export process metrics (CPU, memory, event-loop lag, GC) with the `visionserve_` prefix. Default true. */
  readonly processMetrics?: boolean | undefined;
}

export interface ServingMetrics extends RequestSink, InferenceObserver {
  /** Feed the model manager's version events here. */
  versionEvent(event: VersionEvent): void;
  /** Feed the warmup layer's reports here. */
  warmup(sample: WarmupSample): void;
  /** A worker thread died (it is replaced). */
  workerExited(): void;
  /** A sampled request of a model's logging_config was written to its file, or dropped. */
  requestLogged(model: string, outcome: 'written' | 'dropped'): void;
  /** The Prometheus text exposition. */
  render(): Promise<string>;
  /** Every metric's current values (scrape-time sources are read, as for `render`). */
  values(): Promise<MetricValues[]>;
  readonly contentType: string;
}

/** TF Serving's request/runtime latency buckets (µs): exponential, scale 10, power 1.8, 33 buckets. */
const TF_LATENCY_BUCKETS_US = exponentialBuckets(10, 1.8, 33);
/** TF Serving's batching queuing latency buckets (µs): scale 100, power 1.2, 52 buckets. */
const TF_QUEUE_BUCKETS_US = exponentialBuckets(100, 1.2, 52);
/** Seconds, 0.5 ms .. 60 s: request and phase latencies. */
const SECONDS_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
  60,
];
/** Seconds, model loads and warmups. */
const LOAD_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const BATCH_BUCKETS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256];
const BYTES_BUCKETS = exponentialBuckets(256, 4, 12);

/** TF Serving names the batch thread pool so; its queuing latency is labelled by it. */
const TF_BATCH_THREAD_POOL = 'model_server_batch_threads';

/** Caches label children of a metric by their values (prom-client hashes labels on every call otherwise). */
function children<T>(make: (values: readonly string[]) => T): (...values: string[]) => T {
  const cache = new Map<string, T>();
  return (...values) => {
    const key = values.join('\u0000');
    let child = cache.get(key);
    if (child === undefined) {
      child = make(values);
      cache.set(key, child);
    }
    return child;
  };
}

function zip(names: readonly string[], values: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  names.forEach((n, i) => (out[n] = values[i]!));
  return out;
}

/**
 * Prometheus metrics: TF Serving's names (`:tensorflow:serving:request_count`, ...) where
 * TF Serving has them, and the `visionserve_*` family (seconds, `_total`, histograms). Model
 * and version labels come only from versions that were served (unknown model names in
 * requests never create series); method labels are route / gRPC method names.
 */
export function createServingMetrics(options: ServingMetricsOptions = {}): ServingMetrics {
  const registry = new Registry();
  const registers = [registry];
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'visionserve_' });

  const counter = (name: string, help: string, labelNames: readonly string[]) => {
    const metric = new Counter({ name, help, labelNames, registers });
    return children((values) => metric.labels(zip(labelNames, values)));
  };
  const histogram = (name: string, help: string, labelNames: readonly string[], buckets: number[]) => {
    const metric = new Histogram({ name, help, labelNames, buckets, registers });
    return children((values) => metric.labels(zip(labelNames, values)));
  };

  // --- TF Serving's names
  const tfRequestCount = counter(':tensorflow:serving:request_count', 'The total number of requests.', [
    'model_name',
    'status',
  ]);
  const tfRequestLatency = histogram(
    ':tensorflow:serving:request_latency',
    'Distribution of wall time (in microseconds) for Tensorflow Serving request.',
    ['model_name', 'API', 'entrypoint', 'status'],
    TF_LATENCY_BUCKETS_US,
  );
  const tfRuntimeLatency = histogram(
    ':tensorflow:serving:runtime_latency',
    'Distribution of wall time (in microseconds) for the model runtime (onnxruntime).',
    ['model_name', 'API', 'runtime'],
    TF_LATENCY_BUCKETS_US,
  );
  const tfQueuingLatency = histogram(
    ':tensorflow:serving:batching_session:queuing_latency',
    'Distribution of wall time spent (in microseconds) in queuing',
    ['thread_pool_name'],
    TF_QUEUE_BUCKETS_US,
  );
  const tfProcessedBatchSize = histogram(
    ':tensorflow:serving:batching_session:processed_batch_size',
    'Tracks the batch size distribution on processing (padded, per request).',
    ['model_name'],
    BATCH_BUCKETS,
  );
  const tfWarmupLatency = histogram(
    ':tensorflow:serving:model_warmup_latency',
    'Distribution of wall time (in microseconds) for warming up the model.',
    ['model_path', 'status'],
    TF_LATENCY_BUCKETS_US,
  );
  const tfLoadAttempts = counter(
    ':tensorflow:cc:saved_model:load_attempt_count',
    'The number of times a model was loaded (here: an ONNX model version).',
    ['model_path', 'status'],
  );
  const tfLoadLatency = counter(
    ':tensorflow:cc:saved_model:load_latency',
    'Latency in microseconds for models that were successfully loaded.',
    ['model_path'],
  );

  // --- visionserve_*
  const requests = counter(
    'visionserve_requests_total',
    'Requests served, by API, method, status and model.',
    ['api', 'method', 'status', 'model', 'version'],
  );
  const requestSeconds = histogram(
    'visionserve_request_duration_seconds',
    'Request latency from arrival to the last response byte written.',
    ['api', 'method', 'status', 'model', 'version'],
    SECONDS_BUCKETS,
  );
  const phaseSeconds = histogram(
    'visionserve_request_phase_seconds',
    'Where a predict request spent its time: decode (read + parse), queue, inference, encode (+ write).',
    ['api', 'phase', 'model', 'version'],
    SECONDS_BUCKETS,
  );
  const inFlightGauge = new Gauge({
    name: 'visionserve_requests_in_flight',
    help: 'Requests received and not yet answered.',
    labelNames: ['api'],
    registers,
  });
  const inFlight = children((v) => inFlightGauge.labels({ api: v[0]! }));
  const requestBytes = histogram(
    'visionserve_request_body_bytes',
    'Request body sizes.',
    ['api', 'method'],
    BYTES_BUCKETS,
  );
  const responseBytes = histogram(
    'visionserve_response_body_bytes',
    'Response body sizes.',
    ['api', 'method'],
    BYTES_BUCKETS,
  );
  const predicts = counter('visionserve_predicts_total', 'Model runs requested through core, by outcome.', [
    'model',
    'version',
    'signature',
    'code',
  ]);
  const queueSeconds = histogram(
    'visionserve_queue_seconds',
    'Time a run waited for a worker instance (and, with batching, for its batch).',
    ['model', 'version'],
    SECONDS_BUCKETS,
  );
  const inferenceSeconds = histogram(
    'visionserve_inference_seconds',
    'onnxruntime session.run time of the batch a request ran in.',
    ['model', 'version'],
    SECONDS_BUCKETS,
  );
  const batchSize = histogram(
    'visionserve_batch_size',
    'Rows in the executed batch a request ran in (1 without batching; padding included).',
    ['model', 'version'],
    BATCH_BUCKETS,
  );
  const loadSeconds = histogram(
    'visionserve_model_load_seconds',
    'Model version load time (warmup included), by outcome.',
    ['model', 'outcome'],
    LOAD_BUCKETS,
  );
  const unloadSeconds = histogram(
    'visionserve_model_unload_seconds',
    'Model version unload time, waiting for in-flight requests included.',
    ['model'],
    LOAD_BUCKETS,
  );
  const warmupSeconds = histogram(
    'visionserve_warmup_seconds',
    'Warmup time of a model version, by kind (file: warmup records; built-in: zero tensors).',
    ['model', 'kind'],
    LOAD_BUCKETS,
  );
  const warmupRuns = counter('visionserve_warmup_runs_total', 'Warmup runs made.', ['model', 'kind']);
  const requestLogs = counter(
    ':tensorflow:serving:request_log_count',
    'The total number of requests logged from the model server sliced down by model_name and status code.',
    ['model_name', 'status'],
  );
  const workerExits = new Counter({
    name: 'visionserve_worker_restarts_total',
    help: 'Inference worker threads that died and were replaced.',
    registers,
  });

  // --- read at scrape time
  new Gauge({
    name: 'visionserve_model_state',
    help: 'Model version state: 1 for the state each known version is in (START, LOADING, AVAILABLE, UNLOADING, END).',
    labelNames: ['model', 'version', 'state'],
    registers,
    collect() {
      if (options.versionStates === undefined) return;
      this.reset();
      for (const s of options.versionStates()) {
        this.labels({ model: s.model, version: String(s.version), state: s.state }).set(1);
      }
    },
  });
  new Gauge({
    name: 'visionserve_queue_depth',
    help: 'Runs waiting for a worker instance, per available model version.',
    labelNames: ['model', 'version'],
    registers,
    collect() {
      if (options.queueDepths === undefined) return;
      this.reset();
      for (const q of options.queueDepths())
        this.labels({ model: q.model, version: String(q.version) }).set(q.queued);
    },
  });
  if (options.inflight !== undefined) {
    const read = options.inflight;
    new Gauge({
      name: 'visionserve_inflight_request_bytes',
      help: 'Request body bytes held by admitted requests (the --max_inflight_request_bytes budget).',
      registers,
      collect() {
        this.set(read().bytes);
      },
    });
  }
  if (options.grpcConnections !== undefined) {
    const read = options.grpcConnections;
    new Gauge({
      name: 'visionserve_grpc_connections',
      help: 'Connections open on the gRPC port.',
      registers,
      collect() {
        this.set(read()?.open ?? 0);
      },
    });
    const seen = new Map<string, number>();
    new Counter({
      name: 'visionserve_grpc_connections_limited_total',
      help: 'gRPC connections ended by a --grpc_channel_arguments limit (reason: max_age, max_idle, keepalive_timeout).',
      labelNames: ['reason'],
      registers,
      collect() {
        for (const [reason, total] of read()?.limitCloses ?? []) {
          const before = seen.get(reason) ?? 0;
          if (total > before) this.labels({ reason }).inc(total - before);
          seen.set(reason, total);
        }
      },
    });
  }
  if (options.listenerConnections !== undefined)
    registerListenerConnections(options.listenerConnections, registers);
  if (options.shed !== undefined) {
    const read = options.shed;
    const seen = new Map<string, number>();
    new Counter({
      name: 'visionserve_shed_requests_total',
      help: 'Requests refused by admission control (reason: inflight-budget, queue-wait or json-decode).',
      labelNames: ['reason'],
      registers,
      collect() {
        for (const [reason, total] of read()) {
          const before = seen.get(reason) ?? 0;
          if (total > before) this.labels({ reason }).inc(total - before);
          seen.set(reason, total);
        }
      },
    });
  }
  if (options.batching !== undefined) {
    const read = options.batching;
    const seen = new Map<string, BatchingSample>();
    const batches = new Counter({
      name: 'visionserve_batches_total',
      help: 'Batches run by the batching layer.',
      labelNames: ['model', 'version'],
      registers,
    });
    const padding = new Counter({
      name: 'visionserve_batch_padding_rows_total',
      help: 'Padding rows added to reach an allowed batch size.',
      labelNames: ['model', 'version'],
      registers,
    });
    const full = new Counter({
      name: 'visionserve_batch_queue_full_total',
      help: 'Requests refused because the batching queue was full.',
      labelNames: ['model', 'version'],
      registers,
    });
    const wrapped = new Counter({
      name: ':tensorflow:serving:batching_session:wrapped_run_count',
      help: 'Total count of run calls on the wrapped session',
      registers,
    });
    new Gauge({
      name: 'visionserve_batch_queued_tasks',
      help: 'Requests waiting in the batching queues.',
      labelNames: ['model', 'version'],
      registers,
      collect() {
        this.reset();
        for (const b of read()) {
          const labels = { model: b.model, version: String(b.version) };
          const key = `${b.model}\u0000${b.version}`;
          const last = seen.get(key);
          const delta = (now: number, before: number | undefined): number => Math.max(0, now - (before ?? 0));
          batches.labels(labels).inc(delta(b.batches, last?.batches));
          wrapped.inc(delta(b.batches, last?.batches));
          padding.labels(labels).inc(delta(b.paddingRows, last?.paddingRows));
          full.labels(labels).inc(delta(b.rejectedFull, last?.rejectedFull));
          seen.set(key, b);
          this.labels(labels).set(b.queuedTasks);
        }
      },
    });
  }

  if (options.responseCache !== undefined) {
    const read = options.responseCache;
    // Each series reads the cache's counters when scraped (monotonic per model: added as deltas).
    const perModel = (field: 'hits' | 'misses' | 'evictions', help: string): void => {
      const seen = new Map<string, number>();
      new Counter({
        name: `visionserve_response_cache_${field}_total`,
        help,
        labelNames: ['model'],
        registers,
        collect() {
          for (const [model, now] of read()?.models ?? []) {
            const delta = now[field] - (seen.get(model) ?? 0);
            if (delta > 0) this.labels({ model }).inc(delta);
            seen.set(model, now[field]);
          }
        },
      });
    };
    const gauge = (name: string, field: 'bytes' | 'entries' | 'maxBytes', help: string): void => {
      new Gauge({
        name: `visionserve_response_cache_${name}`,
        help,
        registers,
        collect() {
          const sample = read();
          if (sample !== undefined) this.set(sample[field]);
        },
      });
    };
    perModel('hits', 'Predicts answered from the response cache (Triton: nv_cache_num_hits_per_model).');
    perModel('misses', 'Predicts of opted-in models that were not in the response cache and ran.');
    perModel('evictions', 'Response cache entries dropped to stay within --response_cache_bytes.');
    gauge('bytes', 'bytes', 'Bytes held by the response cache (outputs plus a fixed overhead per entry).');
    gauge('entries', 'entries', 'Responses held by the response cache.');
    gauge('max_bytes', 'maxBytes', 'The response cache bound (--response_cache_bytes).');
  }

  const predictObserver = (start: PredictStart) => {
    const version = String(start.version);
    return (end: PredictEnd): void => {
      predicts(start.model, version, start.signatureName, Code[end.code]).inc();
      const t = end.timings;
      if (end.code === Code.OK)
        tfRuntimeLatency(start.model, 'Predict', 'ONNX').observe(end.durationMs * 1000);
      if (t === undefined) return;
      queueSeconds(start.model, version).observe(t.queueMs / 1000);
      inferenceSeconds(start.model, version).observe(t.computeMs / 1000);
      batchSize(start.model, version).observe(t.batchSize);
      if (options.batching !== undefined) {
        tfQueuingLatency(TF_BATCH_THREAD_POOL).observe(t.queueMs * 1000);
        tfProcessedBatchSize(start.model).observe(t.batchSize);
      }
    };
  };

  return {
    contentType: registry.contentType,
    render: () => registry.metrics(),
    values: () => registry.getMetricsAsJSON() as unknown as Promise<MetricValues[]>,

    requestStarted(record) {
      inFlight(record.api).inc();
    },

    requestEnded(record: RequestRecord, end: RequestEnd, endedAt: number) {
      inFlight(record.api).dec();
      const model = record.model ?? '';
      const version = record.version === undefined ? '' : String(record.version);
      const seconds = (endedAt - record.startedAt) / 1000;
      requests(record.api, record.method, end.status, model, version).inc();
      requestSeconds(record.api, record.method, end.status, model, version).observe(seconds);
      requestBytes(record.api, record.method).observe(end.bytesIn);
      responseBytes(record.api, record.method).observe(end.bytesOut);
      if (record.model === undefined) return;
      const code = Code[end.code];
      tfRequestCount(model, code).inc();
      tfRequestLatency(model, 'Predict', record.transport === 'grpc' ? 'GRPC' : 'REST', code).observe(
        seconds * 1e6,
      );
      const started = record.predictStartedAt;
      const ended = record.predictEndedAt;
      if (started !== undefined)
        phaseSeconds(record.api, 'decode', model, version).observe((started - record.startedAt) / 1000);
      if (ended !== undefined)
        phaseSeconds(record.api, 'encode', model, version).observe((endedAt - ended) / 1000);
      const t = record.timings;
      if (t !== undefined) {
        phaseSeconds(record.api, 'queue', model, version).observe(t.queueMs / 1000);
        phaseSeconds(record.api, 'inference', model, version).observe(t.computeMs / 1000);
      }
    },

    predictStarting: predictObserver,

    versionEvent(event) {
      if (event.type === 'assets-refreshed') return;
      const path = `${event.basePath}/${event.version}`;
      if (event.type === 'loaded') {
        loadSeconds(event.model, 'ok').observe(event.durationMs / 1000);
        tfLoadAttempts(path, 'success').inc();
        tfLoadLatency(path).inc(Math.round(event.durationMs * 1000));
      } else if (event.type === 'load-failed') {
        loadSeconds(event.model, 'failed').observe(event.durationMs / 1000);
        tfLoadAttempts(path, 'fail').inc();
      } else {
        unloadSeconds(event.model).observe(event.durationMs / 1000);
      }
    },

    warmup(sample) {
      warmupSeconds(sample.modelName, sample.kind).observe(sample.elapsedMs / 1000);
      warmupRuns(sample.modelName, sample.kind).inc(sample.runs);
      tfWarmupLatency(`${sample.modelName}/${sample.version}`, 'OK').observe(sample.elapsedMs * 1000);
    },

    workerExited() {
      workerExits.inc();
    },

    requestLogged(model, outcome) {
      requestLogs(model, outcome === 'written' ? 'OK' : 'UNAVAILABLE').inc();
    },
  };
}

/** `visionserve_connections{listener}` and `visionserve_connections_guarded_total{listener,reason}`. */
function registerListenerConnections(
  read: NonNullable<ServingMetricsOptions['listenerConnections']>,
  registers: Registry[],
): void {
  new Gauge({
    name: 'visionserve_connections',
    help: 'Connections open on each listener (rest, sagemaker, grpc).',
    labelNames: ['listener'],
    registers,
    collect() {
      for (const { listener, open } of read()) this.labels({ listener }).set(open);
    },
  });
  const seen = new Map<string, number>();
  new Counter({
    name: 'visionserve_connections_guarded_total',
    help: 'Connections closed or refused by a connection limit (reason: first_bytes_timeout, evicted_idle, refused_at_cap, refused_per_address).',
    labelNames: ['listener', 'reason'],
    registers,
    collect() {
      for (const { listener, guardCloses } of read()) {
        for (const [reason, total] of guardCloses) {
          const key = `${listener}\0${reason}`;
          const before = seen.get(key) ?? 0;
          if (total > before) this.labels({ listener, reason }).inc(total - before);
          seen.set(key, total);
        }
      }
    },
  });
}
