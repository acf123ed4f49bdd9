/**
 * What the frame streams of one server count for the metrics: streams open per transport,
 * and frames per model by outcome (read at scrape time).
 */

/**
 * What became of a frame: answered with a result, dropped by `latest`, or failed (answered with
 * an error, or cancelled in flight when its stream closed).
 */
export type FrameOutcome = 'answered' | 'dropped' | 'failed';

/** The transports as the metrics name them. */
export type StreamTransport = 'websocket' | 'grpc';

export interface FrameStreamCounts {
  /** Streams open now, per transport (every transport listed, 0 included). */
  readonly open: ReadonlyMap<StreamTransport, number>;
  /** Frames since start per model, by outcome (monotonic). */
  readonly frames: ReadonlyMap<string, Readonly<Record<FrameOutcome, number>>>;
}

export class FrameStreamTally {
  private readonly openNow = new Map<StreamTransport, number>([
    ['websocket', 0],
    ['grpc', 0],
  ]);
  private readonly frames = new Map<string, Record<FrameOutcome, number>>();

  opened(transport: StreamTransport): void {
    this.openNow.set(transport, (this.openNow.get(transport) ?? 0) + 1);
  }

  closed(transport: StreamTransport): void {
    this.openNow.set(transport, Math.max(0, (this.openNow.get(transport) ?? 0) - 1));
  }

  frame(model: string, outcome: FrameOutcome): void {
    let counts = this.frames.get(model);
    if (counts === undefined) {
      counts = { answered: 0, dropped: 0, failed: 0 };
      this.frames.set(model, counts);
    }
    counts[outcome]++;
  }

  snapshot(): FrameStreamCounts {
    return { open: new Map(this.openNow), frames: new Map([...this.frames].map(([m, c]) => [m, { ...c }])) };
  }
}
