/**
 * A fast reader for the TF Serving predict bodies that carry big tensors:
 * `{"instances": <numbers>}`, `{"inputs": <numbers>}` and `{"inputs": {"name": <numbers>, ...}}`
 * (with an optional `"signature_name"`), where `<numbers>` is a rectangular nested list of
 * JSON numbers. It reads the UTF-8 bytes straight into one Float64Array per tensor with its
 * shape, instead of building a JavaScript array per row and a heap number per element.
 *
 * Contract: for every body it accepts, the result is what JSON.parse followed by the general
 * codec would give (same float64 values bit for bit, same shape); for anything else (other
 * keys, strings with escapes, named rows, NaN/Infinity tokens, ragged lists, malformed text)
 * it returns undefined and the caller takes the general path, whose errors are the contract.
 */

import { type JsonLimits, NO_JSON_LIMITS } from './json-limits.js';

/**
 * A rectangular nested list of JSON numbers read by readNumericPredictBody. Numbers of up
 * to 15 significant digits are read exactly; longer ones (up to 18 digits, such as the
 * 17-digit repr of a float32 widened to float64 that numpy's tolist() gives) are first
 * approximated to within a few float64 ulps and made exact only where it matters: all of
 * them for exactValues(), and for toFloat32() only those within a few ulps of a float32
 * rounding boundary.
 */
export class PackedNumbers {
  #resolved: boolean;
  /** The float32 values, when the reading thread worked them out (taken by float32Values). */
  #float32: Float32Array | undefined;

  constructor(
    /** Sizes of the nesting, outermost first; [] for a bare number. */
    readonly shape: readonly number[],
    private readonly values: Float64Array,
    /** (index, start, end) of every approximated number: its text in `bytes`. */
    private readonly inexact: Int32Array,
    private readonly bytes: Uint8Array,
    /** toFloat32's result, worked out already (by the thread that read the body). Default: none. */
    float32?: Float32Array,
  ) {
    this.#resolved = inexact.length === 0;
    this.#float32 = float32;
  }

  /** Element count. */
  get length(): number {
    return this.values.length;
  }

  /** The same numbers under another shape of the same element count (shares the arrays). */
  withShape(shape: readonly number[]): PackedNumbers {
    return new PackedNumbers(shape, this.values, this.inexact, this.bytes, this.#float32);
  }

  /** The numbers in row-major order, exactly as JSON.parse reads them. */
  exactValues(): Float64Array {
    if (!this.#resolved) {
      for (let k = 0; k < this.inexact.length; k += 3) {
        this.values[this.inexact[k]!] = exactNumber(this.bytes, this.inexact[k + 1]!, this.inexact[k + 2]!);
      }
      this.#resolved = true;
    }
    return this.values;
  }

  /**
   * The arrays behind these numbers, for moving them to another thread (see
   * fastBodyToMessage). The text positions in `inexact` index the body bytes this
   * instance was read from.
   */
  parts(): PackedParts {
    return { shape: this.shape, values: this.values, inexact: this.inexact };
  }

  /**
   * Math.fround(exact value) of every number in a new array that the caller owns: the one
   * the reading thread worked out when there is one (handed out once), else toFloat32's.
   */
  float32Values(): Float32Array {
    const ready = this.#float32;
    if (ready !== undefined && ready.length === this.values.length) {
      this.#float32 = undefined;
      return ready;
    }
    const out = new Float32Array(this.values.length);
    this.toFloat32(out);
    return out;
  }

  /** Writes Math.fround(exact value) of every number into `out` (as a float32 tensor gets them). */
  toFloat32(out: Float32Array): void {
    const ready = this.#float32;
    if (ready !== undefined && ready.length === out.length) {
      out.set(ready);
      return;
    }
    if (this.#resolved) {
      out.set(this.values);
      return;
    }
    out.set(this.values);
    for (let k = 0; k < this.inexact.length; k += 3) {
      const i = this.inexact[k]!;
      if (!float32Safe(this.values[i]!, out[i]!)) {
        out[i] = exactNumber(this.bytes, this.inexact[k + 1]!, this.inexact[k + 2]!);
      }
    }
  }
}

const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);

/**
 * True when `f` = fround(x) is also fround(v) for every v within 2^-48 of x (relative): x
 * is not near a float32 rounding boundary (half a float32 ulp from f) nor at the edges of
 * the float32 range, so the exact double would round to the same float32.
 */
function float32Safe(x: number, f: number): boolean {
  F32[0] = f;
  const bits = U32[0]!;
  const exp = (bits >>> 23) & 0xff;
  // Zero, subnormal or tiny (no ulp below), near overflow, non-finite: the exact path.
  if (exp < 24 || exp >= 0xfe) return false;
  // Below a power of two the lower neighbour is half as far.
  if ((bits & 0x7fffff) === 0 && Math.abs(x) < Math.abs(f)) return false;
  U32[0] = (exp - 23) << 23; // the float32 ulp at f: 2^(exp - 127 - 23)
  const halfUlp = F32[0] / 2;
  return halfUlp - Math.abs(x - f) > Math.abs(x) * MARGIN;
}

/** Relative distance from a boundary under which toFloat32 re-reads a number exactly. */
const MARGIN = 2 ** -48;

const ASCII = new TextDecoder();

/**
 * The number whose JSON text is bytes[start, end), as JSON.parse reads it. A long one is decoded
 * in one go: built a character at a time, a 2,000,000-digit number cost 355 ms and 83 MiB.
 */
function exactNumber(bytes: Uint8Array, start: number, end: number): number {
  if (end - start > 32) return Number(ASCII.decode(bytes.subarray(start, end)));
  let text = '';
  for (let i = start; i < end; i++) text += String.fromCharCode(bytes[i]!);
  return Number(text);
}

/** A predict body the fast reader accepted: the JSON object with PackedNumbers for the tensors. */
export type NumericPredictBody = Record<string, string | PackedNumbers | Record<string, PackedNumbers>>;

/** The arrays of one PackedNumbers (see PackedNumbers.parts). */
export interface PackedParts {
  readonly shape: readonly number[];
  readonly values: Float64Array;
  readonly inexact: Int32Array;
  /** toFloat32's result, when the sender worked it out (bodies with approximated numbers). */
  readonly float32?: Float32Array;
}

/** One PackedNumbers of a body read by readFastJsonBody, as plain data: where it sits, its arrays. */
export interface PackedAt {
  /** Keys and list indices from the body's root to the tensor. */
  readonly path: readonly (string | number)[];
  readonly parts: PackedParts;
}

/**
 * A body read by readFastJsonBody as plain data for postMessage: the JSON tree with `null`
 * where its PackedNumbers were, and those tensors' arrays with their paths. The body bytes
 * stay with the receiver.
 */
export interface FastBodyMessage {
  readonly tree: unknown;
  readonly packed: readonly PackedAt[];
}

/**
 * `body` (a readFastJsonBody result) as a message another thread can rebuild with
 * fastBodyFromMessage, and the buffers to transfer with it (the tensors' arrays: `body`
 * must not be used afterwards). `place` may give a tensor's values another home: an array
 * to send instead (a copy in shared memory is shared, not moved), or undefined to move them
 * as they are. Default: every array moves. `float32`: every tensor also carries its float32
 * values (what a float32 input takes), not only those with approximated numbers.
 */
export function fastBodyToMessage(
  body: unknown,
  place?: (values: Float64Array) => Float64Array | undefined,
  float32 = false,
): { message: FastBodyMessage; transfer: ArrayBuffer[] } {
  const packed: PackedAt[] = [];
  const transfer: ArrayBuffer[] = [];
  const path: (string | number)[] = [];
  const copy = (value: unknown): unknown => {
    if (value instanceof PackedNumbers) {
      let parts = value.parts();
      const placed = place?.(parts.values);
      if (placed !== undefined) parts = { ...parts, values: placed };
      // Shared memory is shared by the message, not moved.
      const values = parts.values.buffer;
      if (!(values instanceof SharedArrayBuffer)) transfer.push(values);
      transfer.push(parts.inexact.buffer as ArrayBuffer);
      if (float32 || parts.inexact.length > 0) {
        // The float32 rounding of approximated numbers (float32Safe, a re-read near a
        // rounding boundary) is done here, on the sending (decode) thread; with `float32`,
        // of every tensor.
        const float32 = new Float32Array(value.length);
        value.toFloat32(float32);
        transfer.push(float32.buffer);
        packed.push({ path: [...path], parts: { ...parts, float32 } });
      } else {
        packed.push({ path: [...path], parts });
      }
      return null;
    }
    if (Array.isArray(value)) {
      return value.map((item: unknown, i) => {
        path.push(i);
        const out = copy(item);
        path.pop();
        return out;
      });
    }
    if (typeof value === 'object' && value !== null) {
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(value)) {
        path.push(key);
        out[key] = copy(item);
        path.pop();
      }
      return out;
    }
    return value;
  };
  return { message: { tree: copy(body), packed }, transfer };
}

/**
 * The body that fastBodyToMessage described, over `bytes`: the same body text the sender
 * read (its inexact numbers are read again from it when needed).
 */
export function fastBodyFromMessage(message: FastBodyMessage, bytes: Uint8Array): unknown {
  let root = message.tree;
  for (const { path, parts } of message.packed) {
    const packed = new PackedNumbers(parts.shape, parts.values, parts.inexact, bytes, parts.float32);
    if (path.length === 0) {
      root = packed;
      continue;
    }
    let at = root as Record<string | number, unknown>;
    for (let i = 0; i < path.length - 1; i++) at = at[path[i]!] as Record<string | number, unknown>;
    at[path[path.length - 1]!] = packed;
  }
  return root;
}

/** Most values reserved from the first innermost list's density (more grow by doubling). */
const ESTIMATE_CAP = 1 << 24;

/** Nesting deeper than this goes to the general path (which refuses beyond its own limit). */
const MAX_DEPTH = 64;

// 10^0 .. 10^22 are exact doubles: m * 10^e or m / 10^e with m < 2^53 is correctly rounded.
const POW10 = Array.from({ length: 23 }, (_, i) => Number(`1e${i}`));

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;

/** Thrown inside the reader to fall back; never escapes it. */
const FALLBACK = new Error('not a numeric predict body');

/** `values` copied into an array twice as long. */
function doubledFloat64(values: Float64Array): Float64Array<ArrayBuffer> {
  const grown = new Float64Array(values.length * 2);
  grown.set(values);
  return grown;
}

/** `values` copied into an array twice as long. */
function doubledInt32(values: Int32Array): Int32Array<ArrayBuffer> {
  const grown = new Int32Array(values.length * 2);
  grown.set(values);
  return grown;
}

class Reader {
  pos = 0;
  /** Values of the tensor being read (grown by doubling, then copied out exactly sized). */
  private scratch = new Float64Array(16);
  /** Elements the density estimates may still allocate for this body (see list()). */
  private estimateBudget: number;
  private count = 0;
  /** (index, start, end) of the approximated numbers of the tensor being read. */
  private inexact = new Int32Array(96);
  private inexactCount = 0;

  /** The next tensor's values go into the caller's scratch array (see readFastJsonBody). */
  private borrowed: boolean;
  /** JSON values read so far (limits.maxValues). */
  private values = 0;

  constructor(
    private readonly bytes: Uint8Array,
    scratch?: Float64Array<ArrayBuffer>,
    /** Past one of these the reader falls back (the general path's check then refuses the body). */
    private readonly limits: JsonLimits = NO_JSON_LIMITS,
  ) {
    this.estimateBudget = bytes.length;
    this.borrowed = scratch !== undefined;
    if (scratch !== undefined) this.scratch = scratch;
  }

  ws(): void {
    const b = this.bytes;
    let p = this.pos;
    for (;;) {
      const c = b[p];
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) p++;
      else break;
    }
    this.pos = p;
  }

  expect(c: number): void {
    this.ws();
    if (this.bytes[this.pos] !== c) throw FALLBACK;
    this.pos++;
  }

  /** A string of printable ASCII without escapes (keys, signature names); others fall back. */
  string(): string {
    this.expect(QUOTE);
    const b = this.bytes;
    const start = this.pos;
    let p = start;
    for (;;) {
      const c = b[p];
      if (c === undefined || c === BACKSLASH || c < 0x20 || c > 0x7e) throw FALLBACK;
      if (c === QUOTE) break;
      p++;
    }
    this.pos = p + 1;
    let s = '';
    for (let i = start; i < p; i += 4096) {
      s += String.fromCharCode(...b.subarray(i, Math.min(p, i + 4096)));
    }
    return s;
  }

  /** One more JSON value (limits.maxValues), or a fall back. */
  counted(values: number): void {
    this.values += values;
    if (this.values > this.limits.maxValues) throw FALLBACK;
  }

  /** A list or object at nesting `level` (the body is 1), within limits.maxDepth, or a fall back. */
  atLevel(level: number): void {
    if (level > this.limits.maxDepth) throw FALLBACK;
  }

  /** Keys read so far of one object (limits.maxObjectKeys), or a fall back. */
  keyCounted(keys: number): void {
    if (keys > this.limits.maxObjectKeys) throw FALLBACK;
  }

  /** A rectangular nested list of numbers (or one number), its outermost list at level `level`. */
  tensor(level: number): PackedNumbers {
    this.count = 0;
    this.inexactCount = 0;
    this.ws();
    const shape: number[] = [];
    if (this.bytes[this.pos] === LBRACKET) {
      if (level > this.limits.maxDepth) throw FALLBACK;
      this.list(shape, this.limits.maxDepth - level);
    } else {
      const start = this.pos;
      const v = this.number();
      if (this.approximated) this.markInexact(start, this.pos);
      this.push(v);
    }
    const n = this.count;
    // Its lists count as values too.
    let lists = 0;
    let product = 1;
    for (const size of shape) {
      lists += product;
      product *= size;
    }
    this.counted(n + lists);
    const values = this.scratch;
    // Hand the array over when little of it is unused (or it is the caller's scratch, which
    // the first tensor views); else copy the values out and keep the array for the next
    // tensor of the body.
    const handOver = this.borrowed || values.length - n <= values.length >> 3;
    this.borrowed = false;
    const out = handOver ? values.subarray(0, n) : values.slice(0, n);
    this.scratch = handOver ? new Float64Array(0) : values;
    const marks = this.inexact;
    const ic = this.inexactCount;
    const handOverMarks = marks.length - ic <= marks.length >> 3;
    const outMarks = handOverMarks ? marks.subarray(0, ic) : marks.slice(0, ic);
    this.inexact = handOverMarks ? new Int32Array(96) : marks;
    return new PackedNumbers(shape, out, outMarks, this.bytes);
  }

  /**
   * Reads the rectangular list at `pos` (a `[`), depth first and without recursion: the
   * first list met at a depth is complete (and has fixed every deeper size) before any
   * other list at that depth begins; each later list must match (same size, numbers
   * exactly at the innermost level). The innermost lists are read by numbers().
   */
  private list(shape: number[], deeperLevels: number): void {
    const b = this.bytes;
    const len = b.length;
    const begin = this.pos;
    let p = begin + 1;
    /** Elements so far of the open list at each depth. */
    const sizes = new Int32Array(MAX_DEPTH);
    let depth = 0;
    /** Depth of the innermost lists (-1: not known yet). */
    let leaf = -1;
    shape.push(-1);
    let c = p < len ? b[p]! : 0;
    while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++p < len ? b[p]! : 0;
    if (c === RBRACKET) {
      shape[0] = 0;
      this.pos = p + 1;
      return;
    }
    for (;;) {
      // At the start of an element of the list at `depth`.
      c = p < len ? b[p]! : 0;
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++p < len ? b[p]! : 0;
      if (c === LBRACKET) {
        if (leaf >= 0 && depth >= leaf) throw FALLBACK;
        if (++depth >= MAX_DEPTH || depth > deeperLevels) throw FALLBACK;
        if (depth === shape.length) shape.push(-1);
        sizes[depth] = 0;
        p++;
        c = p < len ? b[p]! : 0;
        while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++p < len ? b[p]! : 0;
        if (c !== RBRACKET) continue;
        // An empty list: no level below it.
        p++;
        if (shape[depth] === -1) {
          if (depth !== shape.length - 1) throw FALLBACK;
          shape[depth] = 0;
          leaf = depth;
        } else if (shape[depth] !== 0) {
          throw FALLBACK;
        }
      } else {
        if (leaf < 0) {
          if (depth !== shape.length - 1) throw FALLBACK;
          leaf = depth;
          if (this.count === 0 && this.scratch.length < 1024) this.scratch = new Float64Array(1024);
        } else if (depth !== leaf) {
          throw FALLBACK;
        }
        this.pos = p;
        const n = this.numbers(c, shape[depth]!, sizes, depth);
        p = this.pos;
        if (shape[depth] === -1) {
          shape[depth] = n;
          // The first innermost list: size the values for the whole body at its density.
          if (sizes[0] === 0 && p - begin > 0) this.reserveAtDensity(len - begin, p - begin);
        } else if (shape[depth] !== n) {
          throw FALLBACK;
        }
      }
      // The list at `depth` ended at p - 1: close it and every list that ends with it.
      this.pos = p;
      depth = this.closeLists(shape, sizes, depth);
      if (depth < 0) return;
      p = this.pos;
    }
  }

  /**
   * The numbers of an innermost list at `depth`, from its first element (at `pos`, the byte
   * `c`) to its `]` (pos then past it), appended to the scratch values; how many. When the
   * lists at that depth have a known `size` (not -1), the sibling lists that follow it are
   * read too (each of `size` numbers, counted in `sizes[depth - 1]`) and pos is past the
   * last one's `]`. Numbers are parsed in line (see number() for the rules; this is the same
   * code, kept in this loop for speed: a call per number, or per list of three, would cost
   * more than the parse of a short one).
   */
  private numbers(c: number, size: number, sizes: Int32Array, depth: number): number {
    const b = this.bytes;
    const len = b.length;
    let p = this.pos;
    let values = this.scratch;
    let count = this.count;
    let inexact = this.inexact;
    let ic = this.inexactCount;
    let n = 0;
    for (;;) {
      const start = p;
      let negative = false;
      if (c === MINUS) {
        negative = true;
        c = ++p < len ? b[p]! : 0;
      }
      let m = 0;
      let digits = 0;
      let exponent = 0;
      if (c === ZERO) {
        c = ++p < len ? b[p]! : 0;
        if (c >= ZERO && c <= NINE) throw FALLBACK; // leading zero
      } else if (c > ZERO && c <= NINE) {
        do {
          m = m * 10 + (c - ZERO);
          digits++;
          c = ++p < len ? b[p]! : 0;
        } while (c >= ZERO && c <= NINE);
      } else {
        throw FALLBACK; // NaN, Infinity, strings, objects, lists at this level, end of input, ...
      }
      if (c === DOT) {
        c = ++p < len ? b[p]! : 0;
        if (c < ZERO || c > NINE) throw FALLBACK;
        if (digits === 0) {
          while (c === ZERO) {
            exponent--;
            c = ++p < len ? b[p]! : 0;
          }
        }
        while (c >= ZERO && c <= NINE) {
          m = m * 10 + (c - ZERO);
          digits++;
          exponent--;
          c = ++p < len ? b[p]! : 0;
        }
      }
      if (c === 0x65 || c === 0x45) {
        c = ++p < len ? b[p]! : 0;
        let expNegative = false;
        if (c === MINUS || c === PLUS) {
          expNegative = c === MINUS;
          c = ++p < len ? b[p]! : 0;
        }
        if (c < ZERO || c > NINE) throw FALLBACK;
        let e = 0;
        do {
          if (e < 100_000) e = e * 10 + (c - ZERO);
          c = ++p < len ? b[p]! : 0;
        } while (c >= ZERO && c <= NINE);
        exponent += expNegative ? -e : e;
      }
      let v: number;
      if (exponent < -22 || exponent > 22 || digits > 18) {
        v = exactNumber(b, start, p);
      } else {
        v = exponent < 0 ? m / POW10[-exponent]! : m * POW10[exponent]!;
        if (negative) v = -v;
        if (digits > 15) {
          if (ic + 3 > inexact.length) inexact = doubledInt32(inexact);
          inexact[ic] = count;
          inexact[ic + 1] = start;
          inexact[ic + 2] = p;
          ic += 3;
        }
      }
      if (count === values.length) values = doubledFloat64(values);
      values[count++] = v;
      n++;
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++p < len ? b[p]! : 0;
      p++;
      if (c === COMMA) {
        c = p < len ? b[p]! : 0;
        while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++p < len ? b[p]! : 0;
        continue;
      }
      if (c !== RBRACKET) throw FALLBACK;
      // The list ended (p past its `]`). The first innermost list goes back to list() to fix
      // the size; later ones go on here with the siblings that follow (`, [`): one call per
      // run of lists rather than per list.
      if (size < 0) break;
      if (n !== size) throw FALLBACK;
      let q = p;
      c = q < len ? b[q]! : 0;
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++q < len ? b[q]! : 0;
      if (c !== COMMA) break;
      c = ++q < len ? b[q]! : 0;
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++q < len ? b[q]! : 0;
      if (c !== LBRACKET) break;
      c = ++q < len ? b[q]! : 0;
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++q < len ? b[q]! : 0;
      if (c === RBRACKET) throw FALLBACK; // an empty list beside lists of `size` numbers
      // The list closed, counted in its parent's elements; its sibling is read from q.
      sizes[depth - 1] = sizes[depth - 1]! + 1;
      p = q;
      n = 0;
    }
    this.pos = p;
    this.scratch = values;
    this.count = count;
    this.inexact = inexact;
    this.inexactCount = ic;
    return n;
  }

  /**
   * Sizes the values for the `total` bytes of the outermost list at the density of its first
   * `read` bytes (the approximated numbers' marks at the same share).
   */
  private reserveAtDensity(total: number, read: number): void {
    const count = this.count;
    const estimate = Math.min(ESTIMATE_CAP, Math.ceil((total * count) / read) + 16);
    // Every tensor of a body estimates the rest of the body: past a budget of one element
    // per body byte in all, arrays only double (no quadratic cost for bodies of many small
    // tensors).
    if (estimate <= this.scratch.length || estimate > this.estimateBudget) return;
    this.estimateBudget -= estimate;
    const grown = new Float64Array(estimate);
    grown.set(this.scratch.subarray(0, count));
    this.scratch = grown;
    const ic = this.inexactCount;
    const marks = Math.ceil((estimate * ic) / count) + 3;
    if (marks > this.inexact.length) {
      const more = new Int32Array(marks);
      more.set(this.inexact.subarray(0, ic));
      this.inexact = more;
    }
  }

  /**
   * Closes the list at `depth` that ended at pos - 1 and every list that ends with it: the
   * depth of the list whose next element follows (pos past its comma), or -1 once the
   * outermost list has closed (pos past its `]`).
   */
  private closeLists(shape: number[], sizes: Int32Array, depth: number): number {
    const b = this.bytes;
    const len = b.length;
    let p = this.pos;
    for (;;) {
      if (depth === 0) {
        this.pos = p;
        return -1;
      }
      depth--;
      sizes[depth] = sizes[depth]! + 1;
      let c = p < len ? b[p]! : 0;
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = ++p < len ? b[p]! : 0;
      p++;
      if (c === COMMA) {
        this.pos = p;
        return depth;
      }
      if (c !== RBRACKET) throw FALLBACK;
      if (shape[depth] === -1) shape[depth] = sizes[depth]!;
      else if (shape[depth] !== sizes[depth]) throw FALLBACK;
    }
  }

  private push(v: number): void {
    if (this.count === this.scratch.length) {
      const grown = new Float64Array(Math.max(16, this.scratch.length * 2));
      grown.set(this.scratch);
      this.scratch = grown;
    }
    this.scratch[this.count++] = v;
  }

  /** Set by number(): the value it returned is an approximation (16 to 18 digits). */
  approximated = false;

  /**
   * Reads a JSON number: exact up to 15 significant digits, approximated to within 2^-51
   * (relative; `approximated` set) for 16 to 18, exact through V8 beyond or for big exponents.
   */
  number(): number {
    const b = this.bytes;
    const start = this.pos;
    let p = start;
    let c = b[p];
    const negative = c === MINUS;
    if (negative) c = b[++p];
    // The significant digits as an integer `m` (exact below 2^53, so for up to 15 digits;
    // after that each step rounds once: at most three roundings for 18 digits).
    let m = 0;
    let digits = 0; // significant digits (leading zeros excluded)
    let exponent = 0; // of the last digit counted
    if (c === ZERO) {
      c = b[++p];
      if (c !== undefined && c >= ZERO && c <= NINE) throw FALLBACK; // leading zero
    } else if (c !== undefined && c > ZERO && c <= NINE) {
      do {
        m = m * 10 + (c - ZERO);
        digits++;
        c = b[++p];
      } while (c !== undefined && c >= ZERO && c <= NINE);
    } else {
      throw FALLBACK; // NaN, Infinity, strings, objects, end of input, ...
    }
    if (c === DOT) {
      c = b[++p];
      if (c === undefined || c < ZERO || c > NINE) throw FALLBACK;
      if (digits === 0) {
        while (c === ZERO) {
          exponent--; // leading zeros of a fraction
          c = b[++p];
        }
      }
      while (c !== undefined && c >= ZERO && c <= NINE) {
        m = m * 10 + (c - ZERO);
        digits++;
        exponent--;
        c = b[++p];
      }
    }
    if (c === 0x65 || c === 0x45) {
      c = b[++p];
      let expNegative = false;
      if (c === MINUS || c === PLUS) {
        expNegative = c === MINUS;
        c = b[++p];
      }
      if (c === undefined || c < ZERO || c > NINE) throw FALLBACK;
      let e = 0;
      do {
        if (e < 100_000) e = e * 10 + (c - ZERO);
        c = b[++p];
      } while (c !== undefined && c >= ZERO && c <= NINE);
      exponent += expNegative ? -e : e;
    }
    this.pos = p;
    if (exponent < -22 || exponent > 22 || digits > 18) {
      // Big exponents or very long numbers: V8 rounds the text, as JSON.parse does.
      this.approximated = false;
      return exactNumber(b, start, p);
    }
    // 10^|exponent| is exact: one more correctly rounded operation. Up to 15 digits that is
    // the correctly rounded value; beyond, within 2^-51 of it.
    const value = exponent < 0 ? m / POW10[-exponent]! : m * POW10[exponent]!;
    this.approximated = digits > 15;
    return negative ? -value : value;
  }

  private markInexact(start: number, end: number): void {
    if (this.inexactCount + 3 > this.inexact.length) {
      const grown = new Int32Array(this.inexact.length * 2);
      grown.set(this.inexact);
      this.inexact = grown;
    }
    this.inexact[this.inexactCount++] = this.count;
    this.inexact[this.inexactCount++] = start;
    this.inexact[this.inexactCount++] = end;
  }

  end(): void {
    this.ws();
    if (this.pos !== this.bytes.length) throw FALLBACK;
  }

  /**
   * Any JSON value as JSON.parse gives it (strings only of printable ASCII without escapes,
   * no duplicate or `__proto__` keys), except that a rectangular numeric list under a
   * `packKey` key becomes PackedNumbers.
   */
  value(depth: number, packKey: string): unknown {
    if (depth >= MAX_DEPTH || depth >= this.limits.maxDepth) throw FALLBACK;
    this.counted(1);
    this.ws();
    const b = this.bytes;
    const c = b[this.pos];
    if (c === LBRACE) {
      this.pos++;
      const out: Record<string, unknown> = {};
      this.ws();
      if (b[this.pos] === RBRACE) {
        this.pos++;
        return out;
      }
      for (let keys = 1; ; keys++) {
        this.keyCounted(keys);
        const key = this.string();
        if (key === '__proto__' || Object.hasOwn(out, key)) throw FALLBACK;
        this.expect(COLON);
        out[key] =
          key === packKey && this.numericListAhead()
            ? this.tensor(depth + 2)
            : this.value(depth + 1, packKey);
        this.ws();
        const d = b[this.pos++];
        if (d === COMMA) continue;
        if (d === RBRACE) return out;
        throw FALLBACK;
      }
    }
    if (c === LBRACKET) {
      this.pos++;
      const out: unknown[] = [];
      this.ws();
      if (b[this.pos] === RBRACKET) {
        this.pos++;
        return out;
      }
      for (;;) {
        out.push(this.value(depth + 1, packKey));
        this.ws();
        const d = b[this.pos++];
        if (d === COMMA) continue;
        if (d === RBRACKET) return out;
        throw FALLBACK;
      }
    }
    if (c === QUOTE) return this.string();
    if (c === MINUS || (c !== undefined && c >= ZERO && c <= NINE)) {
      const start = this.pos;
      const v = this.number();
      return this.approximated ? exactNumber(b, start, this.pos) : v;
    }
    if (this.literal('true')) return true;
    if (this.literal('false')) return false;
    if (this.literal('null')) return null;
    throw FALLBACK;
  }

  /** After whitespace: one or more `[` and then the start of a number. */
  private numericListAhead(): boolean {
    this.ws();
    const b = this.bytes;
    let p = this.pos;
    if (b[p] !== LBRACKET) return false;
    for (;;) {
      const c = b[p];
      if (c === LBRACKET || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) p++;
      else return c === MINUS || (c !== undefined && c >= ZERO && c <= NINE);
    }
  }

  private literal(text: string): boolean {
    for (let i = 0; i < text.length; i++) {
      if (this.bytes[this.pos + i] !== text.charCodeAt(i)) return false;
    }
    this.pos += text.length;
    return true;
  }
}

/**
 * Reads a predict body of the shapes above into PackedNumbers; undefined for any other
 * body (the caller then parses it with JSON.parse and the general codec).
 */
export function readNumericPredictBody(
  bytes: Uint8Array,
  scratch?: Float64Array<ArrayBuffer>,
  limits?: JsonLimits,
): NumericPredictBody | undefined {
  // Only worth it, and only tried, when the body is big enough to hold a real tensor.
  if (bytes.byteLength < 256) return undefined;
  const r = new Reader(bytes, scratch, limits);
  try {
    const body: NumericPredictBody = {};
    r.expect(LBRACE);
    r.atLevel(1);
    r.counted(1);
    for (let keys = 1; ; keys++) {
      r.keyCounted(keys);
      const key = r.string();
      if (Object.hasOwn(body, key)) return undefined; // duplicate keys: JSON.parse keeps the last
      r.expect(COLON);
      if (key === 'signature_name') {
        r.counted(1);
        body[key] = r.string();
      } else if (key === 'instances') {
        r.ws();
        if (bytes[r.pos] !== LBRACKET) return undefined;
        body[key] = r.tensor(2);
      } else if (key === 'inputs') {
        r.ws();
        if (bytes[r.pos] === LBRACE) {
          r.pos++;
          r.atLevel(2);
          r.counted(1);
          const named: Record<string, PackedNumbers> = {};
          r.ws();
          if (bytes[r.pos] === RBRACE) return undefined;
          for (let keys = 1; ; keys++) {
            r.keyCounted(keys);
            const name = r.string();
            if (Object.hasOwn(named, name) || name === '__proto__' || name === 'b64') return undefined;
            r.expect(COLON);
            Object.defineProperty(named, name, {
              value: r.tensor(3),
              enumerable: true,
              writable: true,
              configurable: true,
            });
            r.ws();
            const c = bytes[r.pos++];
            if (c === COMMA) continue;
            if (c === RBRACE) break;
            return undefined;
          }
          body[key] = named;
        } else {
          body[key] = r.tensor(2);
        }
      } else {
        return undefined;
      }
      r.ws();
      const c = bytes[r.pos++];
      if (c === COMMA) continue;
      if (c === RBRACE) break;
      return undefined;
    }
    r.end();
    return body;
  } catch (error) {
    if (error === FALLBACK) return undefined;
    throw error;
  }
}

/** The JSON bodies readFastJsonBody reads. */
export type FastJsonFormat = 'tfs-predict' | 'sagemaker-json' | 'kserve-infer';

/**
 * The fast reader for one kind of body; undefined when it does not take the body (the
 * caller then parses it with JSON.parse and the general codec, whose errors are the
 * contract). Whatever it returns is what that general path would have built, with
 * PackedNumbers in place of numeric lists:
 * - `tfs-predict`: readNumericPredictBody.
 * - `sagemaker-json`: that, or a bare rectangular numeric list as SageMaker's JSON handler
 *   reads it: `{"instances": list}` for a list of lists, `{"instances": [list]}` for a flat one.
 * - `kserve-infer`: a KServe v2 inference request object with every numeric `data` list packed.
 *
 * `scratch`: an array of the caller's that the body's first tensor is read into when it fits
 * (its PackedNumbers then views it: valid until the caller reuses the array); default, and for
 * the other tensors, arrays of the reader's own.
 *
 * `limits`: a body past one of them is not taken (undefined), at the point where the reader
 * passes it; the caller's check before the general path (checkJsonLimits) then refuses it.
 * Default: none.
 */
export function readFastJsonBody(
  format: FastJsonFormat,
  bytes: Uint8Array,
  scratch?: Float64Array<ArrayBuffer>,
  limits?: JsonLimits,
): unknown {
  switch (format) {
    case 'tfs-predict':
      return readNumericPredictBody(bytes, scratch, limits);
    case 'sagemaker-json':
      return readSageMakerJsonBody(bytes, scratch, limits);
    case 'kserve-infer':
      return readPackedObject(bytes, 'data', scratch, limits);
  }
}

function readSageMakerJsonBody(
  bytes: Uint8Array,
  scratch?: Float64Array<ArrayBuffer>,
  limits?: JsonLimits,
): NumericPredictBody | undefined {
  if (bytes.byteLength < 256) return undefined;
  const r = new Reader(bytes, scratch, limits);
  r.ws();
  if (bytes[r.pos] !== LBRACKET) return readNumericPredictBody(bytes, scratch, limits);
  try {
    const list = r.tensor(1);
    r.end();
    const shape = list.shape;
    if (shape.length === 0 || shape[0] === 0) return undefined;
    return { instances: shape.length === 1 ? list.withShape([1, ...shape]) : list };
  } catch (error) {
    if (error === FALLBACK) return undefined;
    throw error;
  }
}

/** A JSON object with numeric lists under `packKey` keys packed (Reader.value); undefined to fall back. */
function readPackedObject(
  bytes: Uint8Array,
  packKey: string,
  scratch?: Float64Array<ArrayBuffer>,
  limits?: JsonLimits,
): Record<string, unknown> | undefined {
  if (bytes.byteLength < 256) return undefined;
  const r = new Reader(bytes, scratch, limits);
  try {
    r.ws();
    if (bytes[r.pos] !== LBRACE) return undefined;
    const body = r.value(0, packKey) as Record<string, unknown>;
    r.end();
    return body;
  } catch (error) {
    if (error === FALLBACK) return undefined;
    throw error;
  }
}

/** Deepest list packTfsPredictTree packs (deeper ones stay lists, for the codec's own checks). */
const PACK_MAX_RANK = 32;

/**
 * `list` as PackedNumbers when it is a non-empty rectangular nested list of JSON numbers
 * (every size above 0, rank up to 32); undefined for anything else (left to the codec).
 */
function packList(list: unknown[]): PackedNumbers | undefined {
  const shape: number[] = [];
  let v: unknown = list;
  while (Array.isArray(v)) {
    if (v.length === 0 || shape.length >= PACK_MAX_RANK) return undefined;
    shape.push(v.length);
    v = v[0];
  }
  if (typeof v !== 'number') return undefined;
  let count = 1;
  for (const n of shape) count *= n;
  const values = new Float64Array(count);
  const rank = shape.length;
  let at = 0;
  const walk = (node: unknown[], level: number): boolean => {
    if (node.length !== shape[level]) return false;
    if (level === rank - 1) {
      for (let i = 0; i < node.length; i++) {
        const x = node[i];
        if (typeof x !== 'number') return false;
        values[at++] = x;
      }
      return true;
    }
    for (let i = 0; i < node.length; i++) {
      const child = node[i];
      if (!Array.isArray(child) || !walk(child, level + 1)) return false;
    }
    return true;
  };
  return walk(list, 0) ? new PackedNumbers(shape, values, new Int32Array(0), new Uint8Array(0)) : undefined;
}

/**
 * A predict body that the general path parsed (JSON.parse: plain objects, lists, numbers)
 * as a message for another thread, like fastBodyToMessage: the rectangular numeric lists
 * the codec takes as tensors (`instances`, `inputs`, and every value of an `inputs`
 * object but `__proto__` and `b64`) become packed arrays, moved instead of cloned as lists; the
 * rest of the tree is cloned as it is. Changes `body` in place (it must not be used
 * afterwards). fastBodyFromMessage rebuilds what the general path would have given, with
 * PackedNumbers in place of those lists (the codec reads them alike).
 */
export function parsedBodyToMessage(body: unknown): { message: FastBodyMessage; transfer: ArrayBuffer[] } {
  const packed: PackedAt[] = [];
  const transfer: ArrayBuffer[] = [];
  const plain = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v);
  const take = (holder: Record<string, unknown>, key: string, path: readonly string[]): void => {
    const value = holder[key];
    if (!Array.isArray(value)) return;
    const list = packList(value);
    if (list === undefined) return;
    const parts = list.parts();
    packed.push({ path, parts });
    transfer.push(parts.values.buffer as ArrayBuffer);
    holder[key] = null;
  };
  if (plain(body)) {
    for (const key of Object.keys(body)) {
      // The codec reads no other key: cloning them would be wasted (and they may be deep).
      if (key !== 'instances' && key !== 'inputs' && key !== 'signature_name') setOwn(body, key, null);
    }
    if (Object.hasOwn(body, 'instances')) take(body, 'instances', ['instances']);
    if (Object.hasOwn(body, 'inputs')) {
      const inputs = body['inputs'];
      if (plain(inputs)) {
        for (const name of Object.keys(inputs)) {
          if (name !== '__proto__' && name !== 'b64') take(inputs, name, ['inputs', name]);
        }
      } else {
        take(body, 'inputs', ['inputs']);
      }
    }
  }
  cutBelow(body, CLONE_DEPTH);
  return { message: { tree: body, packed }, transfer };
}

/**
 * Depth at which parsedBodyToMessage cuts the tree (structured clone recurses, and hostile
 * nesting would overflow the stack). The codec never looks below depth 68 (the body, its
 * `inputs` object, a row list, a row object, 64 levels of lists, a `{"b64": ...}` leaf and
 * its value), and at that depth only at a value's type; a list cut here becomes `[]` and an
 * object `{}`, which the codec reads alike.
 */
const CLONE_DEPTH = 100;

function setOwn(holder: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(holder, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Replaces every list or object at `depth` below `root` with an empty one (no recursion). */
function cutBelow(root: unknown, depth: number): void {
  const stack: [unknown, number][] = [[root, 0]];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [node, level] = top;
    if (typeof node !== 'object' || node === null) continue;
    const cut = level + 1 >= depth;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const child: unknown = node[i];
        if (typeof child !== 'object' || child === null) continue;
        if (cut) node[i] = Array.isArray(child) ? [] : {};
        else stack.push([child, level + 1]);
      }
    } else {
      const record = node as Record<string, unknown>;
      for (const key of Object.keys(record)) {
        const child = record[key];
        if (typeof child !== 'object' || child === null || child instanceof PackedNumbers) continue;
        if (cut) setOwn(record, key, Array.isArray(child) ? [] : {});
        else stack.push([child, level + 1]);
      }
    }
  }
}
