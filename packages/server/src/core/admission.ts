import { Code, ServingError, overloadedError } from '@visionserve/protocol';
import type { Session } from './session.js';

export interface AdmissionPolicy {
  /**
   * Refuse a request when the work already queued for its model version would make it
   * wait longer than this before it starts, in ms (0: no limit, the default: requests queue
   * as in TF Serving, bounded by their deadline and the queue's length). An opt-in bound on
   * the latency of accepted requests.
   */
  readonly maxQueueWaitMs: number;
  /**
   * Runs queued per instance that `maxQueueWaitMs` never refuses: a burst of a few
   * requests per instance is queued whatever the estimated wait (the estimate of a model
   * whose run time varies is noisy, and an idle instance must never be starved).
   */
  readonly burstPerInstance: number;
  /**
   * A body still arriving counts as queued work while it arrives at least this fast, in
   * bytes per second since its admission (see PendingRuns). Default 0: bodies on their way
   * are not counted.
   */
  readonly minArrivalBytesPerSecond?: number | undefined;
  /** Told of every refusal (e.g. to log that shedding started). Default: nothing. */
  readonly onShed?: ((model: string, error: ServingError) => void) | undefined;
}

/** No queue-wait limit; deadlines and queue bounds still apply. */
export const QUEUE_AS_TF_SERVING: AdmissionPolicy = { maxQueueWaitMs: 0, burstPerInstance: 0 };

/**
 * Throws UNAVAILABLE (reason `overloaded`) when a run submitted to `session` now would find
 * its queue full, would wait longer than the policy allows (beyond the burst it always
 * queues), or could not finish before `deadline` (Date.now() clock). `pending` runs
 * (requests whose tensors are decoded, runs not submitted yet) count as queued ahead of
 * it. Sessions that report no pressure are never refused here.
 */
export function checkAdmission(
  session: Session,
  policy: AdmissionPolicy,
  model: string,
  deadline: number | undefined,
  pending = 0,
): void {
  // A request whose deadline has passed never starts, however idle the model (its run could
  // otherwise finish before the deadline's timer fires, and answer a call the client gave up).
  if (deadline !== undefined && deadline <= Date.now()) {
    throw new ServingError(Code.DEADLINE_EXCEEDED, 'Deadline Exceeded');
  }
  const pressure = session.pressure?.(pending);
  if (pressure === undefined || pressure.queued === 0) return;
  const { queued, maxQueued } = pressure;
  if (maxQueued !== undefined && queued >= maxQueued) {
    throw shed(policy, model, `Queue is full (${queued} requests waiting)`);
  }
  const wait = pressure.estimatedWaitMs;
  const burst = policy.burstPerInstance * Math.max(1, pressure.instances ?? 1);
  if (policy.maxQueueWaitMs > 0 && wait > policy.maxQueueWaitMs && queued > burst) {
    throw shed(
      policy,
      model,
      `Server is overloaded: model ${model} has about ${Math.round(wait)} ms of queued work (limit ${policy.maxQueueWaitMs} ms); retry later`,
    );
  }
  if (deadline !== undefined) {
    const left = deadline - Date.now();
    if (wait + pressure.runMs > left) {
      throw shed(
        policy,
        model,
        `Request cannot finish before its deadline: model ${model} has about ${Math.round(wait)} ms of queued work and ${Math.max(0, Math.round(left))} ms are left`,
      );
    }
  }
}

function shed(policy: AdmissionPolicy, model: string, message: string): ServingError {
  const error = overloadedError(message);
  policy.onShed?.(model, error);
  return error;
}
