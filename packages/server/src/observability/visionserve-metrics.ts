import { Counter, Gauge, exponentialBuckets } from 'prom-client';
import { BATCH_BUCKETS, children, type MetricFactory } from './metric-factory.js';

/** Seconds, 0.5 ms .. 60 s: request and phase latencies. */
const SECONDS_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
  60,
];
/** Seconds, model loads and warmups. */
const LOAD_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const BYTES_BUCKETS = exponentialBuckets(256, 4, 12);

/** The `visionserve_*` family: seconds, `_total`, histograms. */
export type VisionserveMetrics = ReturnType<typeof createVisionserveMetrics>;

export function createVisionserveMetrics(f: MetricFactory) {
  const requests = f.counter(
    'visionserve_requests_total',
    'Requests served, by API, method, status and model.',
    ['api', 'method', 'status', 'model', 'version'],
  );
  const requestSeconds = f.histogram(
    'visionserve_request_duration_seconds',
    'Request latency from arrival to the last response byte written.',
    ['api', 'method', 'status', 'model', 'version'],
    SECONDS_BUCKETS,
  );
  const phaseSeconds = f.histogram(
    'visionserve_request_phase_seconds',
    'Where a predict request spent its time: decode (read + parse), queue, inference, encode (+ write).',
    ['api', 'phase', 'model', 'version'],
    SECONDS_BUCKETS,
  );
  const inFlightGauge = new Gauge({
    name: 'visionserve_requests_in_flight',
    help: 'Requests received and not yet answered.',
    labelNames: ['api'],
    registers: f.registers,
  });
  const inFlight = children((v) => inFlightGauge.labels({ api: v[0]! }));
  const requestBytes = f.histogram(
    'visionserve_request_body_bytes',
    'Request body sizes.',
    ['api', 'method'],
    BYTES_BUCKETS,
  );
  const responseBytes = f.histogram(
    'visionserve_response_body_bytes',
    'Response body sizes.',
    ['api', 'method'],
    BYTES_BUCKETS,
  );
  const predicts = f.counter('visionserve_predicts_total', 'Model runs requested through core, by outcome.', [
    'model',
    'version',
    'signature',
    'code',
  ]);
  const queueSeconds = f.histogram(
    'visionserve_queue_seconds',
    'Time a run waited for a worker instance (and, with batching, for its batch).',
    ['model', 'version'],
    SECONDS_BUCKETS,
  );
  const inferenceSeconds = f.histogram(
    'visionserve_inference_seconds',
    'onnxruntime session.run time of the batch a request ran in.',
    ['model', 'version'],
    SECONDS_BUCKETS,
  );
  const batchSize = f.histogram(
    'visionserve_batch_size',
    'Rows in the executed batch a request ran in (1 without batching; padding included).',
    ['model', 'version'],
    BATCH_BUCKETS,
  );
  const loadSeconds = f.histogram(
    'visionserve_model_load_seconds',
    'Model version load time (warmup included), by outcome.',
    ['model', 'outcome'],
    LOAD_BUCKETS,
  );
  const unloadSeconds = f.histogram(
    'visionserve_model_unload_seconds',
    'Model version unload time, waiting for in-flight requests included.',
    ['model'],
    LOAD_BUCKETS,
  );
  const warmupSeconds = f.histogram(
    'visionserve_warmup_seconds',
    'Warmup time of a model version, by kind (file: warmup records; built-in: zero tensors).',
    ['model', 'kind'],
    LOAD_BUCKETS,
  );
  const warmupRuns = f.counter('visionserve_warmup_runs_total', 'Warmup runs made.', ['model', 'kind']);
  const workerExits = new Counter({
    name: 'visionserve_worker_restarts_total',
    help: 'Inference worker threads that died and were replaced.',
    registers: f.registers,
  });

  return {
    requests,
    requestSeconds,
    phaseSeconds,
    inFlightGauge,
    inFlight,
    requestBytes,
    responseBytes,
    predicts,
    queueSeconds,
    inferenceSeconds,
    batchSize,
    loadSeconds,
    unloadSeconds,
    warmupSeconds,
    warmupRuns,
    workerExits,
  };
}
