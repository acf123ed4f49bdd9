import type { BodyArrival } from './inference-service.js';
import type { Session } from './session.js';

/**
 * Requests admitted whose runs are not submitted yet, per session, that admission counts as
 * queued model work: requests whose inputs are being adapted (an encoded image decoded), and
 * bodies still on their way while they arrive at least at `minBytesPerSecond` since their
 * admission (after a grace of 100 ms for the first bytes), and bodies that are in and wait to
 * be decoded (`BodyArrival.decoding`). A body that trickles in (a byte every few seconds) is
 * not work that exists: it drops out of the count within milliseconds and is bounded by the
 * byte budget, the body timeout and the minimum upload rate instead; a body arriving at
 * network speed is, and counting it is what lets a server under real overload refuse at the
 * headers (before it reads the body) instead of reading every body it will refuse later.
 */
export interface PendingRuns {
  /** Requests of `session` counted now. */
  count(session: Session): number;
  /** Counts one request of `session` until the returned function is called (idempotent). */
  enter(session: Session): () => void;
  /**
   * Counts a request of `session` whose body is arriving, while it arrives fast enough and
   * is not complete, until the returned function is called (idempotent).
   */
  arriving(session: Session, body: BodyArrival): () => void;
}

/** A body's first bytes may take this long after its admission before its rate is judged, in ms. */
const ARRIVAL_GRACE_MS = 100;

export function createPendingRuns(minBytesPerSecond: number): PendingRuns {
  const adapting = new WeakMap<Session, number>();
  const arrivals = new WeakMap<Session, Set<{ readonly body: BodyArrival; readonly at: number }>>();
  const onTheWay = (entry: { readonly body: BodyArrival; readonly at: number }, now: number): boolean => {
    if (entry.body.decoding?.() === true) return true;
    const received = entry.body.received();
    if (entry.body.total !== undefined && received >= entry.body.total) return false;
    return (
      minBytesPerSecond > 0 && received >= ((now - entry.at - ARRIVAL_GRACE_MS) * minBytesPerSecond) / 1000
    );
  };
  return {
    count(session) {
      let n = adapting.get(session) ?? 0;
      const entries = arrivals.get(session);
      if (entries === undefined || entries.size === 0) return n;
      const now = performance.now();
      for (const entry of entries) if (onTheWay(entry, now)) n++;
      return n;
    },
    enter(session) {
      adapting.set(session, (adapting.get(session) ?? 0) + 1);
      let left = false;
      return () => {
        if (left) return;
        left = true;
        adapting.set(session, (adapting.get(session) ?? 1) - 1);
      };
    },
    arriving(session, body) {
      let entries = arrivals.get(session);
      if (entries === undefined) {
        entries = new Set();
        arrivals.set(session, entries);
      }
      const entry = { body, at: performance.now() };
      entries.add(entry);
      const mine = entries;
      return () => {
        mine.delete(entry);
      };
    },
  };
}
