/**
 * An inference worker's pool of shared output buffers. A large output is copied into a slot
 * and lent to the server by index; the slot stays busy until the server sends it back
 * (`free`), so memory the server is still writing to a socket is never refilled. Reused
 * memory needs no fresh allocation (page faults) and no new external ArrayBuffer on the
 * server's heap (a full Mark-Compact per 34 MB response otherwise).
 */

export interface OutputSlotPoolOptions {
  /** Most bytes of slots kept, busy and free together; past it `take` answers undefined. */
  readonly maxBytes: number;
  /** A slot free for at least this long is dropped by `trim`, in ms. */
  readonly idleMs: number;
  /** Clock in ms. Default performance.now. */
  readonly now?: () => number;
}

export interface OutputSlotPool {
  /**
   * Marks busy and returns a free slot of at least `byteLength` bytes (the smallest such), or
   * a new one when none is free and `maxBytes` allows it; undefined otherwise (the caller
   * then moves the output in memory of its own).
   */
  take(byteLength: number): number | undefined;
  /** The memory of a slot that `take` returned and that was not dropped since. */
  buffer(slot: number): SharedArrayBuffer;
  /** Marks a slot free again; an unknown or dropped slot is ignored. */
  free(slot: number): void;
  /** Drops the slots free for `idleMs` or longer (their memory goes back after a burst). */
  trim(): void;
  /** Bytes of the slots kept, busy and free. */
  readonly keptBytes: number;
}

interface Slot {
  sab: SharedArrayBuffer | undefined;
  busy: boolean;
  freeSince: number;
}

export function createOutputSlotPool(options: OutputSlotPoolOptions): OutputSlotPool {
  const now = options.now ?? (() => performance.now());
  // Indices are what the server holds: a slot's index never changes, and a dropped slot's
  // index is only reused by a new slot.
  const slots: Slot[] = [];
  let keptBytes = 0;
  return {
    take(byteLength) {
      let best: number | undefined;
      for (let i = 0; i < slots.length; i++) {
        const s = slots[i]!;
        if (
          !s.busy &&
          s.sab !== undefined &&
          s.sab.byteLength >= byteLength &&
          (best === undefined || s.sab.byteLength < slots[best]!.sab!.byteLength)
        )
          best = i;
      }
      if (best === undefined) {
        if (!(byteLength > 0) || keptBytes + byteLength > options.maxBytes) return undefined;
        const slot: Slot = { sab: new SharedArrayBuffer(byteLength), busy: false, freeSince: 0 };
        const dropped = slots.findIndex((s) => s.sab === undefined);
        best = dropped === -1 ? slots.push(slot) - 1 : dropped;
        slots[best] = slot;
        keptBytes += byteLength;
      }
      slots[best]!.busy = true;
      return best;
    },
    buffer(slot) {
      const sab = slots[slot]?.sab;
      if (sab === undefined) throw new Error(`output slot ${slot} does not exist`);
      return sab;
    },
    free(slot) {
      const s = slots[slot];
      if (s?.sab === undefined) return;
      s.busy = false;
      s.freeSince = now();
    },
    trim() {
      const t = now();
      for (const s of slots) {
        if (s.sab === undefined || s.busy || t - s.freeSince < options.idleMs) continue;
        keptBytes -= s.sab.byteLength;
        s.sab = undefined;
      }
    },
    get keptBytes() {
      return keptBytes;
    },
  };
}
