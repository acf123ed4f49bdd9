/**
 * Receives the one length-prefixed message of a unary gRPC response from its DATA chunks,
 * as they arrive: the 5-byte prefix is checked first (compression flag, declared length
 * against the receive limit), then the message is copied once, chunk by chunk, into a buffer
 * of exactly its length. No transport here: the channel feeds it.
 */
import { Code, ServingError } from '@visionserve/protocol';
import type { UnaryCallOptions } from './grpc-channel-types.js';

/** Messages below this size are not placed (the saving is too small); one that arrives whole in a chunk is a view of it. */
export const PLACE_MIN_BYTES = 64 * 1024;

/** Bytes of a message held back before placement is asked again, relative to what is held (doubling keeps the asks few). */
const FIRST_PLACEMENT_TRY_BYTES = 16 * 1024;

export interface ResponseReceiverOptions {
  /** Largest accepted message in bytes (the declared length is checked when the prefix arrives). */
  readonly maxReceiveBytes: number;
  /** Placement of large messages (UnaryCallOptions.responsePadding); none: they start at offset 0. */
  readonly responsePadding?: UnaryCallOptions['responsePadding'];
}

export interface ResponseReceiver {
  /**
   * Takes the next DATA chunk (the receiver may keep it until placement is decided, but never
   * writes to it). Returns an error when the bytes so far cannot be a valid response: the
   * call should then be cancelled with it; later chunks are not expected.
   */
  push(chunk: Uint8Array): ServingError | undefined;
  /** The message once the response ended, or the error if it did not carry exactly one whole message. */
  end(): Uint8Array | ServingError;
}

export function createResponseReceiver(options: ResponseReceiverOptions): ResponseReceiver {
  const prefix = new Uint8Array(5);
  let prefixBytes = 0;
  let length = 0;
  /** The message's bytes, once its buffer exists (for a whole-in-one-chunk message, a view of that chunk). */
  let message: Uint8Array | undefined;
  let filled = 0;
  /** Message bytes received before placement was decided. */
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  let nextTry = FIRST_PLACEMENT_TRY_BYTES;

  const tooMany = (): ServingError =>
    new ServingError(Code.INTERNAL, 'Response carried more than one message');

  const allocate = (pad: number): Uint8Array | ServingError => {
    try {
      // Not from Buffer's shared pool: the caller's tensors may be views of it for as long as it likes.
      return new Uint8Array(Buffer.allocUnsafeSlow(pad + length).buffer, pad, length);
    } catch {
      return new ServingError(
        Code.RESOURCE_EXHAUSTED,
        `Cannot allocate ${length} bytes for the received message`,
      );
    }
  };

  /** Decides placement (when the held bytes tell it, or all have arrived) and moves the held bytes into place. */
  const tryPlace = (place: NonNullable<UnaryCallOptions['responsePadding']>): ServingError | undefined => {
    const pad = place(held, 0, length);
    if (pad === undefined && heldBytes < length) {
      nextTry = heldBytes * 2;
      return undefined;
    }
    const out = allocate((pad ?? 0) & 7);
    if (out instanceof ServingError) return out;
    for (const chunk of held) {
      out.set(chunk, filled);
      filled += chunk.byteLength;
    }
    held = [];
    heldBytes = 0;
    message = out;
    return undefined;
  };

  return {
    push(chunk) {
      let at = 0;
      if (prefixBytes < 5) {
        at = Math.min(5 - prefixBytes, chunk.byteLength);
        prefix.set(chunk.subarray(0, at), prefixBytes);
        prefixBytes += at;
        if (prefixBytes < 5) return undefined;
        if (prefix[0] !== 0) {
          return new ServingError(Code.UNIMPLEMENTED, 'Compressed responses are not supported');
        }
        length = new DataView(prefix.buffer).getUint32(1);
        if (length > options.maxReceiveBytes) {
          return new ServingError(
            Code.RESOURCE_EXHAUSTED,
            `Received message larger than max (${length} vs. ${options.maxReceiveBytes})`,
          );
        }
        const place = length >= PLACE_MIN_BYTES ? options.responsePadding : undefined;
        if (place === undefined) {
          if (length < PLACE_MIN_BYTES && chunk.byteLength - at >= length) {
            if (chunk.byteLength - at > length) return tooMany();
            message = chunk.subarray(at);
            filled = length;
            return undefined;
          }
          const out = allocate(0);
          if (out instanceof ServingError) return out;
          message = out;
        }
      }
      const rest = at === 0 ? chunk : chunk.subarray(at);
      if (rest.byteLength === 0) return undefined;
      if (message !== undefined) {
        if (filled + rest.byteLength > length) return tooMany();
        message.set(rest, filled);
        filled += rest.byteLength;
        return undefined;
      }
      heldBytes += rest.byteLength;
      if (heldBytes > length) return tooMany();
      held.push(rest);
      if (heldBytes >= nextTry || heldBytes === length) return tryPlace(options.responsePadding!);
      return undefined;
    },
    end() {
      if (prefixBytes === 0) return new ServingError(Code.INTERNAL, 'Response carried no message');
      const got = message === undefined ? heldBytes : filled;
      if (prefixBytes < 5 || got < length) {
        return new ServingError(
          Code.INTERNAL,
          prefixBytes < 5
            ? 'Response ended inside the 5-byte message prefix'
            : `Response ended after ${got} of the message's ${length} bytes`,
        );
      }
      // A message of 0 bytes never reaches push's copy path.
      return message ?? new Uint8Array(0);
    },
  };
}
