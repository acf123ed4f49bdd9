/**
 * The statistics of one request: one `withServable` scope on one version. A scope that
 * calls predict is an inference request; when it settles it is recorded as a success (with
 * where its time went) or a failure. Model runs are recorded as they finish, by whichever
 * call the session reports them to (see RunOptions.onExecution).
 */
import type { InferenceStatistics } from './inference-statistics.js';
import type { RunExecution, RunTimings } from './session.js';

/** One model run of the request, from right before session.run to its settling. */
export interface RunRecord {
  /** What to pass to session.run. */
  readonly options: {
    readonly onTimings: (timings: RunTimings) => void;
    readonly onExecution: (execution: RunExecution) => void;
  };
  /** The run settled (resolved or rejected). */
  ended(): void;
}

export interface RequestStatistics {
  /**
   * The request's body arrived at `at` (process.hrtime.bigint()), later than the scope began
   * (a scope opened at the headers, before the upload): the request is timed from there.
   */
  arrived(at: bigint): void;
  /** A predict call began: the scope is an inference request. */
  predicting(): void;
  /** A model run of `items` batch items is about to start. */
  runStarting(items: number): RunRecord;
  /** The scope settled: records the request (nothing when it never called predict). */
  finish(ok: boolean): void;
}

const nowNs = (): bigint => process.hrtime.bigint();
const MS = 1e6;

/**
 * Statistics of a request to `model` version `version`, timed from `arrivedAt`
 * (process.hrtime.bigint()). compute_input runs from arrival to the first run's start,
 * queue is the runtime's reported wait (at most the run's span), compute_infer the rest of
 * the run's span, compute_output from the last run's end to the scope's end.
 */
export function createRequestStatistics(
  recorder: InferenceStatistics,
  model: string,
  version: number,
  scopeArrivedAt: bigint,
): RequestStatistics {
  let arrivedAt = scopeArrivedAt;
  let predicted = false;
  let items = 0;
  let queueNs = 0;
  let inferNs = 0;
  let firstRunStart: bigint | undefined;
  let lastRunEnd: bigint | undefined;
  let finished = false;
  return {
    arrived(at) {
      if (firstRunStart === undefined && at > arrivedAt) arrivedAt = at;
    },
    predicting() {
      predicted = true;
    },
    runStarting(runItems) {
      const start = nowNs();
      firstRunStart ??= start;
      let queuedMs = 0;
      let ended = false;
      return {
        options: {
          onTimings: (t) => {
            queuedMs = t.queueMs;
          },
          onExecution: (e) => {
            recorder.recordExecution(model, version, {
              batchSize: e.batchSize ?? runItems,
              computeNs: e.computeMs * MS,
            });
          },
        },
        ended() {
          if (ended || finished) return;
          ended = true;
          const end = nowNs();
          const span = Number(end - start);
          const queued = Math.min(Math.max(0, queuedMs * MS), span);
          items += runItems;
          queueNs += queued;
          inferNs += span - queued;
          lastRunEnd = end;
        },
      };
    },
    finish(ok) {
      if (finished || !predicted) return;
      finished = true;
      const end = nowNs();
      const totalNs = Number(end - arrivedAt);
      if (!ok || firstRunStart === undefined || lastRunEnd === undefined) {
        recorder.recordFailure(model, version, totalNs);
        return;
      }
      recorder.recordSuccess(model, version, {
        items,
        totalNs,
        inputNs: Number(firstRunStart - arrivedAt),
        queueNs,
        inferNs,
        outputNs: Number(end - lastRunEnd),
      });
    },
  };
}
