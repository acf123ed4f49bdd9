/**
 * FrameTensor (the gRPC frame stream's raw tensor frame): a tensor survives frameTensorOf, the
 * wire and tensorOfFrameTensor unchanged (numeric, with an odd offset in the message, and
 * BYTES); each malformed tensor is INVALID_ARGUMENT naming the problem.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import {
  FrameRequestSchema,
  type FrameTensor,
  frameTensorOf,
  tensorOfFrameTensor,
} from '@visionserve/protocol/stream-proto';

/** The tensor as a client sends it and the server parses it: through a serialized FrameRequest. */
function overTheWire(tensor: Tensor, modelName = 'm'): FrameTensor {
  const bytes = toBinary(
    FrameRequestSchema,
    create(FrameRequestSchema, { modelName, tensor: frameTensorOf(tensor) }),
  );
  return fromBinary(FrameRequestSchema, bytes).tensor!;
}

const invalid = (pattern: RegExp) => (e: unknown) =>
  e instanceof ServingError && e.code === Code.INVALID_ARGUMENT && pattern.test(e.message);

void describe('FrameTensor', () => {
  void it('round-trips numeric tensors, whatever their offset in the message', () => {
    const f32: Tensor = {
      dtype: 'float32',
      shape: [1, 2, 3],
      data: Float32Array.from([1, -2.5, 3, 4, 5, 6e-7]),
    };
    for (const name of ['m', 'mm', 'mmm', 'mmmm'])
      assert.deepEqual(tensorOfFrameTensor(overTheWire(f32, name), 'T'), f32);
    const u8: Tensor = { dtype: 'uint8', shape: [2, 2], data: Uint8Array.from([0, 1, 254, 255]) };
    assert.deepEqual(tensorOfFrameTensor(overTheWire(u8), 'T'), u8);
    const i64: Tensor = { dtype: 'int64', shape: [2], data: BigInt64Array.from([-1n, 2n ** 40n]) };
    assert.deepEqual(tensorOfFrameTensor(overTheWire(i64), 'T'), i64);
    assert.equal(overTheWire(f32).datatype, 'FP32');
  });

  void it('round-trips BYTES elements', () => {
    const s: Tensor = { dtype: 'string', shape: [2], data: [Buffer.from('ab'), new Uint8Array(0)] };
    const back = tensorOfFrameTensor(overTheWire(s), 'T');
    assert.deepEqual(back.shape, [2]);
    assert.deepEqual(
      (back.data as Uint8Array[]).map((b) => Buffer.from(b).toString()),
      ['ab', ''],
    );
  });

  void it('refuses unknown datatypes, bad dimensions and sizes that do not match', () => {
    const t = (datatype: string, shape: number[], bytes: number): FrameTensor =>
      create(FrameRequestSchema, {
        tensor: { datatype, shape: shape.map((d) => BigInt(d)), rawContents: new Uint8Array(bytes) },
      }).tensor!;
    assert.throws(
      () => tensorOfFrameTensor(t('FLOAT', [1], 4), 'T'),
      invalid(/^T: unknown datatype "FLOAT"/),
    );
    assert.throws(() => tensorOfFrameTensor(t('x'.repeat(1000), [1], 4), 'T'), invalid(/"x{32}\.\.\."/));
    assert.throws(() => tensorOfFrameTensor(t('FP32', [2, -1], 4), 'T'), invalid(/invalid dimension -1/));
    assert.throws(
      () => tensorOfFrameTensor(t('FP32', [2, 2], 12), 'T'),
      invalid(/12 bytes of binary data, but FP32 shape \[2,2\] takes 16/),
    );
    assert.throws(() => tensorOfFrameTensor(t('UINT8', [1e9, 1e9], 1), 'T'), invalid(/too many elements/));
    assert.throws(
      () => tensorOfFrameTensor(t('UINT8', new Array<number>(65).fill(1), 1), 'T'),
      invalid(/more than 64 dimensions/),
    );
  });
});
