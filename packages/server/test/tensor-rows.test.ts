import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { type Tensor } from '@visionserve/protocol';
import { concatRows, sliceRows } from '../src/batching/tensor-rows.js';

const s = (v: string): Uint8Array => new TextEncoder().encode(v);
const str = (t: Tensor): string[] => (t.data as Uint8Array[]).map((b) => new TextDecoder().decode(b));

void describe('tensor row operations', () => {
  void it('concatenates row ranges and pads with copies of the first row of the last range', () => {
    const a: Tensor = { dtype: 'int64', shape: [3, 2], data: BigInt64Array.of(1n, 2n, 3n, 4n, 5n, 6n) };
    const b: Tensor = { dtype: 'int64', shape: [1, 2], data: BigInt64Array.of(7n, 8n) };
    const out = concatRows(
      [
        { tensor: a, start: 1, rows: 2 },
        { tensor: b, start: 0, rows: 1 },
      ],
      2,
    );
    assert.deepEqual(out.shape, [5, 2]);
    assert.deepEqual([...(out.data as BigInt64Array)], [3n, 4n, 5n, 6n, 7n, 8n, 7n, 8n, 7n, 8n]);
    assert.notEqual((out.data as BigInt64Array).buffer, (a.data as BigInt64Array).buffer);
  });

  void it('handles string tensors', () => {
    const a: Tensor = { dtype: 'string', shape: [2], data: [s('a'), s('b')] };
    const b: Tensor = { dtype: 'string', shape: [1], data: [s('c')] };
    const out = concatRows(
      [
        { tensor: a, start: 0, rows: 2 },
        { tensor: b, start: 0, rows: 1 },
      ],
      1,
    );
    assert.deepEqual(str(out), ['a', 'b', 'c', 'c']);
    assert.deepEqual(str(sliceRows(out, 1, 2)), ['b', 'c']);
  });

  void it('pads inner dimensions of rank-3 tensors with each tensor’s first element', () => {
    const a: Tensor = { dtype: 'float32', shape: [1, 1, 2], data: Float32Array.of(9, 1) };
    const b: Tensor = { dtype: 'float32', shape: [1, 2, 3], data: Float32Array.of(1, 2, 3, 4, 5, 6) };
    const out = concatRows(
      [
        { tensor: a, start: 0, rows: 1 },
        { tensor: b, start: 0, rows: 1 },
      ],
      0,
      [2, 3],
    );
    assert.deepEqual(out.shape, [2, 2, 3]);
    assert.deepEqual([...(out.data as Float32Array)], [9, 1, 9, 9, 9, 9, 1, 2, 3, 4, 5, 6]);
  });

  void it('slices rows into a new buffer', () => {
    const t: Tensor = { dtype: 'uint8', shape: [3, 2], data: Uint8Array.of(1, 2, 3, 4, 5, 6) };
    const out = sliceRows(t, 1, 2);
    assert.deepEqual(out.shape, [2, 2]);
    assert.deepEqual([...(out.data as Uint8Array)], [3, 4, 5, 6]);
    (out.data as Uint8Array)[0] = 0;
    assert.equal((t.data as Uint8Array)[2], 3);
  });
});
