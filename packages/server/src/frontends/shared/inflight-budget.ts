import { type ServingError, overloadedError } from '@visionserve/protocol';

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
}

export interface InflightBudgetOptions {
  /** Most bytes of request bodies held at once. */
  readonly maxBytes: number;
  /** Most requests holding a reservation at once. */
  readonly maxRequests: number;
  /** Told of every refusal, with the request's size and the budget's state. Default: nothing. */
  readonly onShed?: ((refusal: BudgetRefusal) => void) | undefined;
}

export interface BudgetRefusal {
  readonly message: string;
  readonly requestBytes: number;
  readonly inflightBytes: number;
  readonly inflightRequests: number;
  readonly maxBytes: number;
  readonly maxRequests: number;
}

/** The refusal of a request whose bytes do not fit the budget (UNAVAILABLE, reason overloaded), on every transport. */
export function budgetExhausted(): ServingError {
  return overloadedError('Server is overloaded: too many request bytes in flight; retry later');
}

export function createInflightBudget(options: InflightBudgetOptions): InflightBudget {
  const { maxBytes, maxRequests, onShed } = options;
  let usedBytes = 0;
  let requests = 0;

  const refuse = (bytes: number, overCount: boolean): undefined => {
    onShed?.({
      message: overCount
        ? `${requests} requests in flight (limit ${maxRequests})`
        : `${usedBytes + bytes} request bytes in flight (limit ${maxBytes})`,
      requestBytes: bytes,
      inflightBytes: usedBytes,
      inflightRequests: requests,
      maxBytes,
      maxRequests,
    });
    return undefined;
  };

  return {
    tryReserve(bytes) {
      if (requests + 1 > maxRequests || usedBytes + bytes > maxBytes) {
        refuse(bytes, requests + 1 > maxRequests);
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
            refuse(more, false);
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
  };
}
