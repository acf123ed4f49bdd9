import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { create, toBinary } from '@bufbuild/protobuf';
import type { DType, Tensor } from '../src/index.js';
import { DTYPES, allocate } from '../src/index.js';
import {
  ModelSpecSchema,
  PredictResponseSchema,
  type ModelSpec,
  tensorToProto,
  writePredictResponse,
} from '../src/tfs-proto/index.js';
import { ModelInferResponseSchema, writeModelInferResponse } from '../src/kserve-proto/index.js';
import { datatypeOfDtype } from '../src/kserve/index.js';
import { mulberry32 } from './seeded-random.js';

const join = (chunks: readonly Uint8Array[]): Buffer => Buffer.concat(chunks);

/** The dtypes of the random responses: all but string and bfloat16. */
const NUMERIC = DTYPES.filter(
  (d): d is Exclude<DType, 'string' | 'bfloat16'> => d !== 'string' && d !== 'bfloat16',
);

const NAMES = ['', 'm', 'mobilenet', 'ü-ñame', 'x'.repeat(200)];

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!;
}

/** A random tensor of up to 3 dimensions (zero sizes included, dimensions past one varint byte too). */
function tensorOf(random: () => number): Tensor {
  const dtype = pick(random, NUMERIC);
  const rank = Math.floor(random() * 4);
  const shape = Array.from({ length: rank }, () => pick(random, [0, 1, 2, 3, 130, 20000]));
  const count = shape.reduce((a, b) => a * b, 1);
  const small = count <= 4096 ? shape : shape.map(() => 1);
  const data = allocate(
    dtype,
    small.reduce((a, b) => a * b, 1),
  );
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(random() * 256);
  if (dtype === 'bool') for (let i = 0; i < bytes.length; i++) bytes[i] = bytes[i]! & 1;
  // Random bits may be NaNs with payloads, which typed float fields do not carry bit for bit.
  if (data instanceof Float32Array || data instanceof Float64Array)
    for (let i = 0; i < data.length; i++) data[i] = Math.floor(random() * 200) / 8 - 12;
  return { dtype, shape: small, data };
}

function specOf(random: () => number): ModelSpec {
  const version = pick(random, [0n, 1n, 127n, 128n, 2n ** 40n, -1n, 2n ** 63n - 1n]);
  const choice = Math.floor(random() * 3);
  return create(ModelSpecSchema, {
    name: pick(random, NAMES),
    signatureName: pick(random, ['', 'serving_default', 'é']),
    versionChoice:
      choice === 0
        ? { case: 'version', value: { value: version } }
        : choice === 1
          ? { case: 'versionLabel', value: pick(random, ['', 'stable']) }
          : { case: undefined },
  });
}

describe('hand-written response heads', () => {
  it('PredictResponse: the same bytes as protobuf-es for random outputs and model specs', () => {
    const random = mulberry32(16);
    for (let round = 0; round < 400; round++) {
      const outputs: Record<string, Tensor> = {};
      const n = 1 + Math.floor(random() * 3);
      for (let i = 0; i < n; i++) outputs[pick(random, NAMES) + String(i)] = tensorOf(random);
      const asTensorContent = random() < 0.5;
      const spec = random() < 0.8 ? specOf(random) : undefined;
      const fast = join(writePredictResponse(outputs, spec, asTensorContent));
      const message = create(PredictResponseSchema, { modelSpec: spec });
      for (const [alias, tensor] of Object.entries(outputs))
        message.outputs[alias] = tensorToProto(tensor, { asTensorContent });
      assert.deepEqual(fast, Buffer.from(toBinary(PredictResponseSchema, message)), `round ${round}`);
    }
  });

  it('ModelInferResponse: the same bytes as protobuf-es for random outputs', () => {
    const random = mulberry32(17);
    for (let round = 0; round < 300; round++) {
      const outputs = Array.from({ length: Math.floor(random() * 4) }, (_, i) => ({
        name: pick(random, NAMES) + String(i),
        tensor: tensorOf(random),
      }));
      const response = {
        modelName: pick(random, NAMES),
        modelVersion: pick(random, ['', '1', '12']),
        id: pick(random, ['', 'req-1']),
        outputs,
      };
      const chunks = writeModelInferResponse(response);
      const message = create(ModelInferResponseSchema, {
        modelName: response.modelName,
        modelVersion: response.modelVersion,
        id: response.id,
        outputs: outputs.map((o) => ({
          name: o.name,
          datatype: datatypeOfDtype(o.tensor.dtype),
          shape: o.tensor.shape.map(BigInt),
        })),
        rawOutputContents: outputs.map((o) => {
          const d = o.tensor.data as Exclude<Tensor['data'], readonly Uint8Array[]>;
          return new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
        }),
      });
      assert.deepEqual(
        join(chunks),
        Buffer.from(toBinary(ModelInferResponseSchema, message)),
        `round ${round}`,
      );
    }
  });
});
