/**
 * Large request buffers used again instead of allocated per request. A gRPC request message
 * is read into a buffer that moves to an inference worker with the tensors that view it; the
 * worker moves it back once its run is over, and the next request of about that size is read
 * into it. A fresh 600 KB buffer per request cost a page fault per 4 KiB page on first write
 * (about 0.1-0.2 ms of main-thread CPU per MobileNetV2 request) and a malloc/free pair.
 *
 * Safety comes from moving, not from bookkeeping: a buffer given back has been transferred
 * out of the worker (every view the worker had is detached) and was detached on this thread
 * when it was transferred in, so nothing can still read or write the memory it hands out.
 */
export interface RecycledBuffers {
  /**
   * An ArrayBuffer of at least `byteLength` bytes, uninitialised: a kept one of about that
   * size when there is one (at most an eighth larger), else a new one.
   */
  take(byteLength: number): ArrayBuffer;
  /** Buffers that nothing references any more, kept for later `take`s within the bounds. */
  give(buffers: readonly ArrayBuffer[]): void;
  /** Bytes kept now. */
  readonly keptBytes: number;
}

export interface RecycledBuffersOptions {
  /** Smaller buffers are neither kept nor looked up (malloc serves them well), in bytes. Default 64 KiB. */
  readonly minBytes?: number | undefined;
  /** Most bytes kept at once; the oldest are dropped past it. Default 64 MiB. */
  readonly maxBytes?: number | undefined;
  /** A buffer kept this long without being taken is dropped, in ms. Default 30000. */
  readonly idleMs?: number | undefined;
}

interface Kept {
  readonly buffer: ArrayBuffer;
  readonly since: number;
}

/** An uninitialised ArrayBuffer (`new ArrayBuffer` zero-fills memory that is about to be overwritten). */
function fresh(byteLength: number): ArrayBuffer {
  return Buffer.allocUnsafeSlow(byteLength).buffer;
}

export function createRecycledBuffers(options: RecycledBuffersOptions = {}): RecycledBuffers {
  const minBytes = options.minBytes ?? 64 * 1024;
  const maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
  const idleMs = options.idleMs ?? 30_000;
  /** Oldest first. */
  const kept: Kept[] = [];
  let keptBytes = 0;

  let sweeper: NodeJS.Timeout | undefined;

  const drop = (index: number): ArrayBuffer => {
    const [entry] = kept.splice(index, 1);
    keptBytes -= entry!.buffer.byteLength;
    return entry!.buffer;
  };
  const dropIdle = (): void => {
    const now = performance.now();
    while (kept.length > 0 && now - kept[0]!.since > idleMs) drop(0);
    if (kept.length === 0 && sweeper !== undefined) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
  };

  return {
    take(byteLength) {
      if (byteLength < minBytes) return fresh(byteLength);
      const limit = byteLength + Math.floor(byteLength / 8);
      let best = -1;
      for (let i = 0; i < kept.length; i++) {
        const size = kept[i]!.buffer.byteLength;
        if (size >= byteLength && size <= limit && (best < 0 || size < kept[best]!.buffer.byteLength)) {
          best = i;
        }
      }
      return best < 0 ? fresh(byteLength) : drop(best);
    },
    give(buffers) {
      dropIdle();
      const now = performance.now();
      for (const buffer of buffers) {
        // A detached buffer has byteLength 0; one larger than the whole budget is never kept.
        if (buffer.byteLength < minBytes || buffer.byteLength > maxBytes) continue;
        while (keptBytes + buffer.byteLength > maxBytes) drop(0);
        kept.push({ buffer, since: now });
        keptBytes += buffer.byteLength;
      }
      // Memory kept after traffic stops goes back within two idle periods.
      if (kept.length > 0 && sweeper === undefined) sweeper = setInterval(dropIdle, idleMs).unref();
    },
    get keptBytes() {
      return keptBytes;
    },
  };
}
