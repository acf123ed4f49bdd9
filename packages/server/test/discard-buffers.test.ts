import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { discardNow, spentBuffers } from '../src/runtime/discard-buffers.js';
import type { WireTensor } from '../src/runtime/wire-tensor.js';

const MB = 1024 * 1024;

function wire(name: string, buffer: ArrayBuffer | SharedArrayBuffer): WireTensor {
  return {
    name,
    dtype: 'float32',
    shape: [buffer.byteLength / 4],
    buffer,
    byteOffset: 0,
    byteLength: buffer.byteLength,
  };
}

void describe('discarding a worker run’s garbage buffers', () => {
  void it('frees the memory by the next turn of the event loop, while the buffer is still referenced', async () => {
    await nextTurn();
    const before = process.memoryUsage().arrayBuffers;
    const big = new ArrayBuffer(64 * MB);
    new Uint8Array(big).fill(1);
    assert.ok(process.memoryUsage().arrayBuffers - before >= 64 * MB, 'the buffer is counted');
    discardNow(new Set([big]));
    assert.equal(big.byteLength, 0, 'detached');
    await nextTurn();
    await nextTurn();
    // `big` is still reachable here: only discarding can have freed its memory.
    const after = process.memoryUsage().arrayBuffers;
    assert.ok(
      after - before < 16 * MB,
      `64 MB freed (${((after - before) / MB).toFixed(1)} MB still counted)`,
    );
  });

  void it('leaves detached buffers alone and never throws', () => {
    const a = new ArrayBuffer(1024);
    discardNow(new Set([a]));
    assert.equal(a.byteLength, 0);
    discardNow(new Set([a])); // already gone: nothing to do
    discardNow(new Set());
    const b = new ArrayBuffer(16);
    discardNow(new Set([a, b]));
    assert.equal(b.byteLength, 0, 'a detached one among them is skipped, the rest still moved');
  });

  void it('a run that lent nothing leaves everything to the GC; one that lent frees its inputs too', () => {
    const input = new ArrayBuffer(1200);
    const shared = new SharedArrayBuffer(1200);
    const strings: WireTensor = { name: 's', dtype: 'string', shape: [1], strings: [new Uint8Array(3)] };
    const inputs = [wire('x', input), wire('pooled', shared), strings];
    assert.equal(spentBuffers(inputs, new Set()).size, 0);
    const output = new ArrayBuffer(4 * MB);
    const spent = spentBuffers(inputs, new Set([output]));
    assert.deepEqual(
      [...spent].sort((p, q) => p.byteLength - q.byteLength),
      [input, output],
    );
    // A shared input (a pooled request body) is never among them: other threads use that memory.
    assert.ok(![...spent].some((b) => (b as unknown) === shared));
  });
});
