/** IEEE 754 half precision (FP16) from numbers; the reverse is `halfToNumber` in dtype.ts. */

/** Rounds to the nearest integer, ties to even (x >= 0). */
function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const rest = x - floor;
  if (rest > 0.5) return floor + 1;
  if (rest < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/**
 * The half-precision bit pattern nearest to `value` (round to nearest, ties to even, as
 * numpy's float16 conversion does): overflow gives infinity, tiny values subnormals or
 * zero, NaN a quiet NaN. Rounds once from the double, never through float32.
 */
export function numberToHalf(value: number): number {
  if (Number.isNaN(value)) return 0x7e00;
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0;
  const a = Math.abs(value);
  // 65520 is halfway between the largest half (65504) and 2^16: it and above round to infinity.
  if (a >= 65520) return sign | 0x7c00;
  if (a < 2 ** -14) {
    // Subnormal: units of 2^-24; 1024 units is the smallest normal, which the encoding absorbs.
    return sign | roundHalfEven(a * 2 ** 24);
  }
  let exponent = Math.floor(Math.log2(a));
  // log2 can be off by one next to powers of two.
  if (2 ** exponent > a) exponent--;
  else if (2 ** (exponent + 1) <= a) exponent++;
  let mantissa = roundHalfEven((a / 2 ** exponent - 1) * 1024);
  if (mantissa === 1024) {
    mantissa = 0;
    exponent++;
  }
  if (exponent > 15) return sign | 0x7c00;
  return sign | ((exponent + 15) << 10) | mantissa;
}
