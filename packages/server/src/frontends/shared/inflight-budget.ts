import type { Logger } from '../../util/logger.js';

/** Bytes and requests held by one admitted request; release exactly once when it is answered. */
export interface Reservation {
  /** Asks for `bytes` more (a body whose length was not declared); false when over budget. */
  grow(bytes: number): boolean;
  release(): void;
}

/**
 * Admission by memory: a process-wide budget of request bodies being read or waiting to
 * be served, in bytes and in requests. Transports reserve a body's size before reading it
 * (HTTP Content-Length, the gRPC message length prefix) and refuse over-budget requests at
 * once (503 / UNAVAILABLE) instead of buffering them, so memory stays bounded at any
 * offered load.
 */
export interface InflightBudget {
  /** Reserves `bytes` for one request, or undefined (refuse it) when that would pass a limit. */
  tryReserve(bytes: number): Reservation | undefined;
  readonly usedBytes: number;
  readonly requests: number;
  /** Requests refused since start. */
  readonly shed: number;
}

export interface InflightBudgetOptions {
  /** Most bytes of request bodies held at once. */
  readonly maxBytes: number;
  /** Most requests holding a reservation at once. */
  readonly maxRequests: number;
  /** Told when shedding starts (at most once per `logIntervalMs`). */
  readonly logger: Logger;
  /** Least time between two "shedding" log lines, in ms. Default 10000. */
  readonly logIntervalMs?: number;
}

export function createInflightBudget(options: InflightBudgetOptions): InflightBudget {
  const { maxBytes, maxRequests, logger } = options;
  const logIntervalMs = options.logIntervalMs ?? 10_000;
  let usedBytes = 0;
  let requests = 0;
  let shed = 0;
  let lastLog = -Infinity;
  let shedSinceLog = 0;

  const refuse = (bytes: number): undefined => {
    shed++;
    shedSinceLog++;
    const now = performance.now();
    if (now - lastLog >= logIntervalMs) {
      logger.warn('overloaded: shedding requests', {
        shedSinceLastReport: shedSinceLog,
        inflightBytes: usedBytes,
        inflightRequests: requests,
        requestBytes: bytes,
        maxBytes,
        maxRequests,
      });
      lastLog = now;
      shedSinceLog = 0;
    }
    return undefined;
  };

  return {
    tryReserve(bytes) {
      if (requests + 1 > maxRequests || usedBytes + bytes > maxBytes) {
        refuse(bytes);
        return;
      }
      requests++;
      usedBytes += bytes;
      let held = bytes;
      let released = false;
      return {
        grow(more) {
          if (released) return false;
          if (usedBytes + more > maxBytes) {
            refuse(more);
            return false;
          }
          usedBytes += more;
          held += more;
          return true;
        },
        release() {
          if (released) return;
          released = true;
          usedBytes -= held;
          requests--;
        },
      };
    },
    get usedBytes() {
      return usedBytes;
    },
    get requests() {
      return requests;
    },
    get shed() {
      return shed;
    },
  };
}
