import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { markAsUntransferable } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import { discardNow, spentBuffers } from '../src/runtime/discard-buffers.js';
import type { WireTensor } from '../src/runtime/wire-tensor.js';
import { sharedModel } from './shared-models.js';

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
  void it('frees the memory by a later turn of the event loop, while the buffer is still referenced', async () => {
    await nextTurn();
    const big = new ArrayBuffer(64 * MB);
    new Uint8Array(big).fill(1);
    const counted = process.memoryUsage().arrayBuffers;
    assert.ok(counted >= 64 * MB, 'the buffer is counted');
    discardNow(new Set([big]));
    assert.equal(big.byteLength, 0, 'detached');
    await nextTurn();
    await nextTurn();
    // `big` is still reachable here: only discarding can have freed its memory. (Other small
    // buffers may come and go meanwhile, hence the margin.)
    const freed = counted - process.memoryUsage().arrayBuffers;
    assert.ok(freed >= 48 * MB, `64 MB freed (${(freed / MB).toFixed(1)} MB)`);
  });

  void it('skips detached and untransferable buffers, moves the rest, never throws', () => {
    const a = new ArrayBuffer(1024);
    discardNow(new Set([a]));
    assert.equal(a.byteLength, 0);
    discardNow(new Set([a])); // already gone: nothing to do
    discardNow(new Set());
    const b = new ArrayBuffer(16);
    discardNow(new Set([a, b]));
    assert.equal(b.byteLength, 0, 'a detached one among them is skipped, the rest still moved');
    const pinned = new ArrayBuffer(16);
    markAsUntransferable(pinned);
    const c = new ArrayBuffer(16);
    discardNow(new Set([pinned, c])); // Node 20 skips `pinned`; later Nodes throw inside: caught
    assert.equal(pinned.byteLength, 16, 'an untransferable buffer stays usable');
  });

  void it('a run that lent nothing leaves everything to the GC; one that lent frees its inputs too, once each', () => {
    const input = new ArrayBuffer(1200);
    const shared = new SharedArrayBuffer(1200);
    const strings: WireTensor = { name: 's', dtype: 'string', shape: [1], strings: [new Uint8Array(3)] };
    // Two inputs in one buffer (as a request decoded into one message buffer can give).
    const twin: WireTensor = {
      name: 'x2',
      dtype: 'uint8',
      shape: [200],
      buffer: input,
      byteOffset: 1000,
      byteLength: 200,
    };
    const inputs = [wire('x', input), twin, wire('pooled', shared), strings];
    assert.equal(spentBuffers(inputs, new Set()).size, 0);
    const output = new ArrayBuffer(4 * MB);
    const spent = [...spentBuffers(inputs, new Set([output]))];
    assert.equal(spent.length, 2, 'each buffer once: a repeated one in a transfer list would move none');
    assert.ok(spent.includes(input) && spent.includes(output));
    // A shared input (a pooled request body) is never among them: other threads use that memory.
    assert.ok(!spent.some((b) => (b as unknown) === shared));
    discardNow(new Set(spent));
    assert.equal(input.byteLength + output.byteLength, 0, 'both moved');
  });

  void it("onnxruntime-node's output buffers can be moved (the discard relies on it)", async () => {
    // If a future onnxruntime-node hands outputs over as external, untransferable memory,
    // discarding them would silently do nothing: this says so.
    const session = await ort.InferenceSession.create(sharedModel('mnist-8.onnx'));
    try {
      const feeds = {
        [session.inputNames[0]!]: new ort.Tensor('float32', new Float32Array(28 * 28), [1, 1, 28, 28]),
      };
      const out = (await session.run(feeds))[session.outputNames[0]!]!;
      const buffer = (out.data as Float32Array).buffer as ArrayBuffer;
      assert.ok(buffer instanceof ArrayBuffer && buffer.byteLength > 0);
      discardNow(new Set([buffer]));
      assert.equal(buffer.byteLength, 0, 'moved');
    } finally {
      await session.release();
    }
  });
});
