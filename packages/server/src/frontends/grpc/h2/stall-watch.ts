/**
 * The server connection's stall watch: a peer that stops reading must not hold a connection's
 * streams, the in-flight bytes their calls reserved, or its socket's queued writes forever. While
 * streams wait for window, answered streams wait for the rest of their request, or bytes wait to
 * reach the socket, a timer checks every sendStallMs / 4 and
 * - resets (RST_STREAM CANCEL) a stream whose queued DATA got no window for sendStallMs, unless it
 *   waits only for the connection window while the connection still sends;
 * - resets (NO_ERROR) an answered stream whose client sent none of the rest of its message for
 *   sendStallMs (localDone in connection.ts);
 * - destroys the socket when bytes have waited to reach it with no write completing for sendStallMs.
 */
import { ErrorCode } from '@visionserve/h2';
import type { Logger } from '../../../util/logger.js';

/** What the stall watch needs of a stream. */
export interface WatchedStream {
  readonly id: number;
  /** Bytes this side may still send on the stream. */
  readonly sendWindow: number;
  /** When the queued DATA last got window (Date.now()); 0 while it is sending. */
  readonly sendProgressAt: number;
  /** While answered and the client still sends: when its last DATA (or the answer) came. */
  readonly drainProgressAt: number;
}

/** What the stall watch needs of its connection. */
export interface StallWatchHost<S extends WatchedStream> {
  readonly sendStallMs: number;
  readonly socket: { readonly writableLength: number; destroy(): void };
  /** Streams with response DATA waiting for window. */
  readonly blocked: ReadonlySet<S>;
  /** Streams answered while the client still sends. */
  readonly draining: ReadonlySet<S>;
  /** Ends `stream` with RST_STREAM `code`. */
  resetStream(stream: S, code: number): void;
  /** The connection is closed (or closing on an error): no more checks. */
  closed(): boolean;
  readonly logger: Logger;
}

export class StallWatch<S extends WatchedStream> {
  private timer: NodeJS.Timeout | undefined;
  /** Since when bytes have waited to reach the socket with no write completing (0: none seen). */
  private writeStallSince = 0;
  /** DATA bytes sent from stream queues, and their count and time at the last check. */
  private queuedBytesSent = 0;
  private checkedBytesSent = 0;
  private sendProgressAt = 0;

  constructor(private readonly host: StallWatchHost<S>) {}

  /** Checks in sendStallMs / 4 (if no check is due already). */
  arm(): void {
    if (this.timer !== undefined || this.host.closed()) return;
    this.timer = setTimeout(this.check, Math.max(10, this.host.sendStallMs / 4));
    this.timer.unref();
  }

  /** The socket closed: no more checks. */
  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** A socket write completed, or the socket drained. */
  writeProgress(): void {
    this.writeStallSince = 0;
  }

  /** `n` DATA bytes left a stream's queue. */
  sent(n: number): void {
    this.queuedBytesSent += n;
  }

  private readonly check = (): void => {
    this.timer = undefined;
    if (this.host.closed()) return;
    const now = Date.now();
    if (this.queuedBytesSent !== this.checkedBytesSent || this.sendProgressAt === 0) {
      this.checkedBytesSent = this.queuedBytesSent;
      this.sendProgressAt = now;
    }
    this.resetStalledStreams(now);
    if (this.socketStalled(now)) return;
    const { blocked, draining, socket } = this.host;
    if (blocked.size > 0 || draining.size > 0 || socket.writableLength > 0) this.arm();
  };

  private resetStalledStreams(now: number): void {
    const { blocked, draining, sendStallMs: limit } = this.host;
    for (const stream of blocked) {
      // A stream waiting only for the connection window waits while the connection sends.
      const waiting = stream.sendWindow > 0 && now - this.sendProgressAt < limit;
      if (!waiting && now - stream.sendProgressAt >= limit) {
        this.host.logger.debug('grpc response stalled by flow control, stream reset', { stream: stream.id });
        this.host.resetStream(stream, ErrorCode.CANCEL);
      }
    }
    // A client that stops sending a message this side already answered holds the stream (and
    // what the call reserved) until it is reset.
    for (const stream of draining) {
      if (now - stream.drainProgressAt >= limit) this.host.resetStream(stream, ErrorCode.NO_ERROR);
    }
  }

  /** Destroys the socket when its writes made no progress for sendStallMs; true if it did. */
  private socketStalled(now: number): boolean {
    const { socket } = this.host;
    if (socket.writableLength === 0) this.writeStallSince = 0;
    else if (this.writeStallSince === 0) this.writeStallSince = now;
    else if (now - this.writeStallSince >= this.host.sendStallMs) {
      this.host.logger.debug('grpc connection writes stalled, socket destroyed', {
        pendingBytes: socket.writableLength,
      });
      socket.destroy();
      return true;
    }
    return false;
  }
}
