/**
 * tf.Example inputs (Classify, Regress, MultiInference and serialized-Example signatures)
 * as plain data, and their conversion into the batch tensors a model runs on, with
 * TensorFlow's ParseExample rules and error messages (docs/tensorflow-users.md). No protobuf
 * here: `@visionserve/protocol/tfs-proto` turns Example messages into this form, the REST
 * codec turns JSON examples into it.
 */
import { type DType, allocate, isBigIntDType, numberToBfloat16, numberToHalf } from './dtype.js';
import { invalidArgument } from './errors.js';
import { type Tensor, checkShape, elementCount } from './tensor.js';

/**
 * The values of one feature. `number` holds JSON numbers, which JSON cannot tell apart
 * as float or int64: they fit either kind of feature (integers only for int64).
 */
export type FeatureValues =
  | { readonly kind: 'bytes'; readonly values: readonly Uint8Array[] }
  | { readonly kind: 'float'; readonly values: ArrayLike<number> }
  | { readonly kind: 'int64'; readonly values: ArrayLike<bigint> }
  | { readonly kind: 'number'; readonly values: readonly number[] };

/** One tf.Example: feature key -> values. */
export type ExampleFeatures = ReadonlyMap<string, FeatureValues>;

/** A request's examples, with the optional context every example extends (TF Serving's `Input`). */
export interface ExampleInput {
  readonly examples: readonly ExampleFeatures[];
  /** Features shared by every example; an example's own feature of the same key wins. */
  readonly context?: ExampleFeatures | undefined;
}

/** How one feature becomes one model input (TensorFlow's FixedLenFeature). */
export interface ExampleFeatureSpec {
  /** Feature key in the examples. */
  readonly key: string;
  /** Element type of the model input the feature feeds. */
  readonly dtype: DType;
  /**
   * Shape of one example's value (the batch dimension is added in front). One -1 is
   * allowed and taken from the value count, which must then agree across examples.
   */
  readonly shape: readonly number[];
  /** Values used when an example lacks the feature (row-major); without it the feature is required. */
  readonly defaultValue?: readonly number[] | readonly string[] | undefined;
}

/** TensorFlow's name of the feature kind a dtype reads from. */
function featureKindOf(dtype: DType): 'float' | 'int64' | 'string' {
  if (dtype === 'string') return 'string';
  if (dtype === 'float32' || dtype === 'float64' || dtype === 'float16' || dtype === 'bfloat16')
    return 'float';
  return 'int64';
}

function kindName(values: FeatureValues): string {
  switch (values.kind) {
    case 'bytes':
      return 'string';
    case 'float':
      return 'float';
    case 'int64':
      return 'int64';
    case 'number':
      return values.values.every((v) => Number.isInteger(v)) ? 'int64' : 'float';
  }
}

const INTEGER_RANGES: Partial<Record<DType, readonly [number, number]>> = {
  int8: [-128, 127],
  int16: [-32768, 32767],
  int32: [-2147483648, 2147483647],
  uint8: [0, 255],
  uint16: [0, 65535],
  uint32: [0, 4294967295],
  bool: [0, 1],
};

/** Writes feature values into a tensor buffer at `offset`; throws TF's type mismatch message. */
type Sink = (values: FeatureValues, offset: number, index: number) => void;

function sinkFor(spec: ExampleFeatureSpec, data: Tensor['data']): Sink {
  const want = featureKindOf(spec.dtype);
  const mismatch = (values: FeatureValues, index: number): Error =>
    invalidArgument(
      `Name: <unknown>, Key: ${spec.key}, Index: ${index}.  Data types don't match. Data type: ${kindName(values)} but expected type: ${want}`,
    );
  if (want === 'string') {
    const out = data as Uint8Array[];
    return (values, offset, index) => {
      if (values.kind !== 'bytes') throw mismatch(values, index);
      for (let i = 0; i < values.values.length; i++) out[offset + i] = values.values[i]!;
    };
  }
  const dtype = spec.dtype;
  if (want === 'float') {
    const put =
      dtype === 'float16'
        ? (i: number, v: number) => ((data as Uint16Array)[i] = numberToHalf(v))
        : dtype === 'bfloat16'
          ? (i: number, v: number) => ((data as Uint16Array)[i] = numberToBfloat16(v))
          : (i: number, v: number) => ((data as Float32Array | Float64Array)[i] = v);
    return (values, offset, index) => {
      if (values.kind !== 'float' && values.kind !== 'number') throw mismatch(values, index);
      const v = values.values;
      for (let i = 0; i < v.length; i++) put(offset + i, v[i]!);
    };
  }
  const range = INTEGER_RANGES[dtype];
  const outOfRange = (v: number | bigint, index: number): Error =>
    invalidArgument(
      `Name: <unknown>, Key: ${spec.key}, Index: ${index}.  Value ${String(v)} does not fit the model input type ${dtype}`,
    );
  return (values, offset, index) => {
    if (values.kind === 'int64') {
      const v = values.values;
      for (let i = 0; i < v.length; i++) {
        const x = v[i]!;
        if (isBigIntDType(dtype)) {
          if (dtype === 'uint64' && x < 0n) throw outOfRange(x, index);
          (data as BigInt64Array | BigUint64Array)[offset + i] = x;
        } else {
          const n = Number(x);
          if (range !== undefined && (n < range[0] || n > range[1])) throw outOfRange(x, index);
          (data as Int32Array)[offset + i] = n;
        }
      }
      return;
    }
    if (values.kind === 'number' && values.values.every((x) => Number.isSafeInteger(x))) {
      const v = values.values;
      for (let i = 0; i < v.length; i++) {
        const n = v[i]!;
        if (isBigIntDType(dtype)) {
          if (dtype === 'uint64' && n < 0) throw outOfRange(n, index);
          (data as BigInt64Array | BigUint64Array)[offset + i] = BigInt(n);
        } else {
          if (range !== undefined && (n < range[0] || n > range[1])) throw outOfRange(n, index);
          (data as Int32Array)[offset + i] = n;
        }
      }
      return;
    }
    throw mismatch(values, index);
  };
}

function defaultValues(spec: ExampleFeatureSpec): FeatureValues | undefined {
  const d = spec.defaultValue;
  if (d === undefined) return undefined;
  if (d.length > 0 && typeof d[0] === 'string') {
    const encoder = new TextEncoder();
    return { kind: 'bytes', values: (d as readonly string[]).map((s) => encoder.encode(s)) };
  }
  return { kind: 'number', values: d as readonly number[] };
}

/** The feature an example has for `key` (its own, else the context's). */
function lookup(input: ExampleInput, example: ExampleFeatures, key: string): FeatureValues | undefined {
  return example.get(key) ?? input.context?.get(key);
}

/** The per-example shape with a -1 resolved from the value count of the first example that has the feature. */
function resolveShape(input: ExampleInput, spec: ExampleFeatureSpec): readonly number[] {
  const dynamic = spec.shape.filter((d) => d < 0).length;
  if (dynamic === 0) return spec.shape;
  if (dynamic > 1) {
    throw invalidArgument(
      `Feature ${spec.key}: the model input has ${dynamic} dynamic dimensions besides the batch; tf.Example features can fill at most one`,
    );
  }
  const known = spec.shape.reduce((p, d) => (d < 0 ? p : p * d), 1);
  for (const example of input.examples) {
    const values = lookup(input, example, spec.key) ?? defaultValues(spec);
    if (values === undefined) continue;
    const n = values.values.length;
    const inferred = known === 0 ? 0 : n / known;
    return spec.shape.map((d) => (d < 0 ? (Number.isInteger(inferred) ? inferred : -1) : d));
  }
  return spec.shape.map((d) => (d < 0 ? 0 : d));
}

/**
 * Stacks the examples' features into one tensor per spec, shaped `[examples, ...shape]`,
 * as TensorFlow's ParseExample does for dense features. Errors are INVALID_ARGUMENT with
 * TensorFlow's wording: `Input is empty.`, `Name: <unknown>, Feature: x (data type:
 * float) is required but could not be found.`, `... Data types don't match. ...` and
 * `... Number of float values != expected. ...`.
 */
export function examplesToTensors(
  input: ExampleInput,
  specs: readonly ExampleFeatureSpec[],
): Record<string, Tensor> {
  const count = input.examples.length;
  if (count === 0) throw invalidArgument('Input is empty.');
  const out: Record<string, Tensor> = {};
  for (const spec of specs) {
    const shape = resolveShape(input, spec);
    const per = shape.some((d) => d < 0) ? -1 : elementCount(shape);
    const fullShape = [count, ...shape.map((d) => Math.max(d, 0))];
    checkShape(fullShape, `Feature ${spec.key}`);
    const total = count * Math.max(per, 0);
    const data: Tensor['data'] =
      spec.dtype === 'string' ? new Array<Uint8Array>(total) : allocate(spec.dtype, total);
    const sink = sinkFor(spec, data);
    const fallback = defaultValues(spec);
    const kind = featureKindOf(spec.dtype);
    for (let i = 0; i < count; i++) {
      const values = lookup(input, input.examples[i]!, spec.key) ?? fallback;
      if (values === undefined) {
        throw invalidArgument(
          `Name: <unknown>, Feature: ${spec.key} (data type: ${kind}) is required but could not be found.`,
        );
      }
      if (values.values.length !== per) {
        const what = values.kind === 'bytes' ? 'bytes' : kind === 'string' ? kindName(values) : kind;
        throw invalidArgument(
          `Name: <unknown>, Key: ${spec.key}, Index: ${i}.  Number of ${what} values != expected.  Values size: ${values.values.length} but output shape: [${shape.join(',')}]`,
        );
      }
      sink(values, i * per, i);
    }
    out[spec.key] = { dtype: spec.dtype, shape: fullShape, data };
  }
  return out;
}

/**
 * The example features of a model input spec: its shape without the batch dimension
 * (which must be present and dynamic or the example count is checked later by core).
 * Undefined for inputs of unknown rank or rank 0, which examples cannot fill.
 */
export function featureSpecForInput(
  key: string,
  dtype: DType,
  shape: readonly number[] | undefined,
): ExampleFeatureSpec | undefined {
  if (shape === undefined || shape.length === 0) return undefined;
  return { key, dtype, shape: shape.slice(1) };
}
