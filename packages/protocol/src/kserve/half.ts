/** IEEE 754 half precision (FP16) from numbers: the one implementation is in dtype.ts. */
export { numberToHalf } from '../dtype.js';
