/**
 * A serialized tf.Example read straight off the wire into `ExampleFeatures` (the server's
 * ParseExample for signatures cut after their parse op). protobuf-es's reflective decoder
 * builds a message object per Example, per Feature and per list; this walks the bytes once:
 * packed floats are read with a DataView into a Float32Array, int64 varints into a
 * BigInt64Array, keys decoded once per distinct byte sequence of a parse.
 *
 * Contract: the result equals `exampleFeaturesFromProto(fromBinary(ExampleSchema, bytes))`
 * (protobuf's merge rules included: map entries last wins, a repeated list of the same kind
 * appends, another kind replaces). Anything it does not handle (groups, malformed bytes)
 * throws WireFallback and the caller uses protobuf-es.
 */
import type { ExampleFeatureSpec, ExampleFeatures, FeatureValues } from '../tf-example.js';
import type { Tensor } from '../tensor.js';

/** The bytes are not what this reader handles: decode them with protobuf-es instead. */
export class WireFallback extends Error {}

const EMPTY: FeatureValues = { kind: 'float', values: [] };
const decoder = new TextDecoder();

class Reader {
  pos: number;
  constructor(
    readonly buf: Uint8Array,
    readonly view: DataView,
    start: number,
    /** End of the message being read (narrowed while a nested one is read). */
    public end: number,
  ) {
    this.pos = start;
  }

  /** A varint below 2^53 (tags, lengths). */
  varint(): number {
    let result = 0;
    let shift = 1;
    for (let i = 0; i < 8; i++) {
      if (this.pos >= this.end) throw new WireFallback('truncated varint');
      const b = this.buf[this.pos++]!;
      result += (b & 0x7f) * shift;
      if (b < 0x80) return result;
      shift *= 128;
    }
    throw new WireFallback('varint too long');
  }

  /** A varint as protobuf's int64 (two's complement over 64 bits). */
  int64(): bigint {
    let lo = 0;
    let hi = 0;
    let i = 0;
    for (; i < 10; i++) {
      if (this.pos >= this.end) throw new WireFallback('truncated varint');
      const b = this.buf[this.pos++]!;
      if (i < 4) lo |= (b & 0x7f) << (7 * i);
      else if (i === 4) {
        lo |= (b & 0x0f) << 28;
        hi |= (b & 0x7f) >> 4;
      } else hi |= (b & 0x7f) << (7 * i - 32);
      if (b < 0x80) break;
    }
    if (i === 10) throw new WireFallback('varint too long');
    if (hi === 0 && lo >= 0) return BigInt(lo);
    return BigInt.asIntN(64, (BigInt(hi >>> 0) << 32n) | BigInt(lo >>> 0));
  }

  /** The end of the length-delimited payload that starts here. */
  delimited(): number {
    const length = this.varint();
    const end = this.pos + length;
    if (end > this.end) throw new WireFallback('length past the end');
    return end;
  }

  skip(wireType: number): void {
    switch (wireType) {
      case 0:
        this.varint();
        return;
      case 1:
        this.pos += 8;
        break;
      case 2:
        this.pos = this.delimited();
        return;
      case 5:
        this.pos += 4;
        break;
      default:
        throw new WireFallback(`wire type ${wireType}`);
    }
    if (this.pos > this.end) throw new WireFallback('field past the end');
  }
}

function floats(r: Reader, wireType: number, out: number[]): void {
  if (wireType === 5) {
    if (r.pos + 4 > r.end) throw new WireFallback('truncated float');
    out.push(r.view.getFloat32(r.pos, true));
    r.pos += 4;
    return;
  }
  if (wireType !== 2) throw new WireFallback('float wire type');
  const end = r.delimited();
  if ((end - r.pos) % 4 !== 0) throw new WireFallback('packed floats');
  for (; r.pos < end; r.pos += 4) out.push(r.view.getFloat32(r.pos, true));
}

function int64s(r: Reader, wireType: number, out: bigint[]): void {
  if (wireType === 0) {
    out.push(r.int64());
    return;
  }
  if (wireType !== 2) throw new WireFallback('int64 wire type');
  const end = r.delimited();
  const outer = r.end;
  r.end = end;
  while (r.pos < end) out.push(r.int64());
  r.end = outer;
}

/** One list message (BytesList, FloatList, Int64List: repeated field 1) appended to `out`. */
function readList(r: Reader, end: number, kind: number, out: unknown[]): void {
  const outer = r.end;
  r.end = end;
  while (r.pos < end) {
    const tag = r.varint();
    const wireType = tag & 7;
    if (tag >>> 3 !== 1) r.skip(wireType);
    else if (kind === 1) {
      if (wireType !== 2) throw new WireFallback('bytes wire type');
      const stop = r.delimited();
      out.push(r.buf.slice(r.pos, stop));
      r.pos = stop;
    } else if (kind === 2) floats(r, wireType, out as number[]);
    else int64s(r, wireType, out as bigint[]);
  }
  r.end = outer;
}

/** A Feature message: the last list kind set wins; the same kind again appends (protobuf merge). */
function readFeature(r: Reader, end: number): FeatureValues {
  let kind = 0;
  let values: unknown[] = [];
  while (r.pos < end) {
    const tag = r.varint();
    const field = tag >>> 3;
    if (field < 1 || field > 3 || (tag & 7) !== 2) {
      r.skip(tag & 7);
      continue;
    }
    if (field !== kind) values = [];
    kind = field;
    readList(r, r.delimited(), field, values);
  }
  if (kind === 1) return { kind: 'bytes', values: values as Uint8Array[] };
  if (kind === 2) return { kind: 'float', values: Float32Array.from(values as number[]) };
  if (kind === 3) return { kind: 'int64', values: BigInt64Array.from(values as bigint[]) };
  return EMPTY;
}

/** One map entry of Features.feature (key 1, value 2) into `out`. */
function readEntry(r: Reader, end: number, out: Map<string, FeatureValues>): void {
  let key = '';
  let value: FeatureValues = EMPTY;
  while (r.pos < end) {
    const tag = r.varint();
    const field = tag >>> 3;
    if ((tag & 7) !== 2 || (field !== 1 && field !== 2)) {
      r.skip(tag & 7);
      continue;
    }
    const stop = r.delimited();
    if (field === 1) key = decoder.decode(r.buf.subarray(r.pos, stop));
    else {
      const outer = r.end;
      r.end = stop;
      value = readFeature(r, stop);
      r.end = outer;
    }
    r.pos = stop;
  }
  out.set(key, value);
}

/** Walks `[start, end)` of `r` calling `each` on every field `number` that is length-delimited. */
function eachMessage(r: Reader, end: number, number: number, each: (stop: number) => void): void {
  while (r.pos < end) {
    const tag = r.varint();
    if (tag >>> 3 !== number || (tag & 7) !== 2) {
      r.skip(tag & 7);
      continue;
    }
    const stop = r.delimited();
    each(stop);
    r.pos = stop;
  }
  if (r.pos !== end) throw new WireFallback('field past the end');
}

/** The features of a serialized Example (see the contract above); WireFallback otherwise. */
export function readExampleFeatures(bytes: Uint8Array): ExampleFeatures {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const r = new Reader(bytes, view, 0, bytes.length);
  const out = new Map<string, FeatureValues>();
  // Example.features (1) -> Features.feature (1, map entries).
  eachMessage(r, bytes.length, 1, (featuresEnd) => {
    eachMessage(r, featuresEnd, 1, (entryEnd) => {
      readEntry(r, entryEnd, out);
    });
  });
  return out;
}

/** One dense feature the fast path fills: its key's bytes, output and default. */
interface DenseSlot {
  readonly key: Uint8Array;
  readonly kind: 2 | 3; // Feature field: float_list, int64_list
  readonly per: number;
  readonly out: Float32Array | BigInt64Array;
  readonly fallback: ArrayLike<number> | ArrayLike<bigint> | undefined;
}

/** A feature's fixed facts for the fast path (kept per spec list: keys encoded once). */
interface SlotPlan {
  readonly key: Uint8Array;
  readonly kind: 2 | 3;
  readonly per: number;
  readonly fallback: ArrayLike<number> | ArrayLike<bigint> | undefined;
}

const plans = new WeakMap<readonly ExampleFeatureSpec[], readonly SlotPlan[] | null>();

function planFor(specs: readonly ExampleFeatureSpec[]): readonly SlotPlan[] | null {
  const encoder = new TextEncoder();
  const out: SlotPlan[] = [];
  for (const spec of specs) {
    if (spec.shape.some((d) => d < 0) || (spec.dtype !== 'float32' && spec.dtype !== 'int64')) return null;
    const per = spec.shape.reduce((a, b) => a * b, 1);
    const d = spec.defaultValue as readonly number[] | undefined;
    if (d !== undefined && (d.length !== per || d.some((v) => typeof v !== 'number'))) return null;
    if (spec.dtype === 'int64' && d?.some((v) => !Number.isSafeInteger(v))) return null;
    const kind = spec.dtype === 'float32' ? 2 : 3;
    out.push({
      key: encoder.encode(spec.key),
      kind,
      per,
      fallback: kind === 2 ? d : d?.map((v) => BigInt(v)),
    });
  }
  return out;
}

function slotsFor(specs: readonly ExampleFeatureSpec[], count: number): DenseSlot[] | undefined {
  let plan = plans.get(specs);
  if (plan === undefined) {
    plan = planFor(specs);
    plans.set(specs, plan);
  }
  return plan?.map((p) => ({
    ...p,
    out: p.kind === 2 ? new Float32Array(count * p.per) : new BigInt64Array(count * p.per),
  }));
}

function sameBytes(buf: Uint8Array, start: number, end: number, key: Uint8Array): boolean {
  if (end - start !== key.length) return false;
  for (let i = 0; i < key.length; i++) if (buf[start + i] !== key[i]) return false;
  return true;
}

/**
 * Values of one Feature written into `slot` at `at`; false when it is not exactly `per`
 * values of the slot's kind in lists of that kind only (the general path then decides).
 */
function fillFeature(r: Reader, end: number, slot: DenseSlot, at: number): boolean {
  let n = 0;
  while (r.pos < end) {
    if (r.varint() !== ((slot.kind << 3) | 2)) return false; // another list kind, or an unknown field
    const listEnd = r.delimited();
    while (r.pos < listEnd) {
      const inner = r.varint();
      if (inner === 0x0a) {
        const stop = r.delimited();
        if (stop > listEnd) return false;
        n = slot.kind === 2 ? packedFloats(r, stop, slot, at, n) : packedInt64s(r, stop, slot, at, n);
        if (n < 0) return false;
      } else if (slot.kind === 2 && inner === 0x0d && r.pos + 4 <= listEnd && n < slot.per) {
        (slot.out as Float32Array)[at + n++] = r.view.getFloat32(r.pos, true);
        r.pos += 4;
      } else if (slot.kind === 3 && inner === 0x08 && n < slot.per) {
        (slot.out as BigInt64Array)[at + n++] = r.int64();
        if (r.pos > listEnd) return false;
      } else return false;
    }
    if (r.pos !== listEnd) return false;
  }
  return n === slot.per;
}

/** Packed floats up to `stop` into the slot; the new count, or -1 when they do not fit. */
function packedFloats(r: Reader, stop: number, slot: DenseSlot, at: number, n: number): number {
  if ((stop - r.pos) % 4 !== 0 || n + (stop - r.pos) / 4 > slot.per) return -1;
  const out = slot.out as Float32Array;
  for (; r.pos < stop; r.pos += 4) out[at + n++] = r.view.getFloat32(r.pos, true);
  return n;
}

/** Packed int64 varints up to `stop` into the slot; the new count, or -1 when they do not fit. */
function packedInt64s(r: Reader, stop: number, slot: DenseSlot, at: number, n: number): number {
  const out = slot.out as BigInt64Array;
  const outer = r.end;
  r.end = stop;
  try {
    while (r.pos < stop) {
      if (n >= slot.per) return -1;
      out[at + n++] = r.int64();
    }
    return n;
  } finally {
    r.end = outer;
  }
}

/**
 * One map entry of Features.feature into its slot (entries as protobuf writes them: key, then
 * value); false when the general path must decide. Features the model does not read are skipped.
 */
function fillEntry(
  r: Reader,
  entryEnd: number,
  slots: readonly DenseSlot[],
  row: number,
  seen: Uint8Array,
): boolean {
  if (r.buf[r.pos] !== 0x0a) return false;
  r.pos++;
  const keyEnd = r.delimited();
  const index = slots.findIndex((s) => sameBytes(r.buf, r.pos, keyEnd, s.key));
  if (index < 0) return true;
  r.pos = keyEnd;
  if (seen[index] === 1 || r.buf[r.pos] !== 0x12) return false;
  r.pos++;
  const valueEnd = r.delimited();
  if (valueEnd !== entryEnd) return false;
  const slot = slots[index]!;
  const outer = r.end;
  r.end = valueEnd;
  const ok = fillFeature(r, valueEnd, slot, row * slot.per);
  r.end = outer;
  seen[index] = 1;
  return ok;
}

/** One serialized example into the slots at row `row`; false when the general path must decide. */
function fillExample(bytes: Uint8Array, slots: readonly DenseSlot[], row: number, seen: Uint8Array): boolean {
  seen.fill(0);
  const r = new Reader(
    bytes,
    new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    0,
    bytes.length,
  );
  let ok = true;
  eachMessage(r, bytes.length, 1, (featuresEnd) => {
    eachMessage(r, featuresEnd, 1, (entryEnd) => {
      ok = ok && fillEntry(r, entryEnd, slots, row, seen);
    });
  });
  if (!ok) return false;
  for (let i = 0; i < slots.length; i++) {
    if (seen[i] === 1) continue;
    const slot = slots[i]!;
    if (slot.fallback === undefined) return false; // required: the general path says so
    for (let k = 0; k < slot.per; k++) slot.out[row * slot.per + k] = slot.fallback[k]!;
  }
  return true;
}

/**
 * Dense features of serialized examples straight into their batch tensors (TensorFlow's
 * ParseExample for FixedLenFeature float32/int64 of fixed shape): the fast path of the
 * server's tf.Example signatures. Undefined whenever the general path
 * (`examplesToTensors(parseSerializedExample(...))`) must decide: other dtypes or shapes, a
 * required feature missing, a wrong kind or count (its TF-worded errors), odd encodings.
 */
export function denseExamplesToTensors(
  serialized: readonly Uint8Array[],
  specs: readonly ExampleFeatureSpec[],
): Record<string, Tensor> | undefined {
  if (serialized.length === 0) return undefined;
  const slots = slotsFor(specs, serialized.length);
  if (slots === undefined) return undefined;
  const seen = new Uint8Array(slots.length);
  try {
    for (let row = 0; row < serialized.length; row++) {
      if (!fillExample(serialized[row]!, slots, row, seen)) return undefined;
    }
  } catch (error) {
    if (error instanceof WireFallback) return undefined;
    throw error;
  }
  const out: Record<string, Tensor> = {};
  specs.forEach((spec, i) => {
    out[spec.key] = { dtype: spec.dtype, shape: [serialized.length, ...spec.shape], data: slots[i]!.out };
  });
  return out;
}
