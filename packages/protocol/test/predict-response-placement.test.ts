import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { create, toBinary } from '@bufbuild/protobuf';
import type { DType, Tensor } from '../src/index.js';
import { allocate } from '../src/index.js';
import {
  PredictResponseSchema,
  decodePredictResponseFast,
  predictResponsePadding,
  tensorToProto,
} from '../src/tfs-proto/index.js';
import { mulberry32 } from './seeded-random.js';

/** `bytes` behind a 5-byte prefix, cut at random points into frames (as HTTP/2 delivers them). */
function frames(bytes: Uint8Array, random: () => number, maxFrame: number): Uint8Array[] {
  const all = new Uint8Array(5 + bytes.byteLength);
  all.set(bytes, 5);
  const out: Uint8Array[] = [];
  let at = 0;
  while (at < all.byteLength) {
    const n = 1 + Math.floor(random() * maxFrame);
    out.push(all.subarray(at, Math.min(all.byteLength, at + n)));
    at += n;
  }
  return out;
}

/** The message copied into a fresh buffer at `pad`, as the client's channel joins it. */
function placed(bytes: Uint8Array, pad: number): Uint8Array {
  const out = new Uint8Array(new ArrayBuffer(pad + bytes.byteLength), pad, bytes.byteLength);
  out.set(bytes);
  return out;
}

const DTYPES: readonly DType[] = [
  'float32',
  'float64',
  'int8',
  'uint8',
  'int16',
  'int32',
  'int64',
  'float16',
];

function randomTensor(dtype: DType, n: number, random: () => number): Tensor {
  const data = allocate(dtype as Exclude<DType, 'string' | 'bfloat16'>, n);
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(random() * 256);
  return { dtype, shape: [n], data };
}

const plain = (t: Tensor): unknown => ({
  dtype: t.dtype,
  shape: t.shape,
  data: Array.from(t.data as ArrayLike<unknown>, (v) =>
    typeof v === 'number' && Number.isNaN(v) ? 'NaN' : v,
  ),
});

describe('predictResponsePadding', () => {
  it('aligns the largest tensor payload (a view, no copy) and decodes like the unplaced message', () => {
    const random = mulberry32(7);
    for (let round = 0; round < 60; round++) {
      const outputs: Record<string, ReturnType<typeof tensorToProto>> = {};
      let largest = '';
      let largestBytes = -1;
      const count = 1 + Math.floor(random() * 3);
      for (let i = 0; i < count; i++) {
        const dtype = DTYPES[Math.floor(random() * DTYPES.length)]!;
        const n = Math.floor(random() * 3000);
        const tensor = randomTensor(dtype, n, random);
        const size = (tensor.data as ArrayBufferView).byteLength;
        const name = `out_${'x'.repeat(Math.floor(random() * 9))}${i}`;
        const asTensorContent = random() < 0.8 || (dtype !== 'float32' && dtype !== 'float64');
        outputs[name] = tensorToProto(tensor, { asTensorContent });
        if (size > largestBytes) {
          largestBytes = size;
          largest = name;
        }
      }
      const bytes = toBinary(
        PredictResponseSchema,
        create(PredictResponseSchema, { modelSpec: { name: 'm'.repeat(round % 5) }, outputs }),
      );
      const pad = predictResponsePadding(
        frames(bytes, random, 1 + Math.floor(random() * 600)),
        5,
        bytes.length,
      );
      assert.ok(pad >= 0 && pad < 8, `pad ${pad}`);
      const reference = decodePredictResponseFast(bytes).outputs;
      const fast = decodePredictResponseFast(placed(bytes, pad)).outputs;
      assert.deepEqual(Object.keys(fast).sort(), Object.keys(reference).sort());
      for (const k of Object.keys(reference)) assert.deepEqual(plain(fast[k]!), plain(reference[k]!), k);
      const big = fast[largest]!.data as ArrayBufferView;
      if (largestBytes > 0 && big.byteOffset !== 0) {
        // A view into the placed message (aligned), not a copy.
        assert.equal(big.byteOffset % 8, 0);
      }
      if (largestBytes >= 16) assert.ok(big.byteOffset !== 0, `round ${round}: '${largest}' was copied`);
    }
  });

  it('answers 0 for truncated, malformed and hostile messages (the decoder reports them)', () => {
    const random = mulberry32(11);
    const good = toBinary(
      PredictResponseSchema,
      create(PredictResponseSchema, {
        outputs: {
          y: tensorToProto(randomTensor('float32', 100, random), { asTensorContent: true }),
        },
      }),
    );
    for (let cut = 0; cut < good.length; cut += 7) {
      const pad = predictResponsePadding(frames(good.subarray(0, cut), random, 50), 5, good.length);
      assert.ok(pad >= 0 && pad < 8);
    }
    const hostile = [
      new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), // length far past the end
      new Uint8Array([0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), // varint too long
      new Uint8Array([0x0f, 0x00]), // wire type 7
      new Uint8Array([0x0a, 0x04, 0x12, 0x02, 0x22, 0x7f]), // inner length past the entry
      new Uint8Array(0),
    ];
    for (const bytes of hostile)
      assert.equal(predictResponsePadding(frames(bytes, random, 3), 5, bytes.length), 0);
    // The message starts inside a later frame than the first.
    const split = [new Uint8Array([0, 0]), new Uint8Array([0, 0, good.length & 0xff]), good];
    assert.equal(
      predictResponsePadding(split, 5, good.length),
      predictResponsePadding([placed(good, 0)], 0, good.length),
    );
  });
});
