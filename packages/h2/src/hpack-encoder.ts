/**
 * A stateless HPACK encoder (RFC 7541) for header blocks that are built once and sent on any
 * connection: it never touches the dynamic table and never Huffman-codes, so its output means
 * the same to every decoder whatever that decoder's table holds.
 */
import { staticName } from './hpack-static-table.js';

/**
 * Encodes a header list statelessly (indexed static entries where name and value match exactly,
 * else literal without indexing with a static name index where one exists; no Huffman, no
 * dynamic table), so a block may be built once, cached, and sent on any connection.
 *
 * Names must be lowercase HTTP tokens (a leading ':' for pseudo-headers) and values latin1 text
 * without NUL, CR or LF (RFC 9113 §8.2.1); anything else throws a RangeError, since a peer would
 * treat the block as malformed. Text beyond latin1 (e.g. a grpc-message) must be
 * percent-encoded by the caller first. A value with SP or HTAB at either end is encoded as
 * given, but RFC 9113 §8.2.1 makes it malformed too and nghttp2-based peers (node:http2) drop
 * such a field: trim or percent-encode those ends.
 */
export function encodeHeaderBlock(headers: readonly (readonly [string, string])[]): Uint8Array {
  // First pass: each field's representation (static index > 0 exact, < 0 name only, 0 new
  // name) and the exact size; second pass: the bytes.
  if (kinds.length < headers.length) kinds = new Int32Array(headers.length * 2);
  let size = 0;
  for (let i = 0; i < headers.length; i++) {
    const [name, value] = headers[i]!;
    checkName(name);
    const known = staticName(name);
    const exact = known?.values.get(value);
    if (exact !== undefined) {
      kinds[i] = exact;
      size += 1;
    } else if (known !== undefined) {
      kinds[i] = -known.index;
      size += (known.index < 15 ? 1 : 2) + integerSize(value.length, 7) + value.length;
    } else {
      kinds[i] = 0;
      size += 1 + integerSize(name.length, 7) + name.length + integerSize(value.length, 7) + value.length;
    }
  }
  const out = Buffer.allocUnsafe(size);
  let pos = 0;
  for (let i = 0; i < headers.length; i++) {
    const [name, value] = headers[i]!;
    const kind = kinds[i]!;
    if (kind > 0) {
      out[pos++] = 0x80 | kind;
      continue;
    }
    // Literal header field without indexing (§6.2.2): 0000 and a 4-bit name index prefix.
    pos = writeInteger(out, pos, -kind, 4, 0x00);
    if (kind === 0) pos = writeRawString(out, pos, name);
    pos = writeRawString(out, pos, value, true);
  }
  return out;
}

/** Per-field representation of the block being encoded (see encodeHeaderBlock); grows as needed. */
let kinds = new Int32Array(16);

/** Bytes an integer takes with an n-bit prefix (§5.1). */
function integerSize(value: number, prefixBits: number): number {
  const max = (1 << prefixBits) - 1;
  if (value < max) return 1;
  let size = 2;
  for (let rest = value - max; rest >= 0x80; rest >>>= 7) size++;
  return size;
}

/** Writes `value` as an integer with an n-bit prefix (§5.1) whose first byte ORs in `high`. */
function writeInteger(
  out: Uint8Array,
  offset: number,
  value: number,
  prefixBits: number,
  high: number,
): number {
  let pos = offset;
  const max = (1 << prefixBits) - 1;
  if (value < max) {
    out[pos++] = high | value;
    return pos;
  }
  out[pos++] = high | max;
  let rest = value - max;
  while (rest >= 0x80) {
    out[pos++] = (rest & 0x7f) | 0x80;
    rest >>>= 7;
  }
  out[pos++] = rest;
  return pos;
}

/** Writes a string literal without Huffman coding (§5.2), checking a value's characters. */
function writeRawString(out: Uint8Array, offset: number, text: string, isValue = false): number {
  let pos = writeInteger(out, offset, text.length, 7, 0x00);
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (isValue && (code > 0xff || code === 0x00 || code === 0x0a || code === 0x0d)) {
      throw new RangeError(
        `header value ${JSON.stringify(text.slice(0, 64))} holds character U+${code.toString(16).padStart(4, '0')}, not allowed in an HTTP/2 field value`,
      );
    }
    out[pos++] = code;
  }
  return pos;
}

/** Characters of an HTTP token (RFC 9110 §5.6.2) allowed in an HTTP/2 field name: no uppercase. */
const NAME_CHARS = (() => {
  const ok = new Uint8Array(128);
  for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz") ok[c.charCodeAt(0)] = 1;
  return ok;
})();

function checkName(name: string): void {
  const start = name.startsWith(':') ? 1 : 0;
  let ok = name.length > start;
  for (let i = start; ok && i < name.length; i++) ok = NAME_CHARS[name.charCodeAt(i)] === 1;
  if (!ok) {
    throw new RangeError(
      `header name ${JSON.stringify(name.slice(0, 64))} is not a lowercase HTTP token, as HTTP/2 requires`,
    );
  }
}
