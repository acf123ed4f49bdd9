/**
 * The server connection's read placement (directReads: sockets read through `onread`,
 * h2-server.ts): which buffer each socket read goes into. Inside a DATA frame of a stream that
 * says where its bytes belong (H2Stream.into: the room left in its message), straight into that
 * room, so that the message is assembled with no copy but the kernel's; otherwise the unused end
 * of a slab shared by the connection's reads.
 */

/** Reads that do not go straight into place share slabs of this size; an idle connection keeps one. */
const SLAB_BYTES = 16 * 1024;
/** A slab with less room left than this is replaced by a new one. */
const SLAB_MIN_READ_BYTES = 4 * 1024;
/** The slab of a connection before its first read. */
const EMPTY_SLAB = Buffer.alloc(0);
/** Less room than this left in a message is filled by a copy, not a read of its own. */
export const DIRECT_READ_MIN_BYTES = 16 * 1024;

/** What read placement needs of a stream: where its next DATA bytes belong. */
export interface PlacedStream {
  readonly into: (() => Uint8Array | undefined) | undefined;
}

/**
 * The buffers of one connection's socket reads. The socket keeps the buffer returned by next()
 * until its next read: a stream's room is held until then (afterRoomReleased), also when the
 * stream is gone meanwhile; bytes read into the slab are never overwritten (the next read goes
 * after them, a new slab once little is left), so the views passed on stay valid as long as
 * they are held, as with Node's own reads, and a read of a few bytes takes no slab of its own.
 */
export class ReadPlacement<S extends PlacedStream> {
  /** The stream whose room the socket's next read goes into, and who waits for it to be free. */
  private roomHolder: S | undefined;
  private roomWaiters: (() => void)[] = [];
  /** The slab reads go into when not straight into place, and its bytes used. */
  private slab = EMPTY_SLAB;
  private slabUsed = 0;

  /**
   * The buffer the socket's next read goes into. `stream` is the stream of the DATA frame being
   * read (undefined: none, or its bytes are dropped), `dataLeft` that frame's data still to
   * come: the room is cut to it, so that what follows (padding, the next frame) is not read
   * into it (the frame reader would copy such bytes out again, a view of the room at another
   * offset being only a chunk).
   */
  next(stream: S | undefined, dataLeft: number): Uint8Array {
    const room = dataLeft >= DIRECT_READ_MIN_BYTES ? stream?.into?.() : undefined;
    if (room !== undefined && room.byteLength >= DIRECT_READ_MIN_BYTES) {
      this.holdRoom(stream);
      return room.byteLength > dataLeft ? room.subarray(0, dataLeft) : room;
    }
    // The buffer returned replaces the socket's previous one: a room given out before is free.
    this.holdRoom(undefined);
    if (this.slab.byteLength - this.slabUsed < SLAB_MIN_READ_BYTES) {
      this.slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
      this.slabUsed = 0;
    }
    return this.slab.subarray(this.slabUsed);
  }

  /** `nread` bytes arrived at the start of `buffer` (from next()): the chunk they make. */
  arrived(nread: number, buffer: Uint8Array): Buffer {
    if (buffer.buffer === this.slab.buffer) this.slabUsed += nread;
    return Buffer.from(buffer.buffer, buffer.byteOffset, nread);
  }

  /** Runs `fn` once the socket's next read no longer goes into `stream`'s room (at once if it does not). */
  afterRoomReleased(stream: S, fn: () => void): void {
    if (this.roomHolder === stream) this.roomWaiters.push(fn);
    else fn();
  }

  /** No read will come (the socket closed): the room it held is free. */
  release(): void {
    this.holdRoom(undefined);
  }

  /** The socket's next read goes into `stream`'s room (undefined: none); the previous holder's waiters run. */
  private holdRoom(stream: S | undefined): void {
    if (stream === this.roomHolder) return;
    this.roomHolder = stream;
    const waiters = this.roomWaiters;
    this.roomWaiters = [];
    for (const fn of waiters) fn();
  }
}
