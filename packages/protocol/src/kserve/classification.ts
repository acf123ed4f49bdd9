/**
 * The classification extension: instead of an output tensor, its top K entries as BYTES
 * strings "value:index" or "value:index:label", best first. Values are printed like C's
 * `std::to_string`: floating types with exactly six decimals ("0.700000"), integer types
 * as integers; the index is the flattened index within one batch item.
 */
import { invalidArgument } from '../errors.js';
import { type Tensor, elementCount, isStringData } from '../tensor.js';

export interface ClassificationOptions {
  /**
   * The model batches along dimension 0 (its config's max_batch_size > 0): every batch
   * item is ranked on its own and the result has shape [B, min(K, items)]; otherwise the
   * whole tensor is one list and the shape is [min(K, elements)].
   */
  readonly batched: boolean;
  /** Label of a (flattened, per batch item) index; undefined leaves the label out. */
  readonly label?: ((index: number) => string | undefined) | undefined;
}

const FLOAT_TYPES = new Set(['float32', 'float64']);
const INTEGER_TYPES = new Set(['int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64']);

/** `value` as `printf("%f")` prints a double. */
export function formatFixed6(value: number): string {
  if (Number.isNaN(value)) return 'nan';
  if (value === Infinity) return 'inf';
  if (value === -Infinity) return '-inf';
  if (Object.is(value, -0)) return '-0.000000';
  // toFixed switches to exponent notation from 1e21; such doubles are integers.
  if (Math.abs(value) >= 1e21) return `${BigInt(value).toString()}.000000`;
  return value.toFixed(6);
}

/**
 * The classification result of `scores` for top `k` (k >= 1). Ties are ordered by index;
 * NaN ranks below every number. INVALID_ARGUMENT for FP16, BF16, BOOL and BYTES outputs
 * (Triton's supported set is the integer types, FP32 and FP64).
 */
export function classificationTensor(scores: Tensor, k: number, options: ClassificationOptions): Tensor {
  const data = scores.data;
  if (isStringData(data) || !(FLOAT_TYPES.has(scores.dtype) || INTEGER_TYPES.has(scores.dtype))) {
    throw invalidArgument(
      `class result not available for output due to unsupported type ${scores.dtype}; classification needs an integer, FP32 or FP64 output`,
    );
  }
  const batched = options.batched && scores.shape.length > 0;
  const batch = batched ? scores.shape[0]! : 1;
  const total = elementCount(scores.shape);
  const items = batch === 0 ? 0 : total / batch;
  const take = Math.min(k, items);
  const float = FLOAT_TYPES.has(scores.dtype);
  const format = (v: number | bigint): string => (float ? formatFixed6(v as number) : String(v));
  const encoder = new TextEncoder();
  const out: Uint8Array[] = [];
  for (let b = 0; b < batch; b++) {
    const offset = b * items;
    for (const index of topIndices(data, offset, items, take)) {
      const value = data[offset + index]!;
      const label = options.label?.(index);
      out.push(encoder.encode(`${format(value)}:${index}${label === undefined ? '' : `:${label}`}`));
    }
  }
  return { dtype: 'string', shape: batched ? [batch, take] : [take], data: out };
}

/** True when a ranks before b: larger first, NaN last, ties by smaller index. */
function before(av: number | bigint, ai: number, bv: number | bigint, bi: number): boolean {
  const aNaN = av !== av;
  const bNaN = bv !== bv;
  if (aNaN || bNaN) return aNaN === bNaN ? ai < bi : bNaN;
  if (av > bv) return true;
  if (av < bv) return false;
  return ai < bi;
}

/** Indices (relative to `offset`) of the `take` best of `count` values, best first. */
function topIndices(data: ArrayLike<number | bigint>, offset: number, count: number, take: number): number[] {
  if (take === 0) return [];
  const best: number[] = [];
  for (let i = 0; i < count; i++) {
    const v = data[offset + i]!;
    if (best.length === take) {
      const last = best[take - 1]!;
      if (!before(v, i, data[offset + last]!, last)) continue;
      best.pop();
    }
    let at = best.length;
    while (at > 0 && before(v, i, data[offset + best[at - 1]!]!, best[at - 1]!)) at--;
    best.splice(at, 0, i);
  }
  return best;
}

/** One classification entry, parsed ("value:index[:label]"; the label may hold colons). */
export interface ClassificationEntry {
  readonly score: number;
  readonly index: number;
  readonly label: string | undefined;
}

/** Parses one classification entry; INVALID_ARGUMENT when it is not "value:index[:label]". */
export function parseClassificationEntry(text: string): ClassificationEntry {
  const first = text.indexOf(':');
  const second = first < 0 ? -1 : text.indexOf(':', first + 1);
  const valueText = text.slice(0, first);
  const indexText = second < 0 ? text.slice(first + 1) : text.slice(first + 1, second);
  if (first < 0 || !/^\d+$/.test(indexText)) {
    throw invalidArgument(`Not a classification entry: ${JSON.stringify(text.slice(0, 64))}`);
  }
  const score =
    valueText === 'nan' || valueText === '-nan'
      ? NaN
      : valueText === 'inf'
        ? Infinity
        : valueText === '-inf'
          ? -Infinity
          : Number(valueText);
  return { score, index: Number(indexText), label: second < 0 ? undefined : text.slice(second + 1) };
}
