import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  Code,
  ServingError,
  type PredictResult,
  type Predictor,
  concatTensors,
  encodeNpy,
  fromNested,
  parseNpy,
  predictBatched,
  splitTensor,
  stringTensorOf,
  tensor,
  tensorOf,
  toNested,
} from '../src/index.js';

describe('tensor helpers', () => {
  it('wraps typed arrays without copying and infers the dtype', () => {
    const data = new Float32Array([1, 2, 3, 4, 5, 6]);
    const t = tensor(data, [2, 3]);
    assert.equal(t.dtype, 'float32');
    assert.deepEqual(t.shape, [2, 3]);
    assert.equal(t.data, data);
    assert.equal(tensor(new BigInt64Array(2)).dtype, 'int64');
    assert.equal(tensor(new Uint8Array(2)).dtype, 'uint8');
  });

  it('copies plain arrays into the dtype, and checks the element count', () => {
    const t = tensorOf('int64', [1, 2, 3]);
    assert.ok(t.data instanceof BigInt64Array);
    assert.deepEqual(Array.from(t.data), [1n, 2n, 3n]);
    assert.equal(tensorOf('float16', new Uint16Array([15360])).data instanceof Uint16Array, true);
    assert.throws(
      () => tensor(new Float32Array(5), [2, 3]),
      (e: unknown) => e instanceof ServingError && e.code === Code.INVALID_ARGUMENT,
    );
  });

  it('converts nested arrays both ways', () => {
    const t = fromNested(
      [
        [1, 2, 3],
        [4, 5, 6],
      ],
      'int32',
    );
    assert.deepEqual(t.shape, [2, 3]);
    assert.deepEqual(toNested(t), [
      [1, 2, 3],
      [4, 5, 6],
    ]);
    assert.deepEqual(toNested(fromNested([true, false], 'bool')), [true, false]);
    assert.deepEqual(toNested(stringTensorOf(['a', 'bc'])), ['a', 'bc']);
    assert.equal(toNested(fromNested(2.5)), 2.5);
    assert.throws(() => fromNested([[1, 2], [3]]), ServingError);
  });

  it('concatenates along dimension 0 and splits back into views', () => {
    const a = tensor(new Float32Array([1, 2, 3, 4]), [2, 2]);
    const b = tensor(new Float32Array([5, 6]), [1, 2]);
    const ab = concatTensors([a, b]);
    assert.deepEqual(ab.shape, [3, 2]);
    assert.deepEqual(Array.from(ab.data as Float32Array), [1, 2, 3, 4, 5, 6]);
    const [x, y] = splitTensor(ab, [2, 1]);
    assert.deepEqual(x!.shape, [2, 2]);
    assert.deepEqual(Array.from(y!.data as Float32Array), [5, 6]);
    assert.equal((y!.data as Float32Array).buffer, (ab.data as Float32Array).buffer);
    assert.throws(() => concatTensors([a, tensor(new Float32Array(3), [1, 3])]), /does not match/);
    assert.throws(() => splitTensor(ab, [1, 1]), /add up to 2/);
  });
});

describe('NPY files', () => {
  it('round-trips numeric tensors', () => {
    for (const t of [
      tensor(new Float32Array([1.5, -2, 3]), [1, 3]),
      tensor(new Uint8Array([1, 2, 3, 4]), [2, 2]),
      tensor(new BigInt64Array([5n])),
      tensorOf('bool', new Uint8Array([1, 0])),
    ]) {
      const back = parseNpy(encodeNpy(t));
      assert.equal(back.dtype, t.dtype);
      assert.deepEqual(back.shape, t.shape);
      assert.deepEqual(Array.from(back.data as ArrayLike<unknown>), Array.from(t.data as ArrayLike<unknown>));
    }
  });

  it('pads the header to 64 bytes like numpy and rejects what it cannot read', () => {
    const bytes = encodeNpy(tensor(new Float32Array(4), [2, 2]));
    assert.equal((10 + new DataView(bytes.buffer).getUint16(8, true)) % 64, 0);
    const text = new TextDecoder().decode(bytes.subarray(0, 80));
    assert.match(text, /'descr': '<f4', 'fortran_order': False, 'shape': \(2, 2\)/);
    const big = new Uint8Array(bytes);
    big.set(new TextEncoder().encode('>f4'), text.indexOf('<f4'));
    assert.throws(() => parseNpy(big), /Unsupported .npy dtype '>f4'/);
    assert.throws(() => parseNpy(new Uint8Array(16)), /bad magic/);
  });
});

describe('predictBatched', () => {
  /** A fake model: y = 2x, batching along dim 0; records the batch sizes it saw. */
  const doubler = (seen: number[]): Predictor => ({
    predict(_model, inputs) {
      const x = inputs['x']!;
      seen.push(x.shape[0]!);
      const y = Float32Array.from(x.data as Float32Array, (v) => v * 2);
      return Promise.resolve({
        outputs: { y: { dtype: 'float32', shape: x.shape, data: y } },
        model: { name: 'm', version: 1 },
        wire: { requestBytes: 0, responseBytes: 0 },
      } satisfies PredictResult);
    },
  });

  it('groups rows up to maxBatchSize and splits every output back', async () => {
    const seen: number[] = [];
    const items = [1, 2, 3, 4, 5].map((v) => ({ x: tensor(new Float32Array([v, v]), [1, 2]) }));
    items.push({ x: tensor(new Float32Array([6, 6, 7, 7]), [2, 2]) });
    const out = await predictBatched(doubler(seen), 'm', items, { maxBatchSize: 3, concurrency: 2 });
    assert.deepEqual(seen.sort(), [2, 2, 3]);
    assert.equal(out.length, 6);
    assert.deepEqual(Array.from(out[4]!['y']!.data as Float32Array), [10, 10]);
    assert.deepEqual(out[5]!['y']!.shape, [2, 2]);
    assert.deepEqual(Array.from(out[5]!['y']!.data as Float32Array), [12, 12, 14, 14]);
  });

  it('refuses outputs that are not batched along dimension 0', async () => {
    const flat: Predictor = {
      predict: () =>
        Promise.resolve({
          outputs: { y: tensor(new Float32Array([1])) },
          model: { name: 'm', version: 1 },
          wire: { requestBytes: 0, responseBytes: 0 },
        }),
    };
    const items = [1, 2].map((v) => ({ x: tensor(new Float32Array([v]), [1, 1]) }));
    await assert.rejects(predictBatched(flat, 'm', items), /does not batch along dimension 0/);
  });
});
