/**
 * Classification post-processing: softmax and top-k with label names, one result shape
 * (`{class_id, label?, score}`) for /invocations, the CLI and the client.
 */
import { type Tensor, invalidArgument, isStringData, shortestFloat32Slow } from '@visionserve/protocol';
import type { Labels } from './labels.js';
import type { ClassificationPostprocess } from './vision-config.js';

/** One ranked class of one instance. */
export interface ClassScore {
  /** Index in the score vector. */
  readonly class_id: number;
  /** Present when the model has a labels file with an entry for this class. */
  readonly label?: string;
  /** Softmax probability when `softmax` is on, else the raw score. */
  readonly score: number;
}

/** A float32 value written with the fewest digits that round-trip (0.84, not 0.8399999737739563). */
export function roundFloat32(value: number): number {
  return Number.isFinite(value) ? Number(shortestFloat32Slow(Math.fround(value))) : value;
}

/** The values of a numeric tensor as numbers (int64 converted). */
export function numbers(t: Tensor, what: string): ArrayLike<number> {
  if (isStringData(t.data)) throw invalidArgument(`${what} is a string tensor; expected numbers`);
  const data = t.data;
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) return Array.from(data, Number);
  return data;
}

/** Numerically stable softmax over `values[offset, offset + n)`. */
export function softmax(values: ArrayLike<number>, offset: number, n: number): Float64Array {
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, values[offset + i]!);
  const out = new Float64Array(n);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    out[i] = Math.exp(values[offset + i]! - max);
    sum += out[i]!;
  }
  for (let i = 0; i < n; i++) out[i] = out[i]! / sum;
  return out;
}

/**
 * Top-k classes per instance of a `[batch, classes]` (or `[classes]`) score tensor,
 * best first; ties keep the lower index first.
 */
export function classifyTopK(
  scores: Tensor,
  config: ClassificationPostprocess,
  labels: Labels | undefined,
): ClassScore[][] {
  const shape = scores.shape;
  if (shape.length !== 1 && shape.length !== 2) {
    throw invalidArgument(`Classification output must be [batch, classes]; got [${shape.join(',')}]`);
  }
  const classes = shape.at(-1)!;
  const batch = shape.length === 2 ? shape[0]! : 1;
  const values = numbers(scores, 'Classification output');
  const k = Math.min(config.topK ?? 5, classes);
  const offset = config.labelOffset ?? 0;
  const results: ClassScore[][] = [];
  for (let b = 0; b < batch; b++) {
    const raw = Array.from({ length: classes }, (_, i) => values[b * classes + i]!);
    const mode = config.softmax ?? false;
    const row: ArrayLike<number> =
      mode === true || (mode === 'auto' && !looksLikeProbabilities(raw))
        ? softmax(values, b * classes, classes)
        : raw;
    const order = Array.from({ length: classes }, (_, i) => i);
    order.sort((x, y) => row[y]! - row[x]! || x - y);
    results.push(
      order.slice(0, k).map((i) => {
        const label = labels?.get(i + offset);
        return { class_id: i, ...(label === undefined ? {} : { label }), score: roundFloat32(row[i]!) };
      }),
    );
  }
  return results;
}

/** True when the values already look like probabilities (all in [0,1], summing to ~1). */
export function looksLikeProbabilities(values: ArrayLike<number>): boolean {
  let sum = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!(v >= 0 && v <= 1)) return false;
    sum += v;
  }
  return Math.abs(sum - 1) < 1e-3;
}
