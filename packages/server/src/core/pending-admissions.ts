import type { Session } from './session.js';

/**
 * Requests admitted before their body was read (`InferenceService.admit`) whose runs are
 * not submitted yet, per session. Admission counts them as queued: without them, requests
 * that a frontend is still reading or decoding (a REST body and its JSON parse cost more
 * main-thread time than a run) pile up unseen behind a queue that looks empty, and
 * nothing is shed while every answer gets later. An entry leaves when its request submits
 * its run, is aborted, or is released by its frontend; entries older than `ttlMs` are
 * dropped, so a caller that never releases cannot make the server refuse everything.
 */
export interface PendingAdmissions {
  /** Admitted requests of `session` whose runs are not submitted, `except` left out. */
  count(session: Session, except?: AbortSignal): number;
  /** Records `signal`'s request as admitted; returns its release (idempotent). */
  add(session: Session, signal: AbortSignal): () => void;
  /** Forgets `signal`'s request (its run is being submitted). */
  take(session: Session, signal: AbortSignal): void;
}

/** Default age after which an entry no longer counts, in ms. */
export const PENDING_TTL_MS = 60_000;

export function createPendingAdmissions(ttlMs: number = PENDING_TTL_MS): PendingAdmissions {
  /** session -> request signal -> (admitted at, release). */
  const bySession = new WeakMap<Session, Map<AbortSignal, { at: number; release: () => void }>>();
  const take = (session: Session, signal: AbortSignal): void => {
    bySession.get(session)?.get(signal)?.release();
  };
  return {
    count(session, except) {
      const entries = bySession.get(session);
      if (entries === undefined) return 0;
      const old = performance.now() - ttlMs;
      for (const [signal, entry] of entries) if (entry.at < old) take(session, signal);
      return entries.size - (except !== undefined && entries.has(except) ? 1 : 0);
    },
    add(session, signal) {
      let entries = bySession.get(session);
      if (entries === undefined) {
        entries = new Map();
        bySession.set(session, entries);
      }
      const mine = entries;
      const existing = mine.get(signal);
      if (existing !== undefined) return existing.release;
      const release = (): void => {
        signal.removeEventListener('abort', release);
        if (mine.get(signal)?.release === release) mine.delete(signal);
      };
      mine.set(signal, { at: performance.now(), release });
      signal.addEventListener('abort', release, { once: true });
      return release;
    },
    take,
  };
}
