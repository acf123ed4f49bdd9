/**
 * A growable UTF-8 byte buffer for writing large JSON documents without building
 * one JS string per number (which is what makes `JSON.stringify` of big arrays slow).
 *
 * Numbers are written in the JavaScript number syntax (`1.5`, `1e-7`, `1.5e+21`),
 * which every JSON reader accepts. Non-finite values are written as the bare tokens
 * `NaN`, `Infinity`, `-Infinity`, as TF Serving does (Python's `json` reads them;
 * strict JSON readers do not).
 */

const POW10: readonly number[] = Array.from({ length: 23 }, (_, i) => Number(`1e${String(i)}`));
const fround = Math.fround;
const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);
const LOG10_2 = Math.log10(2);
const encoder = new TextEncoder();

export class JsonWriter {
  private buf: Uint8Array;
  private len = 0;

  /** @param initialBytes starting capacity in bytes; the buffer doubles when full. */
  constructor(initialBytes = 4096) {
    this.buf = new Uint8Array(Math.max(16, initialBytes));
  }

  /** Bytes written so far. */
  get length(): number {
    return this.len;
  }

  /** The written bytes (a view of the internal buffer; do not write after taking it). */
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.len);
  }

  private ensure(extra: number): void {
    const need = this.len + extra;
    if (need <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < need) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  /** Writes an ASCII-only string verbatim (punctuation, keys known to be ASCII, number text). */
  ascii(text: string): void {
    this.ensure(text.length);
    const b = this.buf;
    let l = this.len;
    for (let i = 0; i < text.length; i++) b[l++] = text.charCodeAt(i);
    this.len = l;
  }

  /** Writes one ASCII byte. */
  byte(code: number): void {
    this.ensure(1);
    this.buf[this.len++] = code;
  }

  /** Writes `value` as a JSON string literal (quoted and escaped), UTF-8 encoded. */
  string(value: string): void {
    const literal = JSON.stringify(value);
    this.ensure(literal.length * 3);
    const { written } = encoder.encodeInto(literal, this.buf.subarray(this.len));
    this.len += written;
  }

  /** Writes a float64 value: shortest round-trip decimal, or NaN / Infinity / -Infinity. */
  float64(value: number): void {
    if (Number.isFinite(value)) this.ascii(Object.is(value, -0) ? '-0' : String(value));
    else this.nonFinite(value);
  }

  /**
   * Writes a float32 value (given as the number it widens to) as the shortest decimal
   * that reads back, through a float64 parse and a float32 cast, as the same float32.
   */
  float32(value: number): void {
    if (value !== value || value === Infinity || value === -Infinity) {
      this.nonFinite(value);
      return;
    }
    const neg = value < 0;
    const a = neg ? -value : value;
    if (a === 0) {
      this.ascii(Object.is(value, -0) ? '-0' : '0');
      return;
    }
    // Fast path: scale by an exact power of ten (<= 1e22) so that one multiply or divide
    // is correctly rounded; outside that range fall back to toPrecision.
    if (a < 1e-12 || a >= 1e12) {
      this.ascii(shortestFloat32Slow(value));
      return;
    }
    // floor(log10(a)) from the binary exponent (a is a normal float32 here): off by at most
    // one, which the two comparisons below correct.
    F32[0] = a;
    let e = Math.floor((((U32[0]! >>> 23) & 0xff) - 127) * LOG10_2);
    if (a < POW10Signed(e)) e -= 1;
    else if (a >= POW10Signed(e + 1)) e += 1;
    // Digits needed is monotone: if p digits round-trip, so do p + 1.
    let p = 7;
    let r = digitsFor(a, e, 7);
    if (r >= 0) {
      for (let q = 6; q >= 1; q--) {
        const r2 = digitsFor(a, e, q);
        if (r2 < 0) break;
        r = r2;
        p = q;
      }
    } else {
      p = 8;
      r = digitsFor(a, e, 8);
      if (r < 0) {
        p = 9;
        r = digitsFor(a, e, 9);
        if (r < 0) {
          this.ascii(shortestFloat32Slow(value));
          return;
        }
      }
    }
    this.decimal(neg, r, p - 1 - e);
  }

  /** Writes an integer-valued number (int8..uint32 storage). */
  integer(value: number): void {
    this.ascii(String(value));
  }

  private nonFinite(value: number): void {
    this.ascii(value !== value ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity');
  }

  /** Writes `(neg ? -1 : 1) * r * 10^-k` for an integer 0 < r < 1e10, in JS number syntax. */
  private decimal(neg: boolean, digits: number, k: number): void {
    // r < 1e10 fits in an int32 for the p <= 9 digits float32 writes (int32 arithmetic: a
    // double's % is a call to fmod).
    let r = digits | 0;
    if (r !== digits) {
      this.ascii(`${String(neg ? -digits : digits)}e${String(-k)}`);
      return;
    }
    for (let q = (r / 10) | 0; r === q * 10; q = (r / 10) | 0) {
      r = q;
      k -= 1;
    }
    let nd = 1;
    while (nd < 10 && r >= POW10[nd]!) nd++;
    const e = nd - 1 - k;
    this.ensure(32);
    const b = this.buf;
    let l = this.len;
    if (neg) b[l++] = 45; // '-'
    if (e >= 0 && e < 21) {
      if (nd <= e + 1) {
        l = putDigits(b, l, r, nd);
        for (let i = nd; i <= e; i++) b[l++] = 48;
      } else {
        // e + 1 integer digits, '.', the rest.
        const intDigits = e + 1;
        const scale = POW10[nd - intDigits]!;
        const hi = Math.floor(r / scale);
        l = putDigits(b, l, hi, intDigits);
        b[l++] = 46; // '.'
        l = putDigits(b, l, r - hi * scale, nd - intDigits);
      }
    } else if (e < 0 && e >= -6) {
      b[l++] = 48;
      b[l++] = 46;
      for (let i = 0; i < -e - 1; i++) b[l++] = 48;
      l = putDigits(b, l, r, nd);
    } else {
      const scale = POW10[nd - 1]!;
      const lead = Math.floor(r / scale);
      b[l++] = 48 + lead;
      if (nd > 1) {
        b[l++] = 46;
        l = putDigits(b, l, r - lead * scale, nd - 1);
      }
      b[l++] = 101; // 'e'
      b[l++] = e < 0 ? 45 : 43;
      const exp = String(e < 0 ? -e : e);
      for (let i = 0; i < exp.length; i++) b[l++] = exp.charCodeAt(i);
    }
    this.len = l;
  }
}

/** 10^e for -22 <= e <= 22 (exact); outside, an approximation (only used for comparisons). */
function POW10Signed(e: number): number {
  if (e >= 0) return e <= 22 ? POW10[e]! : 10 ** e;
  return -e <= 22 ? 1 / POW10[-e]! : 10 ** e;
}

/** Writes `count` decimal digits of `value` (zero-padded on the left) at `at`; returns the new end. */
function putDigits(b: Uint8Array, at: number, value: number, count: number): number {
  let q = value | 0;
  for (let i = count - 1; i >= 0; i--) {
    const next = (q / 10) | 0;
    b[at + i] = 48 + q - next * 10;
    q = next;
  }
  return at + count;
}

/**
 * The p-digit integer r with r * 10^(e+1-p) nearest to `a`, if that decimal reads back
 * as the float32 `a`; otherwise -1. Requires 10^|p-1-e| <= 1e22 (exact in float64).
 */
function digitsFor(a: number, e: number, p: number): number {
  const k = p - 1 - e;
  if (k >= 0) {
    const s = POW10[k]!;
    const r = Math.round(a * s);
    return fround(r / s) === a ? r : -1;
  }
  const s = POW10[-k]!;
  const r = Math.round(a / s);
  return fround(r * s) === a ? r : -1;
}

/** Reference implementation (slow, string based) of the shortest float32 decimal. */
export function shortestFloat32Slow(value: number): string {
  for (let p = 1; p < 9; p++) {
    const text = value.toPrecision(p);
    if (fround(Number(text)) === value) return String(Number(text));
  }
  return String(Number(value.toPrecision(9)));
}
