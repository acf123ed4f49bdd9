import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { intValTensorData } from '../src/tfs-proto/tf-tensor-view.js';
import {
  predictRequestIsViewable,
  predictRequestViewFrom,
  tensorFromProto,
  tensorFromProtoView,
} from '../src/tfs-proto/index.js';
import { PredictRequestSchema } from '../src/gen/tensorflow_serving/apis/predict_pb.js';
import { PredictRequestViewSchema } from '../src/gen/visionserve/predict_request_view_pb.js';
import { DataType } from '../src/gen/tensorflow/core/framework/types_pb.js';

function request(
  inputs: Record<
    string,
    {
      dtype: number;
      dims: number[];
      floatVal?: number[];
      doubleVal?: number[];
      intVal?: number[];
      tensorContent?: Uint8Array;
    }
  >,
): Uint8Array {
  return toBinary(
    PredictRequestSchema,
    create(PredictRequestSchema, {
      modelSpec: { name: 'm' },
      inputs: Object.fromEntries(
        Object.entries(inputs).map(([k, v]) => [
          k,
          {
            dtype: v.dtype,
            tensorShape: { dim: v.dims.map((d) => ({ size: BigInt(d) })) },
            floatVal: v.floatVal ?? [],
            doubleVal: v.doubleVal ?? [],
            intVal: v.intVal ?? [],
            ...(v.tensorContent ? { tensorContent: v.tensorContent } : {}),
          },
        ]),
      ),
    }),
  );
}

/**
 * A serialized PredictRequest with one input "x" whose TensorProto is `tensor` (hand-built bytes),
 * followed by `trailer` at the top level.
 */
function inputX(tensor: number[], trailer: number[] = []): Uint8Array {
  const entry = [0x0a, 0x01, 0x78, 0x12, tensor.length, ...tensor];
  return new Uint8Array([0x12, entry.length, ...entry, ...trailer]);
}

describe('PredictRequestView (packed float fields as byte views)', () => {
  it('decodes exactly what the regular message decodes, for every shape of request', () => {
    const bytes = request({
      a: { dtype: 1, dims: [2, 3], floatVal: [0.1, -2, 3.5, 1e-30, 7, 8] },
      b: { dtype: 2, dims: [3], doubleVal: [0.1, -2, 1e300] },
      c: { dtype: 1, dims: [4], floatVal: [9] }, // broadcast
      d: { dtype: 3, dims: [2], intVal: [5, -6] },
      e: { dtype: 1, dims: [0] },
    });
    assert.ok(predictRequestIsViewable(bytes));
    const view = fromBinary(PredictRequestViewSchema, bytes);
    const regular = fromBinary(PredictRequestSchema, bytes);
    for (const alias of ['a', 'b', 'c', 'd', 'e']) {
      const fast = tensorFromProtoView(view.inputs[alias]!, alias);
      const slow = tensorFromProto(regular.inputs[alias]!, alias);
      assert.deepEqual(fast.shape, slow.shape, alias);
      assert.equal(fast.dtype, slow.dtype, alias);
      assert.deepEqual(Array.from(fast.data as Float32Array), Array.from(slow.data as Float32Array), alias);
    }
  });

  it('is not used for unpacked or split float fields (the regular decoder handles them)', () => {
    const f = new Uint8Array(new Float32Array([1.5]).buffer);
    // PredictRequest{ inputs{ key "x" value{ dtype: DT_FLOAT, float_val: 1.5, 1.5 (unpacked) } } }
    const shape2 = [0x12, 4, 0x12, 2, 0x08, 0x02]; // tensor_shape { dim { size: 2 } }
    const tensor = [0x08, 0x01, ...shape2, 0x2d, ...f, 0x2d, ...f];
    const unpacked = inputX(tensor);
    assert.equal(predictRequestIsViewable(unpacked), false);
    const viaFallback = predictRequestViewFrom(fromBinary(PredictRequestSchema, unpacked));
    assert.deepEqual(
      Array.from(tensorFromProtoView(viaFallback.inputs['x']!, 'x').data as Float32Array),
      [1.5, 1.5],
    );

    // Two packed runs of field 5 in one tensor: legal protobuf, merged by regular decoders.
    const run = [0x2a, 4, ...f];
    const split = [0x08, 0x01, ...shape2, ...run, ...run];
    const twoRuns = inputX(split);
    assert.equal(predictRequestIsViewable(twoRuns), false);
    assert.deepEqual(fromBinary(PredictRequestSchema, twoRuns).inputs['x']!.floatVal, [1.5, 1.5]);
  });

  it('refuses float bytes that are not whole values, and truncated requests', () => {
    const bad = [0x08, 0x01, 0x2a, 3, 1, 2, 3];
    const view = fromBinary(PredictRequestViewSchema, inputX(bad));
    assert.throws(() => tensorFromProtoView(view.inputs['x']!, 'x'), /whole number of values/);
    assert.equal(predictRequestIsViewable(new Uint8Array([0x12, 0x10, 0x0a])), false);
  });

  it('leaves requests with complex or float8 value fields to the regular decoder (found by fuzzing)', () => {
    // Input "b": DT_STRING scalar with a 9-byte packed scomplex_val. The regular message refuses
    // it (not whole floats); the view, which does not declare field 9, skipped it and accepted.
    const b = [0x08, 0x07, 0x12, 0x00, 0x4a, 0x09, ...new Array<number>(9).fill(0)];
    const entry = [0x0a, 0x01, 0x62, 0x12, b.length, ...b];
    const bytes = new Uint8Array([0x12, entry.length, ...entry]);
    assert.throws(() => fromBinary(PredictRequestSchema, bytes));
    assert.equal(predictRequestIsViewable(bytes), false);
    for (const field of [9, 12, 18]) {
      const t = [0x08, 0x01, (field << 3) | 2, 0x00];
      assert.equal(predictRequestIsViewable(inputX(t)), false, `field ${field}`);
    }
  });
  describe('int_val (packed varints read straight into the typed array)', () => {
    /** DataType numbers of the dtypes TensorFlow carries in int_val, and their ranges. */
    const INT_DTYPES = [
      { name: 'int32', dataType: 3, min: -(2 ** 31), max: 2 ** 31 - 1 },
      { name: 'uint8', dataType: 4, min: 0, max: 255 },
      { name: 'int16', dataType: 5, min: -32768, max: 32767 },
      { name: 'int8', dataType: 6, min: -128, max: 127 },
      { name: 'uint16', dataType: 17, min: 0, max: 65535 },
    ];
    let seed = 7;
    const random = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;

    /** Both decoders on the same bytes: equal tensors, or the same error. */
    function sameAsRegular(bytes: Uint8Array, label: string): void {
      assert.ok(predictRequestIsViewable(bytes), label);
      const view = fromBinary(PredictRequestViewSchema, bytes);
      const regular = fromBinary(PredictRequestSchema, bytes);
      for (const alias of Object.keys(regular.inputs)) {
        let slow: ReturnType<typeof tensorFromProto> | Error;
        let fast: ReturnType<typeof tensorFromProto> | Error;
        try {
          slow = tensorFromProto(regular.inputs[alias]!, alias);
        } catch (error) {
          slow = error as Error;
        }
        try {
          fast = tensorFromProtoView(view.inputs[alias]!, alias);
        } catch (error) {
          fast = error as Error;
        }
        if (slow instanceof Error || fast instanceof Error) {
          assert.equal((fast as Error).message, (slow as Error).message, `${label} ${alias}: same error`);
          continue;
        }
        assert.equal(fast.dtype, slow.dtype, label);
        assert.deepEqual(fast.shape, slow.shape, label);
        assert.equal(fast.data.constructor, slow.data.constructor, label);
        assert.deepEqual(
          Array.from(fast.data as Int32Array),
          Array.from(slow.data as Int32Array),
          `${label} ${alias}`,
        );
      }
    }

    it('decodes what the regular message decodes: every dtype, sizes, extremes, padding, counts and ranges', () => {
      for (const d of INT_DTYPES) {
        for (const n of [1, 2, 3, 127, 128, 1000, 4097]) {
          const inRange = Array.from({ length: n }, (_, i) =>
            i === 0 ? d.min : i === 1 ? d.max : d.min + Math.floor(random() * (d.max - d.min + 1)),
          );
          sameAsRegular(
            request({ x: { dtype: d.dataType, dims: [n], intVal: inRange } }),
            `${d.name} n=${n}`,
          );
          // Fewer values than elements: padded with the last (the regular decoder's path).
          sameAsRegular(
            request({ x: { dtype: d.dataType, dims: [n + 3], intVal: inRange } }),
            `${d.name} pad`,
          );
          // More values than elements: the regular decoder's error.
          sameAsRegular(
            request({ x: { dtype: d.dataType, dims: [Math.max(0, n - 1)], intVal: inRange } }),
            `${d.name} excess`,
          );
          if (d.name !== 'int32') {
            const out = [...inRange];
            out[Math.floor(n / 2)] = random() < 0.5 ? d.min - 1 : d.max + 1;
            sameAsRegular(
              request({ x: { dtype: d.dataType, dims: [n], intVal: out } }),
              `${d.name} out of range`,
            );
          }
        }
      }
      // int_val beside a float dtype, beside float_val, and with tensor_content: the regular rules.
      sameAsRegular(request({ x: { dtype: 1, dims: [2], intVal: [1, 2] } }), 'float with int_val');
      sameAsRegular(request({ x: { dtype: 3, dims: [2], intVal: [1, 2], floatVal: [3, 4] } }), 'both fields');
      sameAsRegular(
        request({ x: { dtype: 3, dims: [2], intVal: [1, 2], tensorContent: new Uint8Array(8).fill(1) } }),
        'tensor_content wins',
      );
      // Too many values and one out of range: the regular decoder's first error, in its order.
      sameAsRegular(request({ x: { dtype: 4, dims: [2], intVal: [1, 300, 3] } }), 'excess and range');
      // A huge declared shape with a short run: the regular expansion limit, nothing allocated.
      sameAsRegular(request({ x: { dtype: 3, dims: [2 ** 33], intVal: [1] } }), 'huge shape');
      // A scalar (no dims) and an empty shape dimension.
      sameAsRegular(request({ x: { dtype: 6, dims: [], intVal: [-7] } }), 'scalar');
      sameAsRegular(request({ x: { dtype: 6, dims: [0], intVal: [] } }), 'empty');
    });

    it('reads every value itself when each element is sent, and leaves other counts to the regular decoder', () => {
      const run = new Uint8Array([0x05, 0xff, 0x01, 0x7f]); // 5, 255, 127
      const u8 = intValTensorData(run, 'uint8', 3, 'x');
      assert.ok(u8 instanceof Uint8Array);
      assert.deepEqual(Array.from(u8), [5, 255, 127]);
      const i16 = intValTensorData(run, 'int16', 3, 'x');
      assert.ok(i16 instanceof Int16Array);
      assert.deepEqual(Array.from(i16), [5, 255, 127]);
      assert.equal(intValTensorData(run, 'uint8', 4, 'x'), undefined, 'padding: the regular decoder');
      assert.equal(intValTensorData(run, 'uint8', 2, 'x'), undefined, 'excess: the regular decoder');
      assert.throws(
        () => intValTensorData(run, 'int8', 3, 'x'),
        /int_val value 255 is out of range for int8/,
      );
    });

    it('reads varints as protobuf does: ten-byte negatives, five-byte values past 2^31, high bits dropped', () => {
      // DT_INT32 [4]: -1 (ten bytes), 0xFFFFFFFF in five bytes (-1 as int32), 2^33 + 5 in six bytes
      // (5), and a fifth byte with bits above 31 set (ff ff ff ff 7f: -1 as int32).
      const run = [
        ...[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        ...[0xff, 0xff, 0xff, 0xff, 0x0f],
        ...[0x85, 0x80, 0x80, 0x80, 0x80, 0x02],
        ...[0xff, 0xff, 0xff, 0xff, 0x7f],
      ];
      const shape = [0x12, 4, 0x12, 2, 0x08, 0x04];
      const tensor = [0x08, 0x03, ...shape, 0x3a, run.length, ...run];
      const bytes = inputX(tensor);
      sameAsRegular(bytes, 'long varints');
      const view = fromBinary(PredictRequestViewSchema, bytes);
      assert.deepEqual(
        Array.from(tensorFromProtoView(view.inputs['x']!, 'x').data as Int32Array),
        [-1, -1, 5, -1],
      );
    });

    it('leaves malformed, unpacked, split or merged int_val runs to the regular decoder, whatever the dtype', () => {
      const shape = [0x12, 4, 0x12, 2, 0x08, 0x02];
      const withRun = (dtype: number, run: number[], trailer: number[] = []): Uint8Array =>
        inputX([0x08, dtype, ...shape, 0x3a, run.length, ...run], trailer);
      const endsInside = [0x05, 0x86];
      const overLong = [0x05, ...new Array<number>(10).fill(0x80), 0x01];
      // DT_UINT8 uses int_val; DT_FLOAT ignores it, yet the regular decoder still parses it.
      for (const dtype of [0x04, 0x01]) {
        for (const run of [endsInside, overLong]) {
          const bytes = withRun(dtype, run);
          assert.equal(predictRequestIsViewable(bytes), false, `dtype ${dtype}: ${run.length} bytes`);
          assert.throws(() => fromBinary(PredictRequestSchema, bytes), 'the regular message refuses it');
        }
      }
      // A run ending inside a value, followed by more bytes: protobuf-es reads on past the run
      // (here into a field 15 of the request, which it then skips) and accepts it; the view
      // must not answer differently, so it stays out of the way.
      const readsOn = withRun(0x03, [0x85], [0x7d, 0x78, 0x01, 0x78, 0x01, 0x78, 0x01]);
      assert.equal(predictRequestIsViewable(readsOn), false);
      // Two values in one map entry: merged by the regular decoder (runs joined).
      const t1 = [0x08, 0x04, ...shape, 0x3a, 1, 0x07];
      const t2 = [0x3a, 1, 0x09];
      const merged = [0x0a, 0x01, 0x78, 0x12, t1.length, ...t1, 0x12, t2.length, ...t2];
      const mergedBytes = new Uint8Array([0x12, merged.length, ...merged]);
      assert.equal(predictRequestIsViewable(mergedBytes), false);
      assert.deepEqual(fromBinary(PredictRequestSchema, mergedBytes).inputs['x']!.intVal, [7, 9]);
      // Kept as a guard for views built by hand: the decoder itself refuses such runs too.
      for (const [run, message] of [
        [endsInside, /int_val ends inside a value/],
        [overLong, /longer than 10 bytes/],
      ] as const) {
        const view = create(PredictRequestViewSchema, {
          inputs: {
            x: {
              dtype: DataType.DT_UINT8,
              tensorShape: { dim: [{ size: 2n }] },
              intVal: new Uint8Array(run),
            },
          },
        });
        assert.throws(() => tensorFromProtoView(view.inputs['x']!, 'x'), message);
      }
      // Unpacked: two int_val varint fields (wire type 0).
      const unpackedTensor = [0x08, 0x04, ...shape, 0x38, 0x07, 0x38, 0x09];
      const unpacked = inputX(unpackedTensor);
      assert.equal(predictRequestIsViewable(unpacked), false);
      const viaFallback = predictRequestViewFrom(fromBinary(PredictRequestSchema, unpacked));
      assert.deepEqual(
        Array.from(tensorFromProtoView(viaFallback.inputs['x']!, 'x').data as Uint8Array),
        [7, 9],
      );
      // Two packed runs: merged by regular decoders; the view would keep only the last.
      const splitTensor = [0x08, 0x04, ...shape, 0x3a, 1, 0x07, 0x3a, 1, 0x09];
      assert.equal(predictRequestIsViewable(inputX(splitTensor)), false);
      // A negative value through the fallback's repacking.
      const negTensor = [
        0x08,
        0x03,
        ...shape,
        0x38,
        0x05,
        ...[0x38, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
      ];
      const neg = predictRequestViewFrom(fromBinary(PredictRequestSchema, inputX(negTensor)));
      assert.deepEqual(Array.from(tensorFromProtoView(neg.inputs['x']!, 'x').data as Int32Array), [5, -2]);
    });
  });
});
