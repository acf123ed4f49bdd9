/**
 * Per model version inference statistics (the counters Triton's statistics extension
 * reports), recorded by frontends for each request that reached a model version. Protocol
 * neutral: the KServe HTTP and gRPC bindings share one recorder.
 *
 * What is measured today, and where per-run timings plug in: a frontend measures its own
 * decoding (compute_input), the servable's predict call (compute_infer) and its encoding
 * (compute_output). The predict span includes the wait for a free worker instance and, with
 * batching, for the batch to form, because the runtime does not report them yet; until it
 * does, `queueNs` is left undefined, the queue counter still counts every request (clients
 * such as perf_analyzer key on it) with 0 ns, and `execution_count` counts requests, not
 * merged batch runs. When the runtime reports a run's queue wait and compute time, pass
 * them as `queueNs` and `inferNs`, and `executions` as the runs the request started.
 */

/** A count and the nanoseconds it accumulated. */
export interface StatisticDuration {
  readonly count: number;
  readonly ns: number;
}

/** Where one successful request's time went, in nanoseconds. */
export interface RequestTimings {
  /** From the request's arrival to its encoded response (success duration). */
  readonly totalNs: number;
  /** Decoding and checking the inputs (compute_input). */
  readonly inputNs: number;
  /** Waiting for an instance / a batch (queue); undefined while the runtime does not report it. */
  readonly queueNs?: number | undefined;
  /** Running the model (compute_infer); includes the queue wait when `queueNs` is undefined. */
  readonly inferNs: number;
  /** Post-processing and encoding the outputs (compute_output). */
  readonly outputNs: number;
}

/** Counters of one batch size (the request's dimension 0 for batching models, else 1). */
export interface BatchStatistics {
  readonly batchSize: number;
  readonly computeInput: StatisticDuration;
  readonly computeInfer: StatisticDuration;
  readonly computeOutput: StatisticDuration;
}

/** Everything recorded for one model version since it was loaded. */
export interface VersionStatistics {
  /** Milliseconds since the epoch of the last request; 0 when none. */
  readonly lastInferenceMs: number;
  /** Batch items inferred (sum of the successful requests' batch sizes). */
  readonly inferenceCount: number;
  /** Model runs (see the module comment: requests until the runtime reports runs). */
  readonly executionCount: number;
  readonly success: StatisticDuration;
  readonly fail: StatisticDuration;
  readonly queue: StatisticDuration;
  readonly computeInput: StatisticDuration;
  readonly computeInfer: StatisticDuration;
  readonly computeOutput: StatisticDuration;
  /** By batch size, ascending. */
  readonly batches: readonly BatchStatistics[];
}

export interface InferenceStatistics {
  /** One successful request of `batchSize` items. */
  recordSuccess(
    model: string,
    version: number,
    batchSize: number,
    timings: RequestTimings,
    executions?: number,
  ): void;
  /** One request that reached the version and failed after `totalNs`. */
  recordFailure(model: string, version: number, totalNs: number): void;
  /** The counters of a version; all zero when nothing was recorded. */
  snapshot(model: string, version: number): VersionStatistics;
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
    recordSuccess(model, version, batchSize, timings, executions = 1) {
      const v = entry(model, version);
      v.lastInferenceMs = now();
      v.inferenceCount += batchSize;
      v.executionCount += executions;
      add(v.success, timings.totalNs);
      add(v.queue, timings.queueNs ?? 0);
      add(v.input, timings.inputNs);
      add(v.infer, timings.inferNs);
      add(v.output, timings.outputNs);
      let batch = v.batches.get(batchSize);
      if (batch === undefined) {
        batch = { input: counter(), infer: counter(), output: counter() };
        v.batches.set(batchSize, batch);
      }
      add(batch.input, timings.inputNs);
      add(batch.infer, timings.inferNs);
      add(batch.output, timings.outputNs);
    },
    recordFailure(model, version, totalNs) {
      const v = entry(model, version);
      v.lastInferenceMs = now();
      add(v.fail, totalNs);
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
