/**
 * Per model version inference statistics: the counters Triton's statistics extension
 * reports, kept by core for every request that ran a model version, whatever protocol it
 * came in by (KServe, TF Serving REST and gRPC, /invocations). Requests and model runs
 * are recorded apart: with batching, several requests share one run.
 */

/** A count and the nanoseconds it accumulated. */
export interface StatisticDuration {
  readonly count: number;
  readonly ns: number;
}

/** Where one successful request's time went, in nanoseconds; the parts add up to `totalNs`. */
export interface RequestTimings {
  /** Batch items of the request (its dimension 0 for a model that batches, else 1). */
  readonly items: number;
  /** From the request's arrival to the end of its core call (success duration). */
  readonly totalNs: number;
  /** Arrival to the model run: decoding and checking the inputs (compute_input). */
  readonly inputNs: number;
  /** Waiting for an instance and, with batching, for the batch to form (queue). */
  readonly queueNs: number;
  /** The run: moving tensors to the worker and back, and the model itself (compute_infer). */
  readonly inferNs: number;
  /** The run's end to the end of the core call: post-processing, encoding (compute_output). */
  readonly outputNs: number;
}

/** One model run (a batch of merged requests with batching). */
export interface ExecutionTimings {
  /** Rows the model ran (padding included). */
  readonly batchSize: number;
  /** The model's own compute time (onnxruntime's run in the worker). */
  readonly computeNs: number;
}

/** Counters of the runs of one batch size. */
export interface BatchStatistics {
  readonly batchSize: number;
  /** Runs (count); the runtime does not time input preparation apart from the run, so ns is 0. */
  readonly computeInput: StatisticDuration;
  /** Runs and their compute time. */
  readonly computeInfer: StatisticDuration;
  /** Runs (count); output extraction is not timed apart from the run, so ns is 0. */
  readonly computeOutput: StatisticDuration;
}

/** Everything recorded for one model version since it was loaded. */
export interface VersionStatistics {
  /** Milliseconds since the epoch of the last request; 0 when none. */
  readonly lastInferenceMs: number;
  /** Batch items inferred (sum of the successful requests' items). */
  readonly inferenceCount: number;
  /** Model runs. */
  readonly executionCount: number;
  readonly success: StatisticDuration;
  readonly fail: StatisticDuration;
  readonly queue: StatisticDuration;
  readonly computeInput: StatisticDuration;
  readonly computeInfer: StatisticDuration;
  readonly computeOutput: StatisticDuration;
  /** By executed batch size, ascending. */
  readonly batches: readonly BatchStatistics[];
}

/** Reads the counters (what the statistics extension answers). */
export interface InferenceStatisticsReader {
  /** The counters of a version; all zero when nothing was recorded. */
  snapshot(model: string, version: number): VersionStatistics;
}

export interface InferenceStatistics extends InferenceStatisticsReader {
  /** One successful request. */
  recordSuccess(model: string, version: number, timings: RequestTimings): void;
  /** One request that reached the version and failed after `totalNs`. */
  recordFailure(model: string, version: number, totalNs: number): void;
  /** One model run. */
  recordExecution(model: string, version: number, execution: ExecutionTimings): void;
  /** Drops a version's counters (on unload), or every version's when `version` is omitted. */
  forget(model: string, version?: number): void;
}

interface Counter {
  count: number;
  ns: number;
}

interface MutableBatch {
  readonly input: Counter;
  readonly infer: Counter;
  readonly output: Counter;
}

interface MutableVersion {
  lastInferenceMs: number;
  inferenceCount: number;
  executionCount: number;
  readonly success: Counter;
  readonly fail: Counter;
  readonly queue: Counter;
  readonly input: Counter;
  readonly infer: Counter;
  readonly output: Counter;
  readonly batches: Map<number, MutableBatch>;
}

const counter = (): Counter => ({ count: 0, ns: 0 });
const add = (c: Counter, ns: number): void => {
  c.count++;
  c.ns += Math.max(0, Math.round(ns));
};
const frozen = (c: Counter): StatisticDuration => ({ count: c.count, ns: c.ns });

export interface InferenceStatisticsOptions {
  /** Wall clock in ms since the epoch, for `lastInferenceMs`. Default Date.now. */
  readonly now?: () => number;
}

export function createInferenceStatistics(options: InferenceStatisticsOptions = {}): InferenceStatistics {
  const now = options.now ?? Date.now;
  const models = new Map<string, Map<number, MutableVersion>>();

  const entry = (model: string, version: number): MutableVersion => {
    let versions = models.get(model);
    if (versions === undefined) {
      versions = new Map();
      models.set(model, versions);
    }
    let v = versions.get(version);
    if (v === undefined) {
      v = {
        lastInferenceMs: 0,
        inferenceCount: 0,
        executionCount: 0,
        success: counter(),
        fail: counter(),
        queue: counter(),
        input: counter(),
        infer: counter(),
        output: counter(),
        batches: new Map(),
      };
      versions.set(version, v);
    }
    return v;
  };

  return {
    recordSuccess(model, version, timings) {
      const v = entry(model, version);
      v.lastInferenceMs = now();
      v.inferenceCount += timings.items;
      add(v.success, timings.totalNs);
      add(v.queue, timings.queueNs);
      add(v.input, timings.inputNs);
      add(v.infer, timings.inferNs);
      add(v.output, timings.outputNs);
    },
    recordFailure(model, version, totalNs) {
      const v = entry(model, version);
      v.lastInferenceMs = now();
      add(v.fail, totalNs);
    },
    recordExecution(model, version, execution) {
      const v = entry(model, version);
      v.executionCount++;
      let batch = v.batches.get(execution.batchSize);
      if (batch === undefined) {
        batch = { input: counter(), infer: counter(), output: counter() };
        v.batches.set(execution.batchSize, batch);
      }
      add(batch.input, 0);
      add(batch.infer, execution.computeNs);
      add(batch.output, 0);
    },
    snapshot(model, version) {
      const v = models.get(model)?.get(version);
      const zero = counter();
      if (v === undefined) {
        return {
          lastInferenceMs: 0,
          inferenceCount: 0,
          executionCount: 0,
          success: zero,
          fail: zero,
          queue: zero,
          computeInput: zero,
          computeInfer: zero,
          computeOutput: zero,
          batches: [],
        };
      }
      return {
        lastInferenceMs: v.lastInferenceMs,
        inferenceCount: v.inferenceCount,
        executionCount: v.executionCount,
        success: frozen(v.success),
        fail: frozen(v.fail),
        queue: frozen(v.queue),
        computeInput: frozen(v.input),
        computeInfer: frozen(v.infer),
        computeOutput: frozen(v.output),
        batches: [...v.batches.entries()]
          .sort(([a], [b]) => a - b)
          .map(([batchSize, b]) => ({
            batchSize,
            computeInput: frozen(b.input),
            computeInfer: frozen(b.infer),
            computeOutput: frozen(b.output),
          })),
      };
    },
    forget(model, version) {
      if (version === undefined) {
        models.delete(model);
        return;
      }
      const versions = models.get(model);
      versions?.delete(version);
      if (versions?.size === 0) models.delete(model);
    },
  };
}
