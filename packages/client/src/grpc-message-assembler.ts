/**
 * Receives the one length-prefixed message of a unary gRPC response into its final buffer as
 * its DATA arrives, for a transport whose chunks are reused after each push (the client's own
 * HTTP/2 connection reads its socket into one scratch buffer). The 5-byte prefix is checked
 * as soon as it arrives (compression flag, declared length against the receive limit); the
 * message buffer is allocated once its placement is known (UnaryCallOptions.responsePadding:
 * at once for small messages or without placement, else as soon as the first bytes tell), and
 * from then on `target` offers the transport the next bytes of that buffer to read into
 * directly, so a large message is written once, by the kernel, where the decoder reads it.
 *
 * The buffer is allocated when the declared length is known, before the bytes arrive: a
 * server that declares a large message and sends less holds address space (not memory: pages
 * are touched only by the bytes written) until the call ends, bounded by maxReceiveBytes.
 */
import { Code, ServingError } from '@visionserve/protocol';
import type { UnaryCallOptions } from './grpc-channel-types.js';
import { MessagePrefix } from './grpc-message-prefix.js';
import { PLACE_MIN_BYTES } from './grpc-response-receiver.js';

export interface MessageAssemblerOptions {
  /** Largest accepted message in bytes (the declared length is checked when the prefix arrives). */
  readonly maxReceiveBytes: number;
  /** Placement of large messages (UnaryCallOptions.responsePadding); none: they start at offset 0. */
  readonly responsePadding?: UnaryCallOptions['responsePadding'];
}

export interface MessageAssembler {
  /**
   * Takes the next DATA bytes: copied into place, or accepted as they are when they are the
   * view `target` returned, filled. The chunk may be reused once this returns. Returns an
   * error when the bytes so far cannot be a valid response: the call should then be
   * cancelled with it; later chunks are not expected.
   */
  push(chunk: Uint8Array): ServingError | undefined;
  /**
   * Where the next message bytes go, at most `max` of them, once the message buffer exists;
   * undefined before that (and once it is full). Bytes read into it must then be pushed.
   */
  target(max: number): Uint8Array | undefined;
  /** The message once the response ended, or the error if it did not carry exactly one whole message. */
  end(): Uint8Array | ServingError;
}

export function createMessageAssembler(options: MessageAssemblerOptions): MessageAssembler {
  const prefix = new MessagePrefix(options.maxReceiveBytes);
  /** The declared message length, once the prefix is whole. */
  let length = 0;
  /** Copies of the first message bytes, kept until the placement is known. */
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  let out: Uint8Array | undefined;
  let filled = 0;

  /** Allocates the message buffer with `pad` bytes before it and moves what is held into it. */
  const allocate = (pad: number): ServingError | undefined => {
    try {
      // Not from Buffer's shared pool: the caller's tensors may be views of it for as long as it likes.
      out = new Uint8Array(Buffer.allocUnsafeSlow((pad & 7) + length).buffer, pad & 7, length);
    } catch {
      return new ServingError(
        Code.RESOURCE_EXHAUSTED,
        `Cannot allocate ${length} bytes for the received message`,
      );
    }
    for (const part of held) {
      out.set(part, filled);
      filled += part.byteLength;
    }
    held = [];
    heldBytes = 0;
    return undefined;
  };

  /** Allocates once the placement is decided (always at once for small messages or without placement). */
  const tryPlace = (): ServingError | undefined => {
    const place = length >= PLACE_MIN_BYTES ? options.responsePadding : undefined;
    if (place === undefined) return allocate(0);
    const pad = place(held, 0, length);
    return pad === undefined ? undefined : allocate(pad);
  };

  return {
    push(chunk) {
      let at = 0;
      if (!prefix.complete) {
        const taken = prefix.take(chunk);
        if (taken instanceof ServingError) return taken;
        if (!prefix.complete) return undefined;
        at = taken;
        length = prefix.length;
        const error = tryPlace();
        if (error) return error;
      }
      const n = chunk.byteLength - at;
      if (n === 0) return undefined;
      if (filled + heldBytes + n > length) {
        return new ServingError(Code.INTERNAL, 'Response carried more than one message');
      }
      if (out === undefined) {
        // A copy: the chunk is reused (Buffer's slice would be a view).
        held.push(Uint8Array.prototype.slice.call(chunk, at));
        heldBytes += n;
        return tryPlace();
      }
      const inPlace = at === 0 && chunk.buffer === out.buffer && chunk.byteOffset === out.byteOffset + filled;
      if (!inPlace) out.set(at === 0 ? chunk : chunk.subarray(at), filled);
      filled += n;
      return undefined;
    },
    target(max) {
      if (out === undefined || filled >= length) return undefined;
      return out.subarray(filled, filled + Math.min(max, length - filled));
    },
    end() {
      const error = prefix.endError(filled + heldBytes);
      if (error) return error;
      if (out === undefined) {
        const place = options.responsePadding?.(held, 0, length) ?? 0;
        const error = allocate(place);
        if (error) return error;
      }
      return out!;
    },
  };
}
