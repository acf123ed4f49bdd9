import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  predictRequestIsViewable,
  predictRequestViewFrom,
  tensorFromProto,
  tensorFromProtoView,
} from '../src/tfs-proto/index.js';
import { PredictRequestSchema } from '../src/gen/tensorflow_serving/apis/predict_pb.js';
import { PredictRequestViewSchema } from '../src/gen/visionserve/predict_request_view_pb.js';

function request(
  inputs: Record<
    string,
    { dtype: number; dims: number[]; floatVal?: number[]; doubleVal?: number[]; intVal?: number[] }
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
          },
        ]),
      ),
    }),
  );
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
    const entry = [0x0a, 0x01, 0x78, 0x12, tensor.length, ...tensor];
    const unpacked = new Uint8Array([0x12, entry.length, ...entry]);
    assert.equal(predictRequestIsViewable(unpacked), false);
    const viaFallback = predictRequestViewFrom(fromBinary(PredictRequestSchema, unpacked));
    assert.deepEqual(
      Array.from(tensorFromProtoView(viaFallback.inputs['x']!, 'x').data as Float32Array),
      [1.5, 1.5],
    );

    // Two packed runs of field 5 in one tensor: legal protobuf, merged by regular decoders.
    const run = [0x2a, 4, ...f];
    const split = [0x08, 0x01, ...shape2, ...run, ...run];
    const entry2 = [0x0a, 0x01, 0x78, 0x12, split.length, ...split];
    const twoRuns = new Uint8Array([0x12, entry2.length, ...entry2]);
    assert.equal(predictRequestIsViewable(twoRuns), false);
    assert.deepEqual(fromBinary(PredictRequestSchema, twoRuns).inputs['x']!.floatVal, [1.5, 1.5]);
  });

  it('refuses float bytes that are not whole values, and truncated requests', () => {
    const bad = [0x08, 0x01, 0x2a, 3, 1, 2, 3];
    const entry = [0x0a, 0x01, 0x78, 0x12, bad.length, ...bad];
    const view = fromBinary(PredictRequestViewSchema, new Uint8Array([0x12, entry.length, ...entry]));
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
      const e = [0x0a, 0x01, 0x78, 0x12, t.length, ...t];
      assert.equal(predictRequestIsViewable(new Uint8Array([0x12, e.length, ...e])), false, `field ${field}`);
    }
  });
});
