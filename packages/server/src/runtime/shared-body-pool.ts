/**
 * Request bodies in reused shared memory. A JSON tensor body of a few MB read into a fresh
 * buffer per request, then copied for its decode thread, was ~3 MB of external memory per
 * request on the event loop's heap: V8 answers that with a scavenge every few requests and a
 * Mark-Compact every few dozen. A body read into a lent slot of this pool costs no
 * allocation, and its decode thread reads the same memory (a SharedArrayBuffer is shared by
 * postMessage, not copied).
 */

import type { LentBody } from '../contracts/json-decoder.js';

/** A slot lent for one body: `bytes` views it, exactly the body's length. */
export type PooledBody = LentBody;

export interface SharedBodyPool {
  /**
   * A slot for a body of `bytes` bytes, or undefined when keeping one would pass `maxBytes`
   * (the caller then reads the body into memory of its own). The slot holds at least
   * `slotBytes` (default `bytes`): `bytes` views its start, and the rest of its buffer is the
   * borrower's too.
   */
  acquire(bytes: number, slotBytes?: number): PooledBody | undefined;
  /** Bytes of shared memory kept: lent and free slots together. */
  readonly keptBytes: number;
  /** Slots lent now. */
  readonly lent: number;
}

export interface SharedBodyPoolOptions {
  /** Most shared memory kept for bodies, lent and free slots together, in bytes. Default 64 MiB. */
  readonly maxBytes?: number | undefined;
  /** Smallest slot, in bytes (slots are powers of two from here). Default 65536. */
  readonly minSlotBytes?: number | undefined;
  /**
   * Free slots are dropped once nothing has been lent for this long, in ms, so that memory a
   * burst took comes back (util/idle-collection.ts then collects them). Default 5000; 0 keeps them.
   */
  readonly idleTrimMs?: number | undefined;
}

/** Slot sizes are powers of two from `minSlotBytes`: a body wastes less than half its slot. */
function slotSize(bytes: number, min: number): number {
  let size = min;
  while (size < bytes) size *= 2;
  return size;
}

export function createSharedBodyPool(options: SharedBodyPoolOptions = {}): SharedBodyPool {
  const maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
  const minSlot = Math.max(8, options.minSlotBytes ?? 65_536);
  /** Free slots by size. */
  const free = new Map<number, SharedArrayBuffer[]>();
  let kept = 0;
  let lent = 0;
  const idleTrimMs = options.idleTrimMs ?? 5000;
  let trimTimer: NodeJS.Timeout | undefined;
  /** Drops every free slot (lent ones come back to the pool as they are released). */
  const trim = (): void => {
    trimTimer = undefined;
    for (const [s, list] of free) kept -= s * list.length;
    free.clear();
  };

  /** Drops free slots (the biggest first) until `size` more bytes fit; false if they cannot. */
  const makeRoom = (size: number): boolean => {
    if (kept + size <= maxBytes) return true;
    // Lent slots stay: when dropping every free one would not make room, keep them for the next bodies.
    let freeBytes = 0;
    for (const [s, list] of free) freeBytes += s * list.length;
    if (kept - freeBytes + size > maxBytes) return false;
    const sizes = [...free.keys()].sort((a, b) => b - a);
    for (const s of sizes) {
      const list = free.get(s)!;
      while (list.length > 0 && kept + size > maxBytes) {
        list.pop();
        kept -= s;
      }
      if (list.length === 0) free.delete(s);
      if (kept + size <= maxBytes) return true;
    }
    return false;
  };

  return {
    acquire(bytes, slotBytes = bytes) {
      if (!Number.isSafeInteger(bytes) || bytes < 0) return undefined;
      const size = slotSize(Math.max(bytes, slotBytes), minSlot);
      let slot = free.get(size)?.pop();
      if (slot === undefined) {
        if (size > maxBytes || !makeRoom(size)) return undefined;
        slot = new SharedArrayBuffer(size);
        kept += size;
      }
      // Lending: the pool is in use again (a refused acquire leaves a pending trim as it is).
      if (trimTimer !== undefined) {
        clearTimeout(trimTimer);
        trimTimer = undefined;
      }
      lent++;
      const memory = slot;
      let held = true;
      return {
        bytes: new Uint8Array(memory, 0, bytes),
        release() {
          if (!held) return;
          held = false;
          lent--;
          let list = free.get(size);
          if (list === undefined) free.set(size, (list = []));
          list.push(memory);
          if (lent === 0 && idleTrimMs > 0) {
            trimTimer = setTimeout(trim, idleTrimMs);
            trimTimer.unref();
          }
        },
      };
    },
    get keptBytes() {
      return kept;
    },
    get lent() {
      return lent;
    },
  };
}
