/**
 * Decompression of a request body or message with its cost bounded while it is produced
 * (HTTP `Content-Encoding`, gRPC `grpc-encoding`): the output is streamed, each piece is
 * counted against the request's share of the in-flight byte budget before it is kept, and
 * the stream stops at the first piece past the size limit or the budget. A compression bomb
 * therefore holds at most the smaller of the two, never its whole output.
 */
import { createGunzip, createInflate } from 'node:zlib';

export type InflateFailure =
  /** The output passed `maxBytes`. */
  | { readonly kind: 'too-large' }
  /** The budget refused more bytes. */
  | { readonly kind: 'overloaded' }
  /** Not valid data of the encoding. */
  | { readonly kind: 'corrupt'; readonly message: string };

export interface BoundedInflateOptions {
  /** Largest output accepted, in bytes. */
  readonly maxBytes: number;
  /** Asks for room for `bytes` more of output (the request's budget share); false refuses. */
  readonly grow?: ((bytes: number) => boolean) | undefined;
  /** The error to reject with, for each way it can fail. */
  readonly fail: (failure: InflateFailure) => Error;
}

/** The output as the pieces zlib produced, and their total length. */
export interface Inflated {
  readonly chunks: readonly Buffer[];
  readonly total: number;
}

/** Output piece size: few allocations, each (with glibc defaults) mapped and unmapped on its own. */
const CHUNK_BYTES = 256 * 1024;

/** Decompresses `input` (gzip, or deflate in the zlib format) within `options`. */
export function inflateBounded(
  encoding: 'gzip' | 'deflate',
  input: Uint8Array,
  options: BoundedInflateOptions,
): Promise<Inflated> {
  return new Promise((resolve, reject) => {
    const z =
      encoding === 'gzip'
        ? createGunzip({ chunkSize: CHUNK_BYTES })
        : createInflate({ chunkSize: CHUNK_BYTES });
    const chunks: Buffer[] = [];
    let total = 0;
    let failed = false;
    const fail = (failure: InflateFailure): void => {
      if (failed) return;
      failed = true;
      chunks.length = 0;
      z.destroy();
      reject(options.fail(failure));
    };
    z.on('data', (chunk: Buffer) => {
      if (failed) return;
      total += chunk.byteLength;
      if (total > options.maxBytes) fail({ kind: 'too-large' });
      else if (options.grow?.(chunk.byteLength) === false) fail({ kind: 'overloaded' });
      else chunks.push(chunk);
    });
    z.on('error', (error) => {
      fail({ kind: 'corrupt', message: error.message });
    });
    z.on('end', () => {
      if (!failed) resolve({ chunks, total });
    });
    z.end(input);
  });
}
