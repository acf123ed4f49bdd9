/**
 * The HPACK Huffman code (RFC 7541 Appendix B) and a table-driven decoder for it: two lookups
 * per input byte in a (state, 4 bits) table built once at module load (16 KiB, about a
 * millisecond). States are the 256 internal nodes of the code tree; each entry gives the next
 * state, the symbol completed on the way if any (codes are at least 5 bits long, so at most
 * one) and whether that symbol was EOS. A byte-at-a-time table (256 KiB) decodes long strings
 * up to 25% faster but took ~20 ms to build at load, and typical header strings are short
 * enough that making the string costs more than the lookups.
 */
import { HpackError } from './hpack-errors.js';
import { latin1String } from './latin1-string.js';

/**
 * Code length in bits of symbols 0-255 and EOS (256). The code is canonical: codes are
 * assigned in order of (length, symbol), so the lengths alone define it.
 */
// prettier-ignore
const CODE_LENGTHS: readonly number[] = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
  28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
  5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
  7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
  6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
  24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
  21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
  19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
  26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30,
];

const EOS = 256;

/** Codes by symbol (right-aligned in CODE_LENGTHS[symbol] bits), derived from the lengths. */
const CODES: readonly number[] = (() => {
  const order = CODE_LENGTHS.map((_, symbol) => symbol).sort(
    (a, b) => CODE_LENGTHS[a]! - CODE_LENGTHS[b]! || a - b,
  );
  const codes = new Array<number>(CODE_LENGTHS.length).fill(0);
  let code = 0;
  let length = CODE_LENGTHS[order[0]!]!;
  for (let k = 0; k < order.length; k++) {
    const symbol = order[k]!;
    if (k > 0) {
      code = (code + 1) * 2 ** (CODE_LENGTHS[symbol]! - length);
      length = CODE_LENGTHS[symbol]!;
    }
    codes[symbol] = code;
  }
  return codes;
})();

/** Decode-table entry: next state in bits 0-7, the symbol completed in 8-15 when bit 24 is set. */
const EMITTED = 1 << 24;
/** Set (instead of EMITTED) when the step completes the EOS symbol: a decoding error (RFC 7541 §5.2). */
const EOS_REACHED = 1 << 25;

interface Tables {
  /** Entry for (state << 4 | 4 input bits). */
  readonly step: Uint32Array;
  /** 1 for states whose bits since the last symbol are at most 7 ones: valid padding at the end. */
  readonly accepting: Uint8Array;
}

function buildTables(): Tables {
  // The code tree: internal node ids 0-255 (0 is the root); a child is an internal node id
  // (>= 0) or a leaf, -(symbol + 1).
  const children = new Int16Array(512).fill(0x7fff);
  let nodes = 1;
  for (let symbol = 0; symbol <= EOS; symbol++) {
    const length = CODE_LENGTHS[symbol]!;
    const code = CODES[symbol]!;
    let node = 0;
    for (let bit = length - 1; bit >= 0; bit--) {
      const slot = node * 2 + (Math.floor(code / 2 ** bit) % 2);
      if (bit === 0) {
        children[slot] = -(symbol + 1);
      } else {
        if (children[slot] === 0x7fff) children[slot] = nodes++;
        node = children[slot]!;
      }
    }
  }
  if (nodes !== 256 || children.includes(0x7fff)) throw new Error('HPACK Huffman code table is not complete');

  const step = new Uint32Array(256 * 16);
  for (let state = 0; state < 256; state++) {
    for (let bits = 0; bits < 16; bits++) {
      let node = state;
      let entry = 0;
      for (let bit = 3; bit >= 0; bit--) {
        const child = children[node * 2 + ((bits >> bit) & 1)]!;
        if (child >= 0) {
          node = child;
          continue;
        }
        const symbol = -child - 1;
        entry = symbol === EOS ? EOS_REACHED : EMITTED | (symbol << 8);
        node = 0;
      }
      step[(state << 4) | bits] = entry | node;
    }
  }
  const accepting = new Uint8Array(256);
  let node = 0;
  for (let depth = 0; depth <= 7; depth++) {
    accepting[node] = 1;
    node = children[node * 2 + 1]!;
  }
  return { step, accepting };
}

const { step: STEP, accepting: ACCEPTING } = buildTables();

/** Decoded bytes before they become a string; grows to the longest string seen, up to KEPT_BYTES. */
let scratch = new Uint8Array(256);
/** Longer strings decode into a buffer of their own, so one huge header does not stay in memory. */
const KEPT_BYTES = 64 * 1024;

/**
 * Decodes the Huffman-coded string in `src[start..end)` to a latin1 string. Throws HpackError
 * when the code reaches EOS or the padding is longer than 7 bits or not all ones (RFC 7541 §5.2).
 */
export function decodeHuffman(src: Uint8Array, start: number, end: number): string {
  // The shortest code is 5 bits: at most 8/5 symbols per byte.
  const most = Math.ceil(((end - start) * 8) / 5);
  if (scratch.length < most && most <= KEPT_BYTES) {
    scratch = new Uint8Array(Math.min(KEPT_BYTES, Math.max(most, scratch.length * 2)));
  }
  const out = most <= scratch.length ? scratch : new Uint8Array(most);
  let n = 0;
  let state = 0;
  for (let i = start; i < end; i++) {
    const byte = src[i]!;
    let entry = STEP[(state << 4) | (byte >> 4)]!;
    if (entry >= EMITTED) {
      if (entry >= EOS_REACHED) throw new HpackError('Huffman-coded string contains the EOS symbol');
      out[n++] = entry >>> 8;
    }
    entry = STEP[((entry & 0xff) << 4) | (byte & 0x0f)]!;
    if (entry >= EMITTED) {
      if (entry >= EOS_REACHED) throw new HpackError('Huffman-coded string contains the EOS symbol');
      out[n++] = entry >>> 8;
    }
    state = entry & 0xff;
  }
  if (ACCEPTING[state] !== 1) throw new HpackError('Huffman-coded string has invalid padding');
  return latin1String(out, 0, n);
}

/** Bytes `text` takes Huffman-coded (every code unit must be <= 0xff). */
export function huffmanEncodedLength(text: string): number {
  let bits = 0;
  for (let i = 0; i < text.length; i++) bits += CODE_LENGTHS[text.charCodeAt(i) & 0xff]!;
  return Math.ceil(bits / 8);
}

/**
 * Writes `text` Huffman-coded (with all-ones padding) into `out` at `offset`; returns the
 * offset after it. Every code unit of `text` must be <= 0xff; `out` must have room for
 * huffmanEncodedLength(text) bytes.
 */
export function encodeHuffman(text: string, out: Uint8Array, offset: number): number {
  let pos = offset;
  let pending = 0;
  let pendingBits = 0;
  for (let i = 0; i < text.length; i++) {
    const symbol = text.charCodeAt(i) & 0xff;
    const length = CODE_LENGTHS[symbol]!;
    // pending < 2^7 and codes < 2^30: the sum stays well inside a double's exact range.
    pending = pending * 2 ** length + CODES[symbol]!;
    pendingBits += length;
    while (pendingBits >= 8) {
      pendingBits -= 8;
      const unit = 2 ** pendingBits;
      out[pos++] = Math.floor(pending / unit);
      pending %= unit;
    }
  }
  if (pendingBits > 0) out[pos++] = (pending << (8 - pendingBits)) | (0xff >> pendingBits);
  return pos;
}
