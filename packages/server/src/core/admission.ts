import { Code, ServingError } from '@visionserve/protocol';
import type { Session } from './session.js';

export interface AdmissionPolicy {
  /**
   * Refuse a request when the work already queued for its model version would make it
   * wait longer than this before it starts, in ms (0: no limit). Keeps the latency of
   * accepted requests bounded and the server busy with work that can still succeed.
   */
  readonly maxQueueWaitMs: number;
  /** Told of every refusal (e.g. to log that shedding started). Default: nothing. */
  readonly onShed?: ((model: string, error: ServingError) => void) | undefined;
}

/**
 * Throws UNAVAILABLE (reason `overloaded`) when a run submitted to `session` now would wait
 * longer than the policy allows, or could not finish before `deadline` (Date.now() clock).
 * `pending` requests (admitted, runs not submitted yet) count as queued ahead of it.
 * Sessions that report no pressure are never refused here.
 */
export function checkAdmission(
  session: Session,
  policy: AdmissionPolicy,
  model: string,
  deadline: number | undefined,
  pending = 0,
): void {
  const pressure = session.pressure?.(pending);
  if (pressure === undefined || pressure.queued === 0) return;
  const wait = pressure.estimatedWaitMs;
  if (policy.maxQueueWaitMs > 0 && wait > policy.maxQueueWaitMs) {
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
  const error = new ServingError(Code.UNAVAILABLE, message, { reason: 'overloaded' });
  policy.onShed?.(model, error);
  return error;
}
