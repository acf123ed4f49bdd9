/**
 * BYTES tensors on the wire (binary tensor data extension, gRPC raw contents): each
 * element is a 4-byte little-endian length followed by that many bytes, no padding, in
 * row-major order.
 */
import { invalidArgument } from '../errors.js';

/** Bytes the length-prefixed form of `elements` takes. */
export function bytesElementsSize(elements: readonly Uint8Array[]): number {
  let size = 0;
  for (const e of elements) size += 4 + e.byteLength;
  return size;
}

/** The length-prefixed form of `elements`, in one new buffer. */
export function encodeBytesElements(elements: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(bytesElementsSize(elements));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const e of elements) {
    if (e.byteLength > 0xffffffff) throw invalidArgument('BYTES element longer than 4 GiB - 1');
    view.setUint32(at, e.byteLength, true);
    out.set(e, at + 4);
    at += 4 + e.byteLength;
  }
  return out;
}

/**
 * Splits a length-prefixed region into exactly `count` elements (copies, so that the
 * request buffer is not kept alive or cloned whole when the elements travel to a worker).
 * INVALID_ARGUMENT naming `what` when a length prefix is cut off, a length runs past the
 * region, or the region holds fewer or more elements than `count`. Nothing is allocated
 * for `count` before the region is known to hold that many prefixes.
 */
export function decodeBytesElements(bytes: Uint8Array, count: number, what: string): Uint8Array[] {
  if (count > bytes.byteLength / 4) {
    throw invalidArgument(
      `${what}: ${bytes.byteLength} bytes of BYTES data cannot hold ${count} elements (each needs a 4-byte length)`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: Uint8Array[] = [];
  let at = 0;
  for (let i = 0; i < count; i++) {
    if (at + 4 > bytes.byteLength) {
      throw invalidArgument(`${what}: BYTES element ${i} has no complete 4-byte length prefix`);
    }
    const length = view.getUint32(at, true);
    at += 4;
    if (length > bytes.byteLength - at) {
      throw invalidArgument(
        `${what}: BYTES element ${i} declares ${length} bytes but only ${bytes.byteLength - at} remain`,
      );
    }
    out.push(bytes.slice(at, at + length));
    at += length;
  }
  if (at !== bytes.byteLength) {
    throw invalidArgument(
      `${what}: ${bytes.byteLength - at} bytes left over after ${count} BYTES elements (shape and data disagree)`,
    );
  }
  return out;
}
