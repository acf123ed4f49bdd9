import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { create, toBinary, fromBinary } from '@bufbuild/protobuf';
import type { Tensor } from '../src/index.js';
import {
  DataType,
  PredictRequestSchema,
  PredictResponseSchema,
  TensorProtoSchema,
  decodePredictResponseFast,
  tensorFromProto,
  tensorToProto,
  writePredictRequest,
} from '../src/tfs-proto/index.js';

function reference(bytes: Uint8Array): Record<string, Tensor> {
  const response = fromBinary(PredictResponseSchema, bytes);
  return Object.fromEntries(
    Object.entries(response.outputs).map(([k, p]) => [k, tensorFromProto(p, `output '${k}'`)]),
  );
}

const plain = (t: Tensor): unknown => ({
  dtype: t.dtype,
  shape: t.shape,
  data: Array.from(t.data as ArrayLike<unknown>),
});

function check(bytes: Uint8Array): void {
  const fast = decodePredictResponseFast(bytes);
  const ref = reference(bytes);
  assert.deepEqual(Object.keys(fast.outputs).sort(), Object.keys(ref).sort());
  for (const k of Object.keys(ref)) assert.deepEqual(plain(fast.outputs[k]!), plain(ref[k]!), k);
}

describe('decodePredictResponseFast equals the protobuf-es decoder', () => {
  it('typed float/double/int/string/bool outputs, tensor_content, model_spec', () => {
    const f = new Float32Array(1000).map((_, i) => Math.sin(i) * 1e3);
    const response = create(PredictResponseSchema, {
      modelSpec: { name: 'm', versionChoice: { case: 'version', value: { value: 7n } } },
      outputs: {
        scores: tensorToProto({ dtype: 'float32', shape: [10, 100], data: f }, { asTensorContent: false }),
        raw: tensorToProto({ dtype: 'float32', shape: [1000], data: f }, { asTensorContent: true }),
        d: tensorToProto(
          { dtype: 'float64', shape: [3], data: new Float64Array([1.5, -2, 1e300]) },
          { asTensorContent: false },
        ),
        i: tensorToProto(
          { dtype: 'int32', shape: [2, 2], data: new Int32Array([1, -2, 3, 4]) },
          { asTensorContent: false },
        ),
        s: tensorToProto(
          { dtype: 'string', shape: [2], data: [new Uint8Array([104, 105]), new Uint8Array(0)] },
          { asTensorContent: false },
        ),
        b: tensorToProto(
          { dtype: 'bool', shape: [2], data: new Uint8Array([1, 0]) },
          { asTensorContent: false },
        ),
        scalar: tensorToProto(
          { dtype: 'float32', shape: [], data: new Float32Array([3.25]) },
          { asTensorContent: false },
        ),
      },
    });
    const bytes = toBinary(PredictResponseSchema, response);
    check(bytes);
    const fast = decodePredictResponseFast(bytes);
    assert.equal(fast.modelSpec?.name, 'm');
    assert.ok(fast.outputs['scores']!.data instanceof Float32Array);
  });

  it('falls back for TF broadcast semantics (fewer values than elements) and empty tensors', () => {
    const one = create(TensorProtoSchema, {
      dtype: DataType.DT_FLOAT,
      tensorShape: { dim: [{ size: 4n }] },
      floatVal: [2.5],
    });
    const empty = create(TensorProtoSchema, {
      dtype: DataType.DT_FLOAT,
      tensorShape: { dim: [{ size: 0n }] },
    });
    check(toBinary(PredictResponseSchema, create(PredictResponseSchema, { outputs: { one, empty } })));
    assert.deepEqual(
      Array.from(
        decodePredictResponseFast(
          toBinary(PredictResponseSchema, create(PredictResponseSchema, { outputs: { one } })),
        ).outputs['one']!.data as Float32Array,
      ),
      [2.5, 2.5, 2.5, 2.5],
    );
  });

  it('joins several packed runs of one field (protobuf merge semantics)', () => {
    const a = toBinary(
      TensorProtoSchema,
      create(TensorProtoSchema, {
        dtype: DataType.DT_FLOAT,
        tensorShape: { dim: [{ size: 4n }] },
        floatVal: [1, 2],
      }),
    );
    const b = toBinary(TensorProtoSchema, create(TensorProtoSchema, { floatVal: [3, 4] }));
    const merged = new Uint8Array([...a, ...b]);
    const entry = new Uint8Array([0x0a, 1, 0x78, 0x12, merged.length, ...merged]); // key "x", value
    const response = new Uint8Array([0x0a, entry.length, ...entry]);
    check(response);
    assert.deepEqual(
      Array.from(decodePredictResponseFast(response).outputs['x']!.data as Float32Array),
      [1, 2, 3, 4],
    );
  });

  it('reports malformed bytes like the reference decoder', () => {
    const bad = new Uint8Array([0x0a, 0x05, 0x0a, 0x01]);
    assert.throws(() => decodePredictResponseFast(bad));
    assert.throws(() => reference(bad));
  });
});

describe('writePredictRequest (zero-copy tensor_content chunks)', () => {
  const head = create(PredictRequestSchema, {
    modelSpec: {
      name: 'm',
      signatureName: 'serving_default',
      versionChoice: { case: 'version', value: { value: 3n } },
    },
    outputFilter: ['out'],
  });
  const inputs: Record<string, Tensor> = {
    image: {
      dtype: 'float32',
      shape: [1, 3, 224, 224],
      data: new Float32Array(3 * 224 * 224).map((_, i) => i % 255),
    },
    'a key with ünïcode': { dtype: 'int64', shape: [2], data: new BigInt64Array([1n, -2n]) },
    names: { dtype: 'string', shape: [2], data: [new Uint8Array([97]), new Uint8Array([98, 99])] },
    empty: { dtype: 'uint8', shape: [0], data: new Uint8Array(0) },
  };

  it('concatenates to a message that decodes like protobuf-es encoding, without copying tensor bytes', () => {
    const chunks = writePredictRequest(head, inputs, true);
    assert.ok(
      chunks.some((c) => c.buffer === (inputs['image']!.data as Float32Array).buffer),
      'tensor bytes are a view',
    );
    const joined = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
    let o = 0;
    for (const c of chunks) {
      joined.set(c, o);
      o += c.byteLength;
    }
    const decoded = fromBinary(PredictRequestSchema, joined);
    assert.equal(decoded.modelSpec?.name, 'm');
    assert.deepEqual(decoded.outputFilter, ['out']);
    assert.deepEqual(Object.keys(decoded.inputs).sort(), Object.keys(inputs).sort());
    for (const [alias, t] of Object.entries(inputs)) {
      assert.deepEqual(plain(tensorFromProto(decoded.inputs[alias]!, alias)), plain(t), alias);
    }
    const [typed] = writePredictRequest(head, inputs, false);
    const viaTyped = fromBinary(PredictRequestSchema, typed!);
    assert.deepEqual(plain(tensorFromProto(viaTyped.inputs['image']!, 'image')), plain(inputs['image']!));
    assert.ok(viaTyped.inputs['image']!.floatVal.length > 0);
  });
});
