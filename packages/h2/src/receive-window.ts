/**
 * A receive window (RFC 9113 §6.9) of a connection or a stream: the bytes we advertised, the
 * bytes received and not yet given back by WINDOW_UPDATE, and the check that the peer stays
 * within it.
 */
export class ReceiveWindow {
  /** Bytes received and not yet given back. */
  unacked = 0;

  constructor(private window: number) {}

  /** The window advertised: what the peer may have outstanding. */
  get size(): number {
    return this.window;
  }

  /** Whether all of the window is used: the peer can send nothing more until we give some back. */
  get exhausted(): boolean {
    return this.unacked >= this.window;
  }

  /** Makes the window `more` bytes larger (the caller writes a WINDOW_UPDATE of at least `more`). */
  grow(more: number): void {
    this.window += more;
  }

  /** Counts `length` bytes received; false (nothing counted) when they go past the window. */
  take(length: number): boolean {
    if (length > this.window - this.unacked) return false;
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
