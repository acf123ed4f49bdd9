/**
 * IEEE 754 half precision (FP16) and bfloat16 (BF16) from numbers: the one implementation
 * of each is in dtype.ts.
 */
export { numberToBfloat16, numberToHalf } from '../dtype.js';
