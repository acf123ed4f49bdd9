import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mulberry32 } from './seeded-random.js';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  Code,
  type DType,
  DTYPES,
  ServingError,
  type Tensor,
  type TensorData,
  isStringData,
} from '../src/index.js';
import {
  dataTypeFromDType,
  dtypeFromDataType,
  shapeToProto,
  tensorFromProto,
  tensorToProto,
} from '../src/tfs-proto/index.js';
import { type TensorProto, TensorProtoSchema } from '../src/gen/tensorflow/core/framework/tensor_pb.js';
import { DataType } from '../src/gen/tensorflow/core/framework/types_pb.js';
import { PredictRequestSchema } from '../src/gen/tensorflow_serving/apis/predict_pb.js';

function sample(dtype: DType): Tensor {
  const shape = [2, 3];
  switch (dtype) {
    case 'float32':
      return { dtype, shape, data: Float32Array.of(1.5, -2.25, 0, 3e38, -1e-30, 7) };
    case 'float64':
      return { dtype, shape, data: Float64Array.of(1.5, -2.25, 0, 1e300, -1e-300, Math.PI) };
    case 'float16':
    case 'bfloat16':
      return { dtype, shape, data: Uint16Array.of(0x3c00, 0xbc00, 0, 0x7bff, 0xffff, 1) };
    case 'int8':
      return { dtype, shape, data: Int8Array.of(-128, 127, 0, -1, 1, 5) };
    case 'int16':
      return { dtype, shape, data: Int16Array.of(-32768, 32767, 0, -1, 1, 5) };
    case 'int32':
      return { dtype, shape, data: Int32Array.of(-(2 ** 31), 2 ** 31 - 1, 0, -1, 1, 5) };
    case 'int64':
      return { dtype, shape, data: BigInt64Array.of(-(2n ** 63n), 2n ** 63n - 1n, 0n, -1n, 1n, 5n) };
    case 'uint8':
      return { dtype, shape, data: Uint8Array.of(0, 255, 1, 2, 3, 4) };
    case 'uint16':
      return { dtype, shape, data: Uint16Array.of(0, 65535, 1, 2, 3, 4) };
    case 'uint32':
      return { dtype, shape, data: Uint32Array.of(0, 2 ** 32 - 1, 1, 2, 3, 4) };
    case 'uint64':
      return { dtype, shape, data: BigUint64Array.of(0n, 2n ** 64n - 1n, 1n, 2n, 3n, 4n) };
    case 'bool':
      return { dtype, shape, data: Uint8Array.of(1, 0, 0, 1, 1, 0) };
    case 'string':
      return { dtype, shape, data: ['a', '', 'ccc', 'd', 'é', 'f'].map((s) => new TextEncoder().encode(s)) };
  }
}

function plain(data: TensorData): unknown[] {
  if (isStringData(data)) return data.map((b) => [...b]);
  return Array.from(data as ArrayLike<unknown>);
}

function proto(init: Parameters<typeof create<typeof TensorProtoSchema>>[1]): TensorProto {
  return create(TensorProtoSchema, init);
}

/** A DataType number as it arrives from the wire (e.g. one this build does not know). */
function wireDataType(n: number): DataType {
  return fromBinary(TensorProtoSchema, Uint8Array.of(0x08, n)).dtype;
}

function dims(...sizes: (number | bigint)[]): { dim: { size: bigint }[] } {
  return { dim: sizes.map((s) => ({ size: BigInt(s) })) };
}

function assertInvalid(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ServingError, `expected ServingError, got ${String(e)}`);
    assert.equal(e.code, Code.INVALID_ARGUMENT);
    assert.match(e.message, pattern);
    return true;
  });
}

describe('DataType <-> DType', () => {
  it('maps every DType both ways', () => {
    for (const dtype of DTYPES) assert.equal(dtypeFromDataType(dataTypeFromDType(dtype)), dtype);
  });
  it('refuses types visionserve cannot hold, by name or number', () => {
    assertInvalid(() => dtypeFromDataType(DataType.DT_RESOURCE, "input 'x'"), /input 'x'.*DT_RESOURCE/);
    assertInvalid(() => dtypeFromDataType(DataType.DT_INVALID), /DT_INVALID/);
    assertInvalid(() => dtypeFromDataType(DataType.DT_COMPLEX64), /DT_COMPLEX64/);
    assertInvalid(() => dtypeFromDataType(wireDataType(101)), /unsupported dtype 101/);
    assertInvalid(() => dtypeFromDataType(wireDataType(99)), /unsupported dtype 99/);
  });
});

describe('tensorToProto / tensorFromProto round trips', () => {
  for (const dtype of DTYPES) {
    for (const asTensorContent of [false, true]) {
      it(`${dtype} via ${asTensorContent ? 'tensor_content' : 'typed field'} and the wire`, () => {
        const t = sample(dtype);
        const encoded = tensorToProto(t, { asTensorContent });
        assert.equal(encoded.dtype, dataTypeFromDType(dtype));
        if (asTensorContent && dtype !== 'string') assert.ok(encoded.tensorContent.byteLength > 0);
        else assert.equal(encoded.tensorContent.byteLength, 0);
        const wire = toBinary(TensorProtoSchema, encoded);
        const back = tensorFromProto(fromBinary(TensorProtoSchema, wire), 'tensor');
        assert.equal(back.dtype, dtype);
        assert.deepEqual(back.shape, [2, 3]);
        assert.deepEqual(plain(back.data), plain(t.data));
      });
    }
  }

  it('uses the same typed fields as TF Serving', () => {
    assert.deepEqual(tensorToProto(sample('float16'), { asTensorContent: false }).halfVal.length, 6);
    assert.deepEqual(tensorToProto(sample('uint16'), { asTensorContent: false }).intVal.length, 6);
    assert.deepEqual(tensorToProto(sample('uint8'), { asTensorContent: false }).intVal.length, 6);
    assert.deepEqual(tensorToProto(sample('bool'), { asTensorContent: false }).boolVal, [
      true,
      false,
      false,
      true,
      true,
      false,
    ]);
  });

  it('encodes a scalar and an empty tensor', () => {
    const scalar = tensorFromProto(
      fromBinary(
        TensorProtoSchema,
        toBinary(
          TensorProtoSchema,
          tensorToProto(
            { dtype: 'float32', shape: [], data: Float32Array.of(4) },
            { asTensorContent: false },
          ),
        ),
      ),
      's',
    );
    assert.deepEqual(scalar.shape, []);
    assert.deepEqual([...(scalar.data as Float32Array)], [4]);
    const empty = tensorFromProto(
      tensorToProto({ dtype: 'int32', shape: [0, 3], data: new Int32Array(0) }, { asTensorContent: true }),
      'e',
    );
    assert.deepEqual(empty.shape, [0, 3]);
    assert.equal((empty.data as Int32Array).length, 0);
  });

  it('writes unknown dims as -1 and unknown rank in shapes', () => {
    assert.deepEqual(
      shapeToProto([-1, 3]).dim.map((d) => d.size),
      [-1n, 3n],
    );
    assert.equal(shapeToProto(undefined).unknownRank, true);
  });

  it('encodes 150k floats quickly', () => {
    const data = new Float32Array(150_528).map((_, i) => i / 7);
    const start = performance.now();
    const encoded = tensorToProto(
      { dtype: 'float32', shape: [1, 224, 224, 3], data },
      { asTensorContent: false },
    );
    const wire = toBinary(TensorProtoSchema, encoded);
    const ms = performance.now() - start;
    assert.ok(wire.byteLength > 150_528 * 4);
    // A guard against per-element pathologies (tens of seconds), not a benchmark: cold JIT on a
    // busy 2-core box can take tens of ms.
    assert.ok(ms < 1000, `took ${ms} ms`);
  });
});

describe('tensorFromProto typed-field semantics', () => {
  it('no values -> zeros', () => {
    const t = tensorFromProto(proto({ dtype: DataType.DT_FLOAT, tensorShape: dims(2, 2) }), 'x');
    assert.deepEqual([...(t.data as Float32Array)], [0, 0, 0, 0]);
    const s = tensorFromProto(proto({ dtype: DataType.DT_STRING, tensorShape: dims(2) }), 's');
    assert.deepEqual(plain(s.data), [[], []]);
  });
  it('one value broadcasts over the shape', () => {
    const t = tensorFromProto(proto({ dtype: DataType.DT_INT64, tensorShape: dims(3), int64Val: [7n] }), 'x');
    assert.deepEqual([...(t.data as BigInt64Array)], [7n, 7n, 7n]);
    const b = tensorFromProto(proto({ dtype: DataType.DT_BOOL, tensorShape: dims(3), boolVal: [true] }), 'b');
    assert.deepEqual([...(b.data as Uint8Array)], [1, 1, 1]);
  });
  it('fewer values are padded with the last one', () => {
    const t = tensorFromProto(
      proto({ dtype: DataType.DT_FLOAT, tensorShape: dims(2, 3), floatVal: [1, 2, 3] }),
      'x',
    );
    assert.deepEqual([...(t.data as Float32Array)], [1, 2, 3, 3, 3, 3]);
    const s = tensorFromProto(
      proto({
        dtype: DataType.DT_STRING,
        tensorShape: dims(3),
        stringVal: [Uint8Array.of(65), Uint8Array.of(66)],
      }),
      's',
    );
    assert.deepEqual(plain(s.data), [[65], [66], [66]]);
  });
  it('more values than elements is INVALID_ARGUMENT', () => {
    assertInvalid(
      () =>
        tensorFromProto(
          proto({ dtype: DataType.DT_FLOAT, tensorShape: dims(2), floatVal: [1, 2, 3] }),
          "input 'x'",
        ),
      /input 'x': float_val has 3 values but the shape holds 2 elements/,
    );
  });
  it('range-checks int_val against narrow dtypes', () => {
    assertInvalid(
      () => tensorFromProto(proto({ dtype: DataType.DT_UINT8, tensorShape: dims(2), intVal: [1, 256] }), 'x'),
      /256 is out of range for uint8/,
    );
    assertInvalid(
      () => tensorFromProto(proto({ dtype: DataType.DT_INT8, tensorShape: dims(1), intVal: [-129] }), 'x'),
      /out of range for int8/,
    );
    assertInvalid(
      () => tensorFromProto(proto({ dtype: DataType.DT_UINT16, tensorShape: dims(1), intVal: [-1] }), 'x'),
      /out of range for uint16/,
    );
    assertInvalid(
      () => tensorFromProto(proto({ dtype: DataType.DT_INT16, tensorShape: dims(1), intVal: [40000] }), 'x'),
      /out of range for int16/,
    );
  });
  it('missing tensor_shape is a scalar', () => {
    const t = tensorFromProto(proto({ dtype: DataType.DT_DOUBLE, doubleVal: [2.5] }), 'x');
    assert.deepEqual(t.shape, []);
    assert.deepEqual([...(t.data as Float64Array)], [2.5]);
  });
});

describe('tensorFromProto validation', () => {
  it('tensor_content must be exactly n * bytesPerElement', () => {
    assertInvalid(
      () =>
        tensorFromProto(
          proto({ dtype: DataType.DT_FLOAT, tensorShape: dims(2, 2), tensorContent: new Uint8Array(12) }),
          "input 'x'",
        ),
      /input 'x': tensor_content has 12 bytes, expected 16/,
    );
  });
  it('bool tensor_content bytes other than 0/1 read as true (1), like bool_val (found by fuzzing)', () => {
    const content = Uint8Array.of(2, 0, 1, 255);
    const t = tensorFromProto(
      proto({ dtype: DataType.DT_BOOL, tensorShape: dims(4), tensorContent: content }),
      'b',
    );
    assert.deepEqual([...(t.data as Uint8Array)], [1, 0, 1, 1]);
    assert.deepEqual([...content], [2, 0, 1, 255]);
    const valid = Uint8Array.of(1, 0, 1);
    const view = tensorFromProto(
      proto({ dtype: DataType.DT_BOOL, tensorShape: dims(3), tensorContent: valid }),
      'b',
    );
    assert.equal((view.data as Uint8Array).buffer, valid.buffer, 'valid bytes stay a view');
  });
  it('refuses tensor_content for strings', () => {
    assertInvalid(
      () =>
        tensorFromProto(
          proto({ dtype: DataType.DT_STRING, tensorShape: dims(1), tensorContent: Uint8Array.of(1) }),
          's',
        ),
      /string_val/,
    );
  });
  it('refuses unknown enum numbers and DT_RESOURCE', () => {
    assertInvalid(
      () => tensorFromProto(proto({ dtype: wireDataType(99), floatVal: [1] }), "input 'x'"),
      /input 'x'.*99/,
    );
    assertInvalid(() => tensorFromProto(proto({ dtype: DataType.DT_RESOURCE }), 'x'), /DT_RESOURCE/);
    assertInvalid(() => tensorFromProto(fromBinary(TensorProtoSchema, Uint8Array.of(0x08, 120)), 'x'), /120/);
  });
  it('refuses negative dims and unknown rank', () => {
    assertInvalid(
      () => tensorFromProto(proto({ dtype: DataType.DT_FLOAT, tensorShape: dims(2, -1) }), 'x'),
      /-1/,
    );
    assertInvalid(
      () => tensorFromProto(proto({ dtype: DataType.DT_FLOAT, tensorShape: { unknownRank: true } }), 'x'),
      /unknown rank/,
    );
    assertInvalid(
      () => tensorFromProto(proto({ dtype: DataType.DT_FLOAT, tensorShape: dims(2n ** 62n) }), 'x'),
      /invalid/,
    );
  });
  it('refuses a declared shape of 2^40 elements before allocating', () => {
    // Allocating 2^40 floats would throw a RangeError, not a ServingError.
    for (const dtype of [DataType.DT_FLOAT, DataType.DT_STRING, DataType.DT_BOOL]) {
      assertInvalid(
        () => tensorFromProto(proto({ dtype, tensorShape: dims(2 ** 20, 2 ** 20), floatVal: [1] }), 'x'),
        /too many elements/,
      );
    }
  });
});

describe('tensor_content inside a PredictRequest', () => {
  const floats = Float32Array.of(1.25, -2.5, 3.75, 1e-7, 42, -0);
  function encodeRequest(name: string): Uint8Array {
    const request = create(PredictRequestSchema, {
      modelSpec: { name },
      inputs: {
        x: tensorToProto({ dtype: 'float32', shape: [2, 3], data: floats }, { asTensorContent: true }),
      },
    });
    // A fresh, offset-0 buffer, as a transport would hand it over.
    return new Uint8Array(toBinary(PredictRequestSchema, request));
  }
  function decode(wire: Uint8Array): { tensor: Tensor; contentOffset: number } {
    const request = fromBinary(PredictRequestSchema, wire);
    const x = request.inputs.x!;
    return { tensor: tensorFromProto(x, "input 'x'"), contentOffset: x.tensorContent.byteOffset };
  }

  it('decodes unaligned bytes into an aligned copy with the right floats', () => {
    let seen = false;
    for (let len = 1; len <= 8; len++) {
      const wire = encodeRequest('m'.repeat(len));
      const { tensor, contentOffset } = decode(wire);
      assert.deepEqual([...(tensor.data as Float32Array)], [...floats]);
      assert.equal((tensor.data as Float32Array).byteOffset % 4, 0);
      if (contentOffset % 4 !== 0) {
        seen = true;
        assert.notEqual((tensor.data as Float32Array).buffer, wire.buffer, 'unaligned content is copied');
      } else {
        assert.equal((tensor.data as Float32Array).buffer, wire.buffer, 'aligned content is a view');
      }
    }
    assert.ok(seen, 'at least one layout put tensor_content at an unaligned offset');
  });

  it('fromBinary raises on truncated or garbage bytes', () => {
    const wire = encodeRequest('model');
    assert.throws(() => fromBinary(PredictRequestSchema, wire.subarray(0, wire.byteLength - 5)));
    assert.throws(() => fromBinary(PredictRequestSchema, Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff)));
    assert.throws(() => fromBinary(PredictRequestSchema, Uint8Array.of(0x0a, 0x7f, 0x01)));
  });
});

describe('prepacked float_val', () => {
  it('serializes byte-identically to the number-array path and decodes back', () => {
    for (const t of [
      {
        dtype: 'float32' as const,
        shape: [2, 3],
        data: new Float32Array([0.1, -2, 3.5, NaN, Infinity, 1e-30]),
      },
      { dtype: 'float64' as const, shape: [3], data: new Float64Array([0.1, -2, 1e300]) },
      { dtype: 'float32' as const, shape: [0], data: new Float32Array(0) },
      { dtype: 'float32' as const, shape: [40000], data: new Float32Array(40000).map((_, i) => i / 7) },
    ]) {
      const slow = toBinary(TensorProtoSchema, tensorToProto(t, { asTensorContent: false }));
      const fast = toBinary(
        TensorProtoSchema,
        tensorToProto(t, { asTensorContent: false, prepackNumbers: true }),
      );
      assert.deepEqual(fast, slow);
      const back = tensorFromProto(fromBinary(TensorProtoSchema, fast), 'x');
      assert.deepEqual(Array.from(back.data as Float32Array), Array.from(t.data));
    }
  });
});

describe('prepacked int_val', () => {
  it('serializes byte-identically to protobuf-es for every int_val dtype, extremes and random values', () => {
    const uniform = mulberry32(0x1e7_7a1);
    const random = (n: number, lo: number, hi: number): number[] =>
      Array.from({ length: n }, () => lo + Math.floor(uniform() * (hi - lo + 1)));
    const cases = [
      { dtype: 'int8' as const, data: Int8Array.from([-128, -1, 0, 1, 127, ...random(500, -128, 127)]) },
      { dtype: 'uint8' as const, data: Uint8Array.from([0, 127, 128, 255, ...random(500, 0, 255)]) },
      {
        dtype: 'int16' as const,
        data: Int16Array.from([-32768, -129, 128, 16383, 16384, 32767, ...random(500, -32768, 32767)]),
      },
      {
        dtype: 'uint16' as const,
        data: Uint16Array.from([0, 127, 128, 16383, 16384, 65535, ...random(500, 0, 65535)]),
      },
      {
        dtype: 'int32' as const,
        data: Int32Array.from([
          -2147483648,
          -1,
          0,
          127,
          128,
          2097151,
          2097152,
          268435455,
          268435456,
          2147483647,
          ...random(500, -2147483648, 2147483647),
        ]),
      },
      { dtype: 'int32' as const, data: new Int32Array(0) },
    ];
    for (const c of cases) {
      const t = { dtype: c.dtype, shape: [c.data.length], data: c.data };
      const slow = toBinary(TensorProtoSchema, tensorToProto(t, { asTensorContent: false }));
      const fast = toBinary(
        TensorProtoSchema,
        tensorToProto(t, { asTensorContent: false, prepackNumbers: true }),
      );
      assert.deepEqual(fast, slow, c.dtype);
      const back = tensorFromProto(fromBinary(TensorProtoSchema, fast), 'x');
      assert.deepEqual(Array.from(back.data as ArrayLike<number>), Array.from(c.data), c.dtype);
    }
  });
});

describe('expansion of typed values is bounded', () => {
  it('refuses a tiny request that declares a huge shape with one or no value, before allocating', () => {
    const huge = shapeToProto([2147483647]);
    for (const proto of [
      create(TensorProtoSchema, { dtype: DataType.DT_STRING, tensorShape: huge }),
      create(TensorProtoSchema, { dtype: DataType.DT_FLOAT, tensorShape: huge, floatVal: [1] }),
      create(TensorProtoSchema, {
        dtype: DataType.DT_INT64,
        tensorShape: shapeToProto([1 << 24]),
        int64Val: [],
      }),
    ]) {
      const before = process.memoryUsage().rss;
      assert.throws(
        () => tensorFromProto(proto, "input 'x'"),
        (e: unknown) =>
          e instanceof ServingError && e.code === Code.INVALID_ARGUMENT && /expanded/.test(e.message),
      );
      assert.ok(process.memoryUsage().rss - before < 64 * 1024 * 1024, 'nothing large was allocated');
    }
  });

  it('still broadcasts a single value into a modest shape (TF semantics)', () => {
    const proto = create(TensorProtoSchema, {
      dtype: DataType.DT_FLOAT,
      tensorShape: shapeToProto([1000, 1000]),
      floatVal: [0.5],
    });
    const t = tensorFromProto(proto, 'x');
    assert.equal((t.data as Float32Array).length, 1_000_000);
    assert.equal((t.data as Float32Array)[999_999], 0.5);
  });
});
