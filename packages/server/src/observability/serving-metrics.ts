import { Code } from '@visionserve/protocol';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { InferenceObserver, PredictEnd, PredictStart } from '../core/inference-observer.js';
import type { VersionEvent } from '../core/version-entry.js';
import type { RequestEnd } from '../frontends/shared/request-observer.js';
import type { RequestRecord, RequestSink } from './request-hub.js';
import { metricFactory } from './metric-factory.js';
import type { ServingMetricsOptions } from './metric-sources.js';
import { registerScrapeCollectors } from './scrape-collectors.js';
import { TF_BATCH_THREAD_POOL, createTfsMetrics, type TfsMetrics } from './tfs-metrics.js';
import { createVisionserveMetrics, type VisionserveMetrics } from './visionserve-metrics.js';

export type {
  BatchingSample,
  ResponseCacheSample,
  ServingMetricsOptions,
  VersionStateSample,
} from './metric-sources.js';

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

/** A warmup that finished (the warmup layer's report has this shape). */
export interface WarmupSample {
  readonly modelName: string;
  readonly version: number;
  readonly kind: string;
  readonly runs: number;
  readonly elapsedMs: number;
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

/**
 * Prometheus metrics: TF Serving's names (`:tensorflow:serving:request_count`, ...) where
 * TF Serving has them, and the `visionserve_*` family (seconds, `_total`, histograms). Model
 * and version labels come only from versions that were served (unknown model names in
 * requests never create series); method labels are route / gRPC method names.
 */
/** The metric families one ServingMetrics feeds. */
interface Families {
  readonly tf: TfsMetrics;
  readonly vs: VisionserveMetrics;
  /** Batching is on: TF Serving's batching histograms are fed too. */
  readonly batching: boolean;
}

function predictObserver({ tf, vs, batching }: Families, start: PredictStart): (end: PredictEnd) => void {
  const version = String(start.version);
  return (end: PredictEnd): void => {
    vs.predicts(start.model, version, start.signatureName, Code[end.code]).inc();
    const t = end.timings;
    if (end.code === Code.OK)
      tf.tfRuntimeLatency(start.model, 'Predict', 'ONNX').observe(end.durationMs * 1000);
    if (t === undefined) return;
    vs.queueSeconds(start.model, version).observe(t.queueMs / 1000);
    vs.inferenceSeconds(start.model, version).observe(t.computeMs / 1000);
    vs.batchSize(start.model, version).observe(t.batchSize);
    if (batching) {
      tf.tfQueuingLatency(TF_BATCH_THREAD_POOL).observe(t.queueMs * 1000);
      tf.tfProcessedBatchSize(start.model).observe(t.batchSize);
    }
  };
}

function recordRequestEnd(
  { tf, vs }: Families,
  record: RequestRecord,
  end: RequestEnd,
  endedAt: number,
): void {
  vs.inFlight(record.api).dec();
  const model = record.model ?? '';
  const version = record.version === undefined ? '' : String(record.version);
  const seconds = (endedAt - record.startedAt) / 1000;
  vs.requests(record.api, record.method, end.status, model, version).inc();
  vs.requestSeconds(record.api, record.method, end.status, model, version).observe(seconds);
  vs.requestBytes(record.api, record.method).observe(end.bytesIn);
  vs.responseBytes(record.api, record.method).observe(end.bytesOut);
  if (record.model === undefined) return;
  const code = Code[end.code];
  tf.tfRequestCount(model, code).inc();
  tf.tfRequestLatency(model, 'Predict', record.transport === 'grpc' ? 'GRPC' : 'REST', code).observe(
    seconds * 1e6,
  );
  const phase = (name: string, ms: number): void => {
    vs.phaseSeconds(record.api, name, model, version).observe(ms / 1000);
  };
  const started = record.predictStartedAt;
  const ended = record.predictEndedAt;
  if (started !== undefined) phase('decode', started - record.startedAt);
  if (ended !== undefined) phase('encode', endedAt - ended);
  const t = record.timings;
  if (t !== undefined) {
    phase('queue', t.queueMs);
    phase('inference', t.computeMs);
  }
}

function recordVersionEvent({ tf, vs }: Families, event: VersionEvent): void {
  if (event.type === 'assets-refreshed') return;
  const path = `${event.basePath}/${event.version}`;
  if (event.type === 'loaded') {
    vs.loadSeconds(event.model, 'ok').observe(event.durationMs / 1000);
    tf.tfLoadAttempts(path, 'success').inc();
    tf.tfLoadLatency(path).inc(Math.round(event.durationMs * 1000));
  } else if (event.type === 'load-failed') {
    vs.loadSeconds(event.model, 'failed').observe(event.durationMs / 1000);
    tf.tfLoadAttempts(path, 'fail').inc();
  } else {
    vs.unloadSeconds(event.model).observe(event.durationMs / 1000);
  }
}

function recordWarmup({ tf, vs }: Families, sample: WarmupSample): void {
  vs.warmupSeconds(sample.modelName, sample.kind).observe(sample.elapsedMs / 1000);
  vs.warmupRuns(sample.modelName, sample.kind).inc(sample.runs);
  tf.tfWarmupLatency(`${sample.modelName}/${sample.version}`, 'OK').observe(sample.elapsedMs * 1000);
}

export function createServingMetrics(options: ServingMetricsOptions = {}): ServingMetrics {
  const registry = new Registry();
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'visionserve_' });
  const factory = metricFactory(registry);
  const families: Families = {
    tf: createTfsMetrics(factory),
    vs: createVisionserveMetrics(factory),
    batching: options.batching !== undefined,
  };
  registerScrapeCollectors(factory.registers, options);
  const { tf, vs } = families;
  return {
    contentType: registry.contentType,
    render: () => registry.metrics(),
    values: () => registry.getMetricsAsJSON() as unknown as Promise<MetricValues[]>,
    requestStarted: (record) => {
      vs.inFlight(record.api).inc();
    },
    requestEnded: (record, end, endedAt) => {
      recordRequestEnd(families, record, end, endedAt);
    },
    predictStarting: (start) => predictObserver(families, start),
    versionEvent: (event) => {
      recordVersionEvent(families, event);
    },
    warmup: (sample) => {
      recordWarmup(families, sample);
    },
    workerExited: () => {
      vs.workerExits.inc();
    },
    requestLogged: (model, outcome) => {
      tf.requestLogs(model, outcome === 'written' ? 'OK' : 'UNAVAILABLE').inc();
    },
  };
}
