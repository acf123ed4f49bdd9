/**
 * The request messages of a streaming gRPC call, cut from its DATA as they arrive: each
 * length-prefixed message is copied into a buffer of its own (the handler keeps it) and
 * handed on whole; compressed ones (`grpc-encoding` gzip or deflate) are decompressed, up to
 * the same size limit.
 */
import { gunzipSync, inflateSync } from 'node:zlib';
import { Code, ServingError } from '@visionserve/protocol';
import { type InflightBudget, type Reservation, budgetExhausted } from '../shared/inflight-budget.js';

export interface StreamMessageOptions {
  readonly maxMessageBytes: number;
  readonly encoding: 'gzip' | 'deflate' | undefined;
  /** A message being read holds its size of this budget until it is whole (UNAVAILABLE when it cannot). */
  readonly budget?: InflightBudget | undefined;
}

export function readStreamMessages(
  options: StreamMessageOptions,
  onMessage: (message: Uint8Array) => void,
  onError: (error: ServingError) => void,
): (chunk: Buffer) => void {
  const { maxMessageBytes, encoding } = options;
  let reservation: Reservation | undefined;
  const prefix = Buffer.alloc(5);
  let prefixFill = 0;
  let message: Buffer | undefined;
  let fill = 0;
  let failed = false;
  const fail = (error: ServingError): void => {
    failed = true;
    reservation?.release();
    reservation = undefined;
    onError(error);
  };
  /** Takes the prefix bytes at the front of `chunk`; returns how many it took (-1: failed). */
  const readPrefix = (chunk: Buffer, at: number): number => {
    const take = Math.min(5 - prefixFill, chunk.byteLength - at);
    chunk.copy(prefix, prefixFill, at, at + take);
    prefixFill += take;
    if (prefixFill < 5) return take;
    const length = prefix.readUInt32BE(1);
    if (length > maxMessageBytes) {
      fail(
        new ServingError(
          Code.RESOURCE_EXHAUSTED,
          `Received message larger than max (${length} vs. ${maxMessageBytes})`,
        ),
      );
      return -1;
    }
    if (options.budget !== undefined) {
      reservation = options.budget.tryReserve(length);
      if (reservation === undefined) {
        fail(budgetExhausted());
        return -1;
      }
    }
    message = Buffer.allocUnsafeSlow(length);
    fill = 0;
    return take;
  };
  const complete = (): void => {
    const whole = message!;
    const compressed = prefix[0] !== 0;
    message = undefined;
    prefixFill = 0;
    reservation?.release();
    reservation = undefined;
    if (!compressed) {
      onMessage(whole);
      return;
    }
    const inflated = decompress(whole, prefix[0]!, encoding, maxMessageBytes);
    if (inflated instanceof ServingError) fail(inflated);
    else onMessage(inflated);
  };
  return (chunk) => {
    let at = 0;
    while (!failed && at < chunk.byteLength) {
      if (message === undefined) {
        const took = readPrefix(chunk, at);
        if (took < 0) return;
        at += took;
        if (message === undefined) return;
      }
      const take = Math.min(message.byteLength - fill, chunk.byteLength - at);
      chunk.copy(message, fill, at, at + take);
      fill += take;
      at += take;
      if (fill === message.byteLength) complete();
    }
    // A zero-length message completes with its prefix.
    if (!failed && message !== undefined && message.byteLength === 0) complete();
  };
}

function decompress(
  bytes: Buffer,
  flag: number,
  encoding: 'gzip' | 'deflate' | undefined,
  maxMessageBytes: number,
): Uint8Array | ServingError {
  if (flag !== 1 || encoding === undefined) {
    return new ServingError(
      Code.INTERNAL,
      'Compressed message without a supported grpc-encoding (gzip, deflate)',
    );
  }
  try {
    const options = { maxOutputLength: Math.max(1, maxMessageBytes) };
    return encoding === 'gzip' ? gunzipSync(bytes, options) : inflateSync(bytes, options);
  } catch (error) {
    if (error instanceof RangeError) {
      return new ServingError(
        Code.RESOURCE_EXHAUSTED,
        `Decompressed message larger than max (${maxMessageBytes})`,
      );
    }
    return new ServingError(
      Code.INTERNAL,
      `Cannot decompress the ${encoding} message: ${(error as Error).message}`,
    );
  }
}
