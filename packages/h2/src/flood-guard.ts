/**
 * Counts events of one kind on a connection (pings, settings, empty frames, resets) and says
 * when there are more than `limit` within a window of `windowMs`: the connection is then
 * ended with ENHANCE_YOUR_CALM. A window starts at the first event after the previous one
 * ended, so a steady legitimate rate below the limit never trips it.
 */
export class FloodGuard {
  private count = 0;
  private windowStart = 0;

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  /** Counts one event; true when the limit is exceeded. */
  hit(): boolean {
    if (this.count === 0) this.windowStart = Date.now();
    if (++this.count <= this.limit) return false;
    const now = Date.now();
    if (now - this.windowStart >= this.windowMs) {
      this.windowStart = now;
      this.count = 1;
      return false;
    }
    return true;
  }
}
