import { exponentialBuckets } from 'prom-client';
import { BATCH_BUCKETS, type MetricFactory } from './metric-factory.js';

/** TF Serving's request/runtime latency buckets (µs): exponential, scale 10, power 1.8, 33 buckets. */
const TF_LATENCY_BUCKETS_US = exponentialBuckets(10, 1.8, 33);
/** TF Serving's batching queuing latency buckets (µs): scale 100, power 1.2, 52 buckets. */
const TF_QUEUE_BUCKETS_US = exponentialBuckets(100, 1.2, 52);

/** TF Serving names the batch thread pool so; its queuing latency is labelled by it. */
export const TF_BATCH_THREAD_POOL = 'model_server_batch_threads';

/** The metrics TF Serving has, under its names and units (microseconds). */
export type TfsMetrics = ReturnType<typeof createTfsMetrics>;

export function createTfsMetrics(f: MetricFactory) {
  const tfRequestCount = f.counter(':tensorflow:serving:request_count', 'The total number of requests.', [
    'model_name',
    'status',
  ]);
  const tfRequestLatency = f.histogram(
    ':tensorflow:serving:request_latency',
    'Distribution of wall time (in microseconds) for Tensorflow Serving request.',
    ['model_name', 'API', 'entrypoint', 'status'],
    TF_LATENCY_BUCKETS_US,
  );
  const tfRuntimeLatency = f.histogram(
    ':tensorflow:serving:runtime_latency',
    'Distribution of wall time (in microseconds) for the model runtime (onnxruntime).',
    ['model_name', 'API', 'runtime'],
    TF_LATENCY_BUCKETS_US,
  );
  const tfQueuingLatency = f.histogram(
    ':tensorflow:serving:batching_session:queuing_latency',
    'Distribution of wall time spent (in microseconds) in queuing',
    ['thread_pool_name'],
    TF_QUEUE_BUCKETS_US,
  );
  const tfProcessedBatchSize = f.histogram(
    ':tensorflow:serving:batching_session:processed_batch_size',
    'Tracks the batch size distribution on processing (padded, per request).',
    ['model_name'],
    BATCH_BUCKETS,
  );
  const tfWarmupLatency = f.histogram(
    ':tensorflow:serving:model_warmup_latency',
    'Distribution of wall time (in microseconds) for warming up the model.',
    ['model_path', 'status'],
    TF_LATENCY_BUCKETS_US,
  );
  const tfLoadAttempts = f.counter(
    ':tensorflow:cc:saved_model:load_attempt_count',
    'The number of times a model was loaded (here: an ONNX model version).',
    ['model_path', 'status'],
  );
  const tfLoadLatency = f.counter(
    ':tensorflow:cc:saved_model:load_latency',
    'Latency in microseconds for models that were successfully loaded.',
    ['model_path'],
  );

  const requestLogs = f.counter(
    ':tensorflow:serving:request_log_count',
    'The total number of requests logged from the model server sliced down by model_name and status code.',
    ['model_name', 'status'],
  );
  return {
    tfRequestCount,
    tfRequestLatency,
    tfRuntimeLatency,
    tfQueuingLatency,
    tfProcessedBatchSize,
    tfWarmupLatency,
    tfLoadAttempts,
    tfLoadLatency,
    requestLogs,
  };
}
