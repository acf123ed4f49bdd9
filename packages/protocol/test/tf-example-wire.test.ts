import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { type ExampleFeatureSpec, type ExampleFeatures, examplesToTensors } from '../src/index.js';
import {
  ExampleSchema,
  denseExamplesToTensors,
  exampleFeaturesFromProto,
  parseSerializedExample,
} from '../src/tfs-proto/index.js';
import { WireFallback, readExampleFeatures } from '../src/tfs-proto/tf-example-wire.js';

/** Features as plain data, so that typed and plain arrays of the same values compare equal. */
function plain(features: ExampleFeatures): unknown {
  return [...features].map(([key, f]) => [
    key,
    f.kind,
    Array.from(f.values as ArrayLike<unknown>, (v) => (v instanceof Uint8Array ? Array.from(v) : v)),
  ]);
}

/** What protobuf-es makes of the bytes (the reference the wire reader must equal). */
const reference = (bytes: Uint8Array): unknown =>
  plain(exampleFeaturesFromProto(fromBinary(ExampleSchema, bytes)));

function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function randomExample(rand: () => number): Uint8Array {
  const feature: Record<string, unknown> = {};
  const n = Math.floor(rand() * 6);
  for (let i = 0; i < n; i++) {
    const count = Math.floor(rand() * 5);
    const pick = rand();
    const key = rand() < 0.1 ? `ключ${i}` : `f${i}`;
    if (pick < 0.4) {
      feature[key] = {
        kind: {
          case: 'floatList',
          value: { value: Array.from({ length: count }, () => Math.fround((rand() - 0.5) * 1e6)) },
        },
      };
    } else if (pick < 0.75) {
      const ints = Array.from({ length: count }, () => {
        const r = rand();
        return r < 0.3
          ? BigInt(Math.floor((rand() - 0.5) * 2 ** 40))
          : r < 0.5
            ? -(2n ** 63n) + BigInt(Math.floor(rand() * 100))
            : BigInt(Math.floor(rand() * 300));
      });
      feature[key] = { kind: { case: 'int64List', value: { value: ints } } };
    } else if (pick < 0.95) {
      const bytes = Array.from({ length: count }, () =>
        Uint8Array.from({ length: Math.floor(rand() * 8) }, () => Math.floor(rand() * 256)),
      );
      feature[key] = { kind: { case: 'bytesList', value: { value: bytes } } };
    } else {
      feature[key] = {};
    }
  }
  return toBinary(ExampleSchema, create(ExampleSchema, { features: { feature } } as never));
}

/** Hand-written wire bytes: [tag, ...payload] pieces, lengths computed. */
function ld(field: number, ...payload: (number | Uint8Array)[]): Uint8Array {
  const body = Uint8Array.from(payload.flatMap((p) => (typeof p === 'number' ? [p] : [...p])));
  return Uint8Array.from([(field << 3) | 2, body.length, ...body]);
}
const str = (s: string): Uint8Array => new TextEncoder().encode(s);
const f32 = (v: number): Uint8Array => new Uint8Array(Float32Array.of(v).buffer);

void describe('tf.Example wire reader', () => {
  void it('equals protobuf-es on 2000 random examples (floats, int64 extremes, bytes, empty features)', () => {
    const rand = seeded(7);
    for (let i = 0; i < 2000; i++) {
      const bytes = randomExample(rand);
      assert.deepEqual(plain(readExampleFeatures(bytes)), reference(bytes), `example ${i}`);
    }
  });

  void it('follows protobuf merge rules: unpacked floats, repeated lists append, another kind replaces, last key wins', () => {
    const entry = (key: string, ...feature: Uint8Array[]): Uint8Array =>
      ld(1, ld(1, str(key)), ld(2, ...feature));
    const cases = [
      // float_list with unpacked floats (wire type 5), twice: values append.
      ld(1, entry('x', ld(2, 0x0d, f32(1.5), 0x0d, f32(-2)), ld(2, ld(1, f32(3))))),
      // int64_list then float_list: the last kind wins; unpacked int64 varints.
      ld(1, entry('x', ld(3, 0x08, 5, 0x08, 0x7f), ld(2, ld(1, f32(4))))),
      // The same key twice (the later wins), two Features messages (merged), unknown fields skipped.
      Uint8Array.from([
        ...ld(1, entry('a', ld(2, ld(1, f32(1))))),
        ...[0x10, 0x05, 0x1a, 0x01, 0x00], // Example field 2 (varint) and 3 (bytes): unknown
        ...ld(1, entry('a', ld(3, ld(1, 9))), entry('b', ld(1, ld(1, 1, 2, 3)))),
      ]),
      // An entry without a value (empty feature) and one without a key ("").
      ld(1, ld(1, ld(1, str('nothing'))), ld(1, ld(2, ld(2, ld(1, f32(6)))))),
    ];
    for (const bytes of cases) assert.deepEqual(plain(readExampleFeatures(bytes)), reference(bytes));
  });

  void it('leaves malformed bytes to protobuf-es, which refuses them with TF wording', () => {
    const good = randomExample(seeded(3));
    for (const bad of [
      Uint8Array.of(0xff, 0xff, 0xff),
      Uint8Array.of(0x0a, 0x05, 0x0a),
      Uint8Array.of(0x0b),
    ]) {
      assert.throws(() => readExampleFeatures(bad), WireFallback);
      assert.throws(() => parseSerializedExample(bad), /Could not parse example input/);
    }
    assert.deepEqual(plain(parseSerializedExample(good)), reference(good));
  });
});

void describe('dense tf.Example fast path', () => {
  const specs: ExampleFeatureSpec[] = [
    { key: 'f0', dtype: 'float32', shape: [2] },
    { key: 'f1', dtype: 'int64', shape: [1], defaultValue: [-7] },
    { key: 'f2', dtype: 'float32', shape: [1, 3], defaultValue: [0.5, 1, 2] },
  ];
  const general = (blobs: Uint8Array[]): unknown => {
    try {
      return examplesToTensors({ examples: blobs.map(parseSerializedExample) }, specs);
    } catch (e) {
      return e;
    }
  };
  const example = (feature: Record<string, unknown>): Uint8Array =>
    toBinary(ExampleSchema, create(ExampleSchema, { features: { feature } } as never));
  const fl = (...v: number[]) => ({ kind: { case: 'floatList', value: { value: v } } });
  const il = (...v: bigint[]) => ({ kind: { case: 'int64List', value: { value: v } } });

  void it('equals the general path on every batch it takes, and leaves it every batch that fails', () => {
    const rand = seeded(11);
    let fast = 0;
    for (let i = 0; i < 500; i++) {
      const blobs = Array.from({ length: 1 + Math.floor(rand() * 4) }, () => {
        const f: Record<string, unknown> = { other: il(BigInt(i)) };
        if (rand() < 0.9) f['f0'] = rand() < 0.95 ? fl(rand(), -rand()) : fl(1);
        if (rand() < 0.6) f['f1'] = rand() < 0.95 ? il(BigInt(Math.floor((rand() - 0.5) * 2 ** 50))) : fl(2);
        if (rand() < 0.5) f['f2'] = fl(rand(), 2, 3);
        return example(f);
      });
      const got = denseExamplesToTensors(blobs, specs);
      const want = general(blobs);
      if (got === undefined) {
        assert.ok(
          want instanceof Error || blobs.length === 0,
          `batch ${i}: the fast path left a batch the general path takes`,
        );
        continue;
      }
      fast++;
      assert.deepEqual(got, want, `batch ${i}`);
    }
    assert.ok(fast > 100, `fast path taken ${fast} times`);
  });

  void it('leaves other dtypes, dynamic shapes and odd encodings to the general path', () => {
    const blob = example({ f0: fl(1, 2) });
    assert.equal(denseExamplesToTensors([blob], [{ key: 'f0', dtype: 'float64', shape: [2] }]), undefined);
    assert.equal(denseExamplesToTensors([blob], [{ key: 'f0', dtype: 'float32', shape: [-1] }]), undefined);
    assert.equal(denseExamplesToTensors([Uint8Array.of(0x0a, 0x05, 0x0a)], specs), undefined);
    assert.equal(denseExamplesToTensors([], specs), undefined);
    // Unpacked floats (wire type 5) are taken.
    const entry = (key: string, ...feature: Uint8Array[]): Uint8Array =>
      ld(1, ld(1, str(key)), ld(2, ...feature));
    const unpacked = ld(1, entry('f0', ld(2, 0x0d, f32(1.5), 0x0d, f32(-2))));
    assert.deepEqual(denseExamplesToTensors([unpacked], specs.slice(0, 1)), {
      f0: { dtype: 'float32', shape: [1, 2], data: Float32Array.of(1.5, -2) },
    });
  });
});
