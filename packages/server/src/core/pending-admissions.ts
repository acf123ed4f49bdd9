import type { Session } from './session.js';

/**
 * Requests whose tensors are decoded and whose runs are not submitted yet, per session:
 * those still being adapted (an encoded image being decoded, tf.Examples being parsed)
 * after they passed admission. Admission counts them as queued work; a request whose body
 * is still arriving or being parsed is not model work yet and is not counted (its bytes are
 * bounded by the in-flight budget, the body timeout and the minimum upload rate).
 */
export interface PendingRuns {
  /** Requests of `session` counted now. */
  count(session: Session): number;
  /** Counts one request of `session` until the returned function is called (idempotent). */
  enter(session: Session): () => void;
}

export function createPendingRuns(): PendingRuns {
  const counts = new WeakMap<Session, number>();
  return {
    count: (session) => counts.get(session) ?? 0,
    enter(session) {
      counts.set(session, (counts.get(session) ?? 0) + 1);
      let left = false;
      return () => {
        if (left) return;
        left = true;
        counts.set(session, (counts.get(session) ?? 1) - 1);
      };
    },
  };
}
