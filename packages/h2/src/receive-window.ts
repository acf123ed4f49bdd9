/**
 * A receive window (RFC 9113 §6.9) of a connection or a stream: the bytes we advertised, the
 * bytes received and not yet given back by WINDOW_UPDATE, and the check that the peer stays
 * within it.
 */
export class ReceiveWindow {
  /** Bytes received and not yet given back. */
  unacked = 0;

  constructor(readonly size: number) {}

  /** Counts `length` bytes received; false (nothing counted) when they go past the window. */
  take(length: number): boolean {
    if (length > this.size - this.unacked) return false;
    this.unacked += length;
    return true;
  }

  /** Whether half the window or more waits to be given back (the usual moment for a WINDOW_UPDATE). */
  get halfUsed(): boolean {
    return this.unacked >= this.size / 2;
  }

  /** Gives back what was received: the WINDOW_UPDATE increment to write (0: nothing). */
  release(): number {
    const n = this.unacked;
    this.unacked = 0;
    return n;
  }
}
