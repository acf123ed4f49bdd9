/**
 * Bytes to a JavaScript string, one code unit per byte (ISO-8859-1, as node:http2 reads header
 * values). TextDecoder's 'latin1' is windows-1252 and would remap 0x80-0x9f, so it is not used.
 */

const nativeLatin1Slice = (
  Buffer.prototype as unknown as { latin1Slice: (this: Uint8Array, start: number, end: number) => string }
).latin1Slice;

/** Strings at most this long are built in JavaScript; longer ones by the native slice (~150 ns a call). */
const SHORT = 10;

/** `bytes[start..end)` as a latin1 string. The caller guarantees 0 <= start <= end <= bytes.length. */
export function latin1String(bytes: Uint8Array, start: number, end: number): string {
  const length = end - start;
  if (length > SHORT) return nativeLatin1Slice.call(bytes, start, end);
  let text = '';
  for (let i = start; i < end; i++) text += String.fromCharCode(bytes[i]!);
  return text;
}
