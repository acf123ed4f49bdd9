/**
 * Tensor -> TF Serving REST JSON: predict responses (server) and requests (client),
 * written straight into bytes by JsonWriter (no intermediate strings per number).
 */
import { bfloat16ToNumber, halfToNumber, numberToBfloat16, numberToHalf } from './dtype.js';
import { invalidArgument } from './errors.js';
import { JsonWriter } from './json-writer.js';
import { type Tensor, isStringData } from './tensor.js';
import type { TfsFormat } from './tfs-json-decode.js';

/**
 * Encodes a predict response: row -> `{"predictions": ...}` (one output: the nested list;
 * several: a list of objects, one per dim-0 index, which must be equal for all outputs),
 * columnar -> `{"outputs": value | {alias: value}}`. String outputs whose alias ends
 * with `_bytes` are written as `{"b64": ...}`, others as UTF-8 text.
 */
export function encodeTfsPredictResponse(
  outputs: Readonly<Record<string, Tensor>>,
  format: TfsFormat,
): Uint8Array {
  const w = new JsonWriter(estimateBytes(outputs));
  writeTensorMap(w, format === 'row' ? 'predictions' : 'outputs', outputs, format, false);
  return w.bytes();
}

/** Encodes a predict request (the client side). String tensors are sent as `{"b64": ...}`. */
export function encodeTfsPredictRequest(
  inputs: Readonly<Record<string, Tensor>>,
  format: TfsFormat,
  signatureName?: string,
): Uint8Array {
  const w = new JsonWriter(estimateBytes(inputs));
  w.byte(123);
  if (signatureName !== undefined) {
    w.string('signature_name');
    w.byte(58);
    w.string(signatureName);
    w.byte(44);
  }
  writeTensorMapBody(w, format === 'row' ? 'instances' : 'inputs', inputs, format, true);
  w.byte(125);
  return w.bytes();
}

/** The shortest decimal that reads back (through the 16-bit rounding) as the same bits: 1.85, not 1.8496094. */
function shortest16(value: number, bits: number, toBits: (n: number) => number): string {
  for (let digits = 1; digits < 10; digits++) {
    const text = String(Number(value.toPrecision(digits)));
    if (toBits(Number(text)) === bits) return text;
  }
  return String(value);
}

function estimateBytes(tensors: Readonly<Record<string, Tensor>>): number {
  let n = 64;
  for (const t of Object.values(tensors)) n += t.data.length * 10;
  return Math.min(n, 64 * 1024 * 1024);
}

function writeTensorMap(
  w: JsonWriter,
  key: string,
  tensors: Readonly<Record<string, Tensor>>,
  format: TfsFormat,
  allB64: boolean,
): void {
  w.byte(123);
  writeTensorMapBody(w, key, tensors, format, allB64);
  w.byte(125);
}

function writeTensorMapBody(
  w: JsonWriter,
  key: string,
  tensors: Readonly<Record<string, Tensor>>,
  format: TfsFormat,
  allB64: boolean,
): void {
  const aliases = Object.keys(tensors);
  const b64 = (alias: string): boolean => allB64 || alias.endsWith('_bytes');
  w.string(key);
  w.byte(58);
  if (format === 'columnar') {
    if (aliases.length === 1) {
      const alias = aliases[0]!;
      writeSlice(w, tensors[alias]!, 0, 0, b64(alias));
    } else {
      w.byte(123);
      aliases.forEach((alias, i) => {
        if (i > 0) w.byte(44);
        w.string(alias);
        w.byte(58);
        writeSlice(w, tensors[alias]!, 0, 0, b64(alias));
      });
      w.byte(125);
    }
    return;
  }
  let batch = -1;
  for (const alias of aliases) {
    const t = tensors[alias]!;
    if (t.shape.length === 0) {
      throw invalidArgument(`Tensor name: ${alias} is a scalar; the row format needs a batch dimension`);
    }
    if (batch < 0) batch = t.shape[0]!;
    else if (t.shape[0] !== batch) {
      throw invalidArgument(
        `Tensor name: ${alias} has inconsistent batch size: ${t.shape[0]!} expecting: ${batch}`,
      );
    }
  }
  if (aliases.length === 1) {
    const alias = aliases[0]!;
    writeSlice(w, tensors[alias]!, 0, 0, b64(alias));
    return;
  }
  w.byte(91);
  for (let i = 0; i < Math.max(batch, 0); i++) {
    if (i > 0) w.byte(44);
    w.byte(123);
    aliases.forEach((alias, j) => {
      if (j > 0) w.byte(44);
      const t = tensors[alias]!;
      w.string(alias);
      w.byte(58);
      writeSlice(w, t, 1, i * strideOf(t.shape, 1), b64(alias));
    });
    w.byte(125);
  }
  w.byte(93);
}

function strideOf(shape: readonly number[], level: number): number {
  let s = 1;
  for (let l = level; l < shape.length; l++) s *= shape[l]!;
  return s;
}

/** Writes the sub-tensor at `shape[level:]` starting at flat element `offset` as nested lists. */
function writeSlice(w: JsonWriter, t: Tensor, level: number, offset: number, b64: boolean): void {
  const rank = t.shape.length;
  if (level === rank) {
    writeRun(w, t, offset, 1, b64);
    return;
  }
  const n = t.shape[level]!;
  w.byte(91);
  if (level === rank - 1) {
    writeRun(w, t, offset, n, b64);
  } else {
    const stride = strideOf(t.shape, level + 1);
    for (let i = 0; i < n; i++) {
      if (i > 0) w.byte(44);
      writeSlice(w, t, level + 1, offset + i * stride, b64);
    }
  }
  w.byte(93);
}

const decoder = new TextDecoder();

/** Writes `count` comma-separated elements from flat index `offset`. */
function writeRun(w: JsonWriter, t: Tensor, offset: number, count: number, b64: boolean): void {
  const end = offset + count;
  const data = t.data;
  if (isStringData(data)) {
    for (let i = offset; i < end; i++) {
      if (i > offset) w.byte(44);
      const bytes = data[i]!;
      if (b64) {
        w.ascii('{"b64":"');
        w.ascii(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64'));
        w.ascii('"}');
      } else {
        w.string(decoder.decode(bytes));
      }
    }
    return;
  }
  switch (t.dtype) {
    case 'float32': {
      const f = data as Float32Array;
      for (let i = offset; i < end; i++) {
        if (i > offset) w.byte(44);
        w.float32(f[i]!);
      }
      return;
    }
    case 'float16':
    case 'bfloat16': {
      const u = data as Uint16Array;
      const half = t.dtype === 'float16';
      for (let i = offset; i < end; i++) {
        if (i > offset) w.byte(44);
        const value = half ? halfToNumber(u[i]!) : bfloat16ToNumber(u[i]!);
        if (Number.isFinite(value)) w.ascii(shortest16(value, u[i]!, half ? numberToHalf : numberToBfloat16));
        else w.float64(value);
      }
      return;
    }
    case 'float64': {
      const f = data as Float64Array;
      for (let i = offset; i < end; i++) {
        if (i > offset) w.byte(44);
        w.float64(f[i]!);
      }
      return;
    }
    case 'bool': {
      for (let i = offset; i < end; i++) {
        if (i > offset) w.byte(44);
        w.ascii(data[i] ? 'true' : 'false');
      }
      return;
    }
    default: {
      for (let i = offset; i < end; i++) {
        if (i > offset) w.byte(44);
        w.ascii(String(data[i]!));
      }
    }
  }
}
